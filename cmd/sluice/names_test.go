package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestHostNameInjectionRefused is CVE-2023-51385 against sluice: a host name from the
// command line that reaches a shell through ProxyCommand's %h must be refused before
// any expansion, so the command it hides never runs.
func TestHostNameInjectionRefused(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	t.Chdir(dir) // the injected touch would write here
	key := filepath.Join(dir, "key")
	writeEd25519Key(t, key)
	cfg := filepath.Join(dir, "cfg")
	require.NoError(t, os.WriteFile(cfg, []byte("Host *\n  ProxyCommand nc %h %p %r\n"), 0o600))
	for _, operand := range []string{
		"$(touch${IFS}pwned):x",
		"`touch${IFS}pwned`:x",
		"a;touch${IFS}pwned:x",
		"sftp://a%24%28touch%20pwned%29@box/x",
		"x$(touch${IFS}pwned)@box:x",
		"-oProxyCommand=touch${IFS}pwned:x",
	} {
		r := runCLI(t, "-F", cfg, "-i", key, "ls", "--", operand)
		require.Equal(t, exitUsage, r.code, "%s: %s", operand, r.stderr)
		require.Contains(t, r.stderr, "name", operand)
		require.NoFileExists(t, filepath.Join(dir, "pwned"), operand)
	}
	r := runCLI(t, "-F", cfg, "-i", key, "-l", "$(touch${IFS}pwned)", "ls", "box:x")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "-l: user name")
	require.NoFileExists(t, filepath.Join(dir, "pwned"))
}

func TestCheckCLIName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "box", "10.0.0.1", "::1", "fe80::1%eth0", "host-1.example.org", "alice", "a.b_c+d@e"} {
		require.NoError(t, checkCLIName("host", ok), ok)
	}
	for _, bad := range []string{"-x", "a b", "a\tb", "a\nb", "a\x7f", "a'b", `a"b`, "a$b", "a`b", `a\b`, "a;b", "a&b", "a<b", "a>b", "a|b", "a(b", "a)b", "a{b", "a}b"} {
		require.Error(t, checkCLIName("host", bad), "%q", bad)
	}
}

// TestRecordRefusesBadHostName: a HostName from ssh_config that would break or
// forge a known_hosts line is never written.
func TestRecordRefusesBadHostName(t *testing.T) {
	t.Parallel()
	key := newEd25519Key(t)
	for _, host := range []string{"evil\nexample.org ssh-ed25519 AAAA", "a,b", "a b", "[a b]:2222", "$(x)", "-x"} {
		file := filepath.Join(t.TempDir(), "known_hosts")
		hc := &hostConfig{knownHosts: []string{file}, strict: "accept-new"}
		db, err := loadHostKeys(hc)
		require.NoError(t, err)
		c := db.checker(host, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, hc, &prompter{}, &bytes.Buffer{})
		err = c.record(knownhosts.Normalize(host), key)
		require.ErrorContains(t, err, "not recording the host key", "%q", host)
		require.NoFileExists(t, file, "%q", host)
	}
	// A good name, with and without a port, is written.
	for _, host := range []string{"example.org", "[127.0.0.1]:2222", "[::1]:2222"} {
		file := filepath.Join(t.TempDir(), "known_hosts")
		hc := &hostConfig{knownHosts: []string{file}, strict: "accept-new"}
		db, err := loadHostKeys(hc)
		require.NoError(t, err)
		c := db.checker(host, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, hc, &prompter{}, &bytes.Buffer{})
		require.NoError(t, c.record(host, key), host)
		require.FileExists(t, file)
	}
}
