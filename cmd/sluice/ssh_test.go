package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshArgs are the flags that reach s with its key and known_hosts.
func sshArgs(s *sshdtest.SSHD, knownHosts string) []string {
	return []string{"-i", s.KeyFile, "-known-hosts", knownHosts, "-P", strconv.Itoa(s.Port)}
}

func remoteOn(s *sshdtest.SSHD, p string) string { return s.User + "@127.0.0.1:" + p }

// The SSH path in-process, so the race detector watches dialing, host key checks and
// the interrupt hook. e2e_test.go in the root package runs the built binary.
func TestSSHPutGetLs(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", 2<<20+7)
	remote := filepath.Join(dir, "remote.bin")

	args := append(sshArgs(s, s.KnownHostsFile), "-c", "aes128-gcm@openssh.com", "put", src, remoteOn(s, remote))
	r := runCLI(t, args...)
	requireOK(t, r)
	requireSummary(t, r.stderr, "put", src, remote, len(data))
	got, err := os.ReadFile(remote)
	require.NoError(t, err)
	require.Equal(t, data, got)

	// The port in an sftp:// URI instead of -P, the user from -l.
	back := filepath.Join(dir, "back.bin")
	r = runCLI(t, "-i", s.KeyFile, "-known-hosts", s.KnownHostsFile, "-l", s.User,
		"get", "sftp://127.0.0.1:"+strconv.Itoa(s.Port)+remote, back)
	requireOK(t, r)
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)

	r = runCLI(t, append(sshArgs(s, s.KnownHostsFile), "ls", "-l", remoteOn(s, dir))...)
	requireOK(t, r)
	require.Regexp(t, `(?m)^-rw-r--r-- `+regexp.QuoteMeta(ownerNames(t))+` +2097159 .* remote\.bin$`, r.stdout)
}

// Trees over SSH: into an existing remote directory, whose name the CLI resolves with
// a STAT for the summary, and back with -j 4.
func TestSSHTree(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	size := makeTree(t, src)
	rdir := filepath.Join(dir, "rdir")
	require.NoError(t, os.Mkdir(rdir, 0o755))

	r := runCLI(t, append(sshArgs(s, s.KnownHostsFile), "put", "-r", "-p", src, remoteOn(s, rdir))...)
	requireOK(t, r)
	requireTreeSummary(t, r.stderr, "put", src, filepath.Join(rdir, "src"), 50, size)
	requireSameTree(t, src, filepath.Join(rdir, "src"))

	back := filepath.Join(dir, "back")
	r = runCLI(t, append(sshArgs(s, s.KnownHostsFile), "get", "-r", "-j", "4", remoteOn(s, filepath.Join(rdir, "src")), back)...)
	requireOK(t, r)
	requireTreeSummary(t, r.stderr, "get", filepath.Join(rdir, "src"), filepath.Join(back, "src"), 50, size)
	requireSameTree(t, src, filepath.Join(back, "src"))
}

func TestSSHHostKeyRefusals(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	target := remoteOn(s, dir)

	// Unknown: known_hosts lists another host only.
	unknown := knownHostsFile(t, knownhosts.Line([]string{"example.org"}, s.HostKey))
	r := runCLI(t, append(sshArgs(s, unknown), "ls", target)...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: unknown host [127.0.0.1]:"+strconv.Itoa(s.Port))
	require.Contains(t, r.stderr, "StrictHostKeyChecking=accept-new")
	require.Empty(t, r.stdout)

	// Accepted on request, with a warning.
	r = runCLI(t, append(sshArgs(s, unknown), "-insecure-accept-unknown-host", "mkdir", remoteOn(s, filepath.Join(dir, "made")))...)
	requireOK(t, r)
	require.Contains(t, r.stderr, "sluice: warning: accepting unknown host")
	require.DirExists(t, filepath.Join(dir, "made"))

	// No known_hosts at all ($HOME is empty, no -known-hosts): unknown.
	r = runCLI(t, "-i", s.KeyFile, "-P", strconv.Itoa(s.Port), "ls", target)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "unknown host")
	require.Contains(t, r.stderr, "(which does not exist)")

	// Changed: the host's address with another key. Refused even with the flag.
	changed := knownHostsFile(t, knownhosts.Line([]string{s.Addr}, newEd25519Key(t)))
	for _, extra := range [][]string{nil, {"-insecure-accept-unknown-host"}} {
		r = runCLI(t, append(append(sshArgs(s, changed), extra...), "ls", target)...)
		require.Equal(t, exitFail, r.code)
		require.Contains(t, r.stderr, "sluice: HOST KEY MISMATCH for [127.0.0.1]:"+strconv.Itoa(s.Port))
		require.Contains(t, r.stderr, "SHA256:")
		require.NotContains(t, r.stderr, "warning")
	}
}

func TestSSHAuthFailures(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	target := remoteOn(s, "/")

	// No -i, no agent, no ~/.ssh keys.
	r := runCLI(t, "-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port), "ls", target)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "no SSH keys")

	// A key sshd does not authorize.
	wrong := filepath.Join(t.TempDir(), "wrong")
	writeEd25519Key(t, wrong)
	r = runCLI(t, "-i", wrong, "-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port), "ls", target)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "unable to authenticate")

	// Several -i: the unauthorized one first, the right one still gets its turn.
	r = runCLI(t, "-i", wrong, "-i", s.KeyFile, "-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port), "ls", target)
	requireOK(t, r)

	// A default key in ~/.ssh is found without -i.
	home := os.Getenv("HOME")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	key, err := os.ReadFile(s.KeyFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), key, 0o600))
	r = runCLI(t, "-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port), "ls", target)
	requireOK(t, r)

	r = runCLI(t, "-i", filepath.Join(t.TempDir(), "absent"), "-known-hosts", s.KnownHostsFile, "ls", target)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "reading key")
}
