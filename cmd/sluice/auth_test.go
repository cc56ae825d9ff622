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
	"golang.org/x/crypto/ssh/agent"
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
	noTTY := &prompter{}

	plain := filepath.Join(dir, "plain")
	writeEd25519Key(t, plain)
	a, err := newAuth(&hostConfig{identityFiles: []string{plain}, cliIdentities: []string{plain}, pubkey: true, password: true, kbdInteractive: true}, noTTY)
	require.NoError(t, err)
	require.Len(t, a.files, 1)
	require.Len(t, a.methods(), 1, "all keys share one publickey method; no terminal, no password prompts")
	signers, err := a.signers()
	require.NoError(t, err)
	require.Len(t, signers, 1)
	a.close()

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte("secret"))
	require.NoError(t, err)
	locked := filepath.Join(dir, "locked")
	require.NoError(t, os.WriteFile(locked, pem.EncodeToMemory(block), 0o600))
	a, err = newAuth(&hostConfig{identityFiles: []string{locked}, cliIdentities: []string{locked}, pubkey: true}, noTTY)
	require.NoError(t, err)
	_, err = a.signers()
	require.ErrorContains(t, err, "protected by a passphrase")
	require.ErrorContains(t, err, "ssh-add "+locked)

	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, []byte("not a key"), 0o600))
	a, err = newAuth(&hostConfig{identityFiles: []string{junk}, cliIdentities: []string{junk}, pubkey: true}, noTTY)
	require.NoError(t, err)
	_, err = a.signers()
	require.ErrorContains(t, err, "key "+junk)

	// A -i file that does not exist is a typo; an IdentityFile from ssh_config that
	// does not exist here is skipped, as ssh does.
	absent := filepath.Join(dir, "absent")
	_, err = newAuth(&hostConfig{identityFiles: []string{absent}, cliIdentities: []string{absent}, pubkey: true}, noTTY)
	require.ErrorContains(t, err, "reading key")
	a, err = newAuth(&hostConfig{identityFiles: []string{absent, plain}, pubkey: true}, noTTY)
	require.NoError(t, err)
	require.Len(t, a.files, 1)

	// An encrypted default key is skipped without a terminal; with nothing else there
	// is nothing to try.
	home := os.Getenv("HOME")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), pem.EncodeToMemory(block), 0o600))
	a, err = newAuth(&hostConfig{pubkey: true}, noTTY)
	require.NoError(t, err)
	signers, err = a.signers()
	require.NoError(t, err)
	require.Empty(t, signers)
}

func TestExpandHome(t *testing.T) {
	t.Setenv("HOME", "/home/someone")
	require.Equal(t, "/home/someone/.ssh/k", expandHome("~/.ssh/k"))
	require.Equal(t, "~user/k", expandHome("~user/k"))
	require.Equal(t, "/abs", expandHome("/abs"))
}

// IdentitiesOnly: of the agent's keys only those matching a named key file are
// offered; without it, all of them, after the files.
func TestAuthIdentitiesOnly(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	named := filepath.Join(dir, "named")
	writeEd25519Key(t, named)
	raw, err := os.ReadFile(named)
	require.NoError(t, err)
	namedKey, err := ssh.ParseRawPrivateKey(raw)
	require.NoError(t, err)
	_, other, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	keyring := agent.NewKeyring()
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: other}))
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: namedKey}))

	for _, only := range []bool{false, true} {
		a, err := newAuth(&hostConfig{identityFiles: []string{named}, identitiesOnly: only, pubkey: true}, &prompter{})
		require.NoError(t, err)
		a.agent = keyring.(agent.ExtendedAgent)
		signers, err := a.signers()
		require.NoError(t, err)
		want := 3
		if only {
			want = 2 // the file, and the agent's copy of it
		}
		require.Len(t, signers, want, "IdentitiesOnly=%v", only)
		for _, s := range signers[:1] {
			require.Equal(t, "ssh-ed25519", s.PublicKey().Type())
		}
	}
}
