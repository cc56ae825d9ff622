package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// writeEd25519Key writes a new unencrypted key in OpenSSH format to path.
func writeEd25519Key(t *testing.T, path string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "test")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(block), 0o600))
}

func TestAuthKeys(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()

	plain := filepath.Join(dir, "plain")
	writeEd25519Key(t, plain)
	a, err := newAuth(&config{identities: stringList{plain}})
	require.NoError(t, err)
	require.Len(t, a.files, 1)
	require.Len(t, a.methods(), 1, "all keys share one publickey method")
	a.close()

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte("secret"))
	require.NoError(t, err)
	locked := filepath.Join(dir, "locked")
	require.NoError(t, os.WriteFile(locked, pem.EncodeToMemory(block), 0o600))
	_, err = newAuth(&config{identities: stringList{locked}})
	require.ErrorContains(t, err, "protected by a passphrase")
	require.ErrorContains(t, err, "ssh-add "+locked)

	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, []byte("not a key"), 0o600))
	_, err = newAuth(&config{identities: stringList{junk}})
	require.ErrorContains(t, err, "key "+junk)

	// An encrypted default key is skipped, as ssh would prompt for it; with nothing
	// else there are no keys at all.
	home := os.Getenv("HOME")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), pem.EncodeToMemory(block), 0o600))
	_, err = newAuth(&config{})
	require.ErrorContains(t, err, "no SSH keys")
}

func TestExpandHome(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	require.Equal(t, "/home/someone/.ssh/k", expandHome("~/.ssh/k"))
	require.Equal(t, "~user/k", expandHome("~user/k"))
	require.Equal(t, "/abs", expandHome("/abs"))
}
