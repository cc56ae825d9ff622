package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The ssh_config algorithm keywords reach the handshake: an sshd that accepts only
// algorithms x/crypto calls insecure (AES-CBC, DH group 14 with SHA-1, HMAC-SHA1-96)
// is reached when, and only when, each is named, and a pattern does not name them.
func TestSSHConfigAlgorithmKeywords(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{ExtraConfig: []string{
		"Ciphers aes128-cbc", "KexAlgorithms diffie-hellman-group14-sha1", "MACs hmac-sha1-96",
	}})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	all := []string{"Ciphers +aes128-cbc", "KexAlgorithms ^diffie-hellman-group14-sha1", "MACs hmac-sha1-96,hmac-sha2-256"}
	writeUserSSHConfig(t, hostBlock("box", s, all...), s)
	r := runCLI(t, "ls", "box:"+dir)
	requireOK(t, r)
	require.Equal(t, "f\n", r.stdout)

	for i, kw := range all {
		// Each keyword left out, or given as a pattern that matches the insecure name:
		// the handshake finds nothing in common.
		pattern := strings.Fields(kw)[0] + " " + map[int]string{0: "+aes128-*", 1: "diffie-hellman-group14-*", 2: "hmac-sha1*"}[i]
		for _, replacement := range []string{"", pattern} {
			extra := append([]string{replacement}, all[:i]...)
			extra = append(extra, all[i+1:]...)
			writeUserSSHConfig(t, hostBlock("box", s, extra...), s)
			r := runCLI(t, "ls", "box:"+dir)
			require.Equal(t, exitFail, r.code, "%q", extra)
			require.Contains(t, r.stderr, "no common algorithm", "%q", extra)
		}
	}
}

// HostKeyAlias names the host in known_hosts (as OpenSSH: the alias alone, without
// the port), for the lookup and for a key recorded; HostKeyAlgorithms limits and
// orders the host key algorithms asked for.
func TestSSHConfigHostKeyAliasAndAlgorithms(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	kh := filepath.Join(os.Getenv("HOME"), ".ssh", "known_hosts")
	writeUserSSHConfig(t, hostBlock("box", s, "HostKeyAlias backup-box"))
	require.NoError(t, os.WriteFile(kh, []byte(knownhosts.Line([]string{"backup-box"}, s.HostKey)+"\n"), 0o600))
	r := runCLI(t, "ls", "box:"+dir)
	requireOK(t, r)

	// Without the alias the same file does not know the host.
	writeUserSSHConfig(t, hostBlock("box", s))
	require.NoError(t, os.WriteFile(kh, []byte(knownhosts.Line([]string{"backup-box"}, s.HostKey)+"\n"), 0o600))
	r = runCLI(t, "ls", "box:"+dir)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, fmt.Sprintf("unknown host [127.0.0.1]:%d", s.Port))

	// accept-new records the key under the alias.
	writeUserSSHConfig(t, hostBlock("box", s, "HostKeyAlias other-name", "StrictHostKeyChecking accept-new", "HashKnownHosts no"))
	r = runCLI(t, "ls", "box:"+dir)
	requireOK(t, r)
	require.Contains(t, r.stderr, "permanently added other-name (ED25519)")
	line, err := os.ReadFile(kh)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(line), "other-name ssh-ed25519 "), "%s", line)

	// HostKeyAlgorithms: the ed25519 host is reached when the list allows ed25519.
	for v, ok := range map[string]bool{
		"ecdsa-sha2-nistp256":             false,
		"-ssh-ed25519":                    false,
		"ecdsa-sha2-nistp256,ssh-ed25519": true,
		"^ssh-ed25519":                    true,
		"rsa-sha2-512,ssh-ed*":            true,
	} {
		writeUserSSHConfig(t, hostBlock("box", s, "HostKeyAlgorithms "+v), s)
		r = runCLI(t, "ls", "box:"+dir)
		if ok {
			requireOK(t, r)
		} else {
			require.Equal(t, exitFail, r.code, v)
			require.Contains(t, r.stderr, "no common algorithm", v)
		}
	}
}
