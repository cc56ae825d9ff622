package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func newEd25519Key(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	k, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	return k
}

func newECDSAKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k, err := ssh.NewPublicKey(&priv.PublicKey)
	require.NoError(t, err)
	return k
}

// knownHostsFile writes lines to a new known_hosts file.
func knownHostsFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o600))
	return p
}

func TestHostKeyCheck(t *testing.T) {
	t.Parallel()
	const addr = "127.0.0.1:2222"
	remoteAddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	good, other, ec := newEd25519Key(t), newEd25519Key(t), newECDSAKey(t)
	file := knownHostsFile(t,
		knownhosts.Line([]string{addr}, good),
		knownhosts.Line([]string{"example.org"}, other),
	)
	db, err := loadHostKeys(&hostConfig{knownHosts: []string{file}, strict: "yes"})
	require.NoError(t, err)

	check := func(key ssh.PublicKey, accept bool) (*hostCheck, string, error) {
		var warn bytes.Buffer
		c := db.checker(addr, remoteAddr, &hostConfig{strict: "yes", insecure: accept}, &prompter{}, &warn)
		err := c.callback(addr, remoteAddr, key)
		return c, warn.String(), err
	}

	c, warn, err := check(good, false)
	require.NoError(t, err)
	require.Empty(t, warn)
	// Only the type known_hosts lists is asked for, so the server cannot pick another.
	require.Equal(t, []string{ssh.KeyAlgoED25519}, c.algorithms)

	for _, accept := range []bool{false, true} {
		_, warn, err = check(other, accept)
		require.ErrorContains(t, err, "HOST KEY MISMATCH for [127.0.0.1]:2222", "accept=%v", accept)
		require.ErrorContains(t, err, ssh.FingerprintSHA256(other))
		require.ErrorContains(t, err, ssh.FingerprintSHA256(good))
		require.ErrorContains(t, err, file+":1")
		require.Empty(t, warn, "a changed key is never accepted")
	}

	// A host known_hosts does not list.
	unknownDB, err := loadHostKeys(&hostConfig{knownHosts: []string{knownHostsFile(t, knownhosts.Line([]string{"example.org"}, other))}})
	require.NoError(t, err)
	c = unknownDB.checker(addr, remoteAddr, &hostConfig{strict: "ask"}, &prompter{}, &bytes.Buffer{})
	require.Empty(t, c.algorithms, "no restriction for an unknown host")
	err = c.callback(addr, remoteAddr, ec)
	require.ErrorContains(t, err, "unknown host [127.0.0.1]:2222")
	require.ErrorContains(t, err, ssh.FingerprintSHA256(ec))
	require.ErrorContains(t, err, "StrictHostKeyChecking=accept-new")
	require.Equal(t, err, c.err, "the refusal is kept for the message")

	var warnBuf bytes.Buffer
	c = unknownDB.checker(addr, remoteAddr, &hostConfig{strict: "ask", insecure: true}, &prompter{}, &warnBuf)
	require.NoError(t, c.callback(addr, remoteAddr, ec))
	require.Contains(t, warnBuf.String(), "sluice: warning: accepting unknown host [127.0.0.1]:2222")
	require.Contains(t, warnBuf.String(), ssh.FingerprintSHA256(ec))
}

func TestHostKeyMissingFile(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope")
	db, err := loadHostKeys(&hostConfig{knownHosts: []string{missing}})
	require.NoError(t, err)
	c := db.checker("h:22", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 22}, &hostConfig{strict: "yes"}, &prompter{}, &bytes.Buffer{})
	err = c.callback("h:22", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 22}, newEd25519Key(t))
	require.ErrorContains(t, err, "unknown host h:")
	require.ErrorContains(t, err, missing+" (which does not exist)")
}

func TestHostKeyRevoked(t *testing.T) {
	t.Parallel()
	bad := newEd25519Key(t)
	file := knownHostsFile(t, "@revoked * "+string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(bad))))
	db, err := loadHostKeys(&hostConfig{knownHosts: []string{file}, strict: "yes"})
	require.NoError(t, err)
	ra := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
	err = db.checker("h:22", ra, &hostConfig{strict: "no", insecure: true}, &prompter{}, &bytes.Buffer{}).callback("h:22", ra, bad)
	require.ErrorContains(t, err, "@revoked in "+file+":1")
}

func TestHostKeyBadFile(t *testing.T) {
	t.Parallel()
	_, err := loadHostKeys(&hostConfig{knownHosts: []string{knownHostsFile(t, "h ssh-ed25519 not-base64!")}})
	require.ErrorContains(t, err, "reading known_hosts")
}

func TestHostKeyAlgorithms(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}, hostKeyAlgorithms(ssh.KeyAlgoRSA))
	require.Equal(t, []string{ssh.KeyAlgoECDSA256}, hostKeyAlgorithms(ssh.KeyAlgoECDSA256))

	// Two known keys of different types: both types are asked for, each once.
	const addr = "example.net:22"
	ra := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 22}
	file := knownHostsFile(t,
		knownhosts.Line([]string{addr}, newEd25519Key(t)),
		knownhosts.Line([]string{addr}, newECDSAKey(t)),
		knownhosts.Line([]string{addr}, newEd25519Key(t)),
	)
	db, err := loadHostKeys(&hostConfig{knownHosts: []string{file}, strict: "yes"})
	require.NoError(t, err)
	c := db.checker(addr, ra, &hostConfig{strict: "yes"}, &prompter{}, &bytes.Buffer{})
	require.Equal(t, []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256}, c.algorithms)
	require.Contains(t, c.handshakeHint(), "ssh-ed25519, ecdsa-sha2-nistp256")
}
