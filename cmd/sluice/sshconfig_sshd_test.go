package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// writeUserSSHConfig writes ~/.ssh/config (HOME is the test's, see isolateEnv) and a
// known_hosts listing the servers, as a user's machine would have them.
func writeUserSSHConfig(t *testing.T, config string, servers ...*sshdtest.SSHD) {
	t.Helper()
	dir := filepath.Join(os.Getenv("HOME"), ".ssh")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o600))
	var kh strings.Builder
	for _, s := range servers {
		kh.WriteString(knownhosts.Line([]string{s.Addr}, s.HostKey) + "\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(kh.String()), 0o600))
}

// hostBlock is an ssh_config Host block reaching s with its key.
func hostBlock(name string, s *sshdtest.SSHD, extra ...string) string {
	b := fmt.Sprintf("Host %s\n    HostName 127.0.0.1\n    Port %d\n    User %s\n    IdentityFile %s\n", name, s.Port, s.User, s.KeyFile)
	for _, e := range extra {
		b += "    " + e + "\n"
	}
	return b
}

// An ssh_config alias with HostName, Port, User and IdentityFile, reached through a
// second sshd with ProxyJump, and with -J instead; nothing on the command line but
// the alias.
func TestSSHConfigAliasThroughJumpHost(t *testing.T) {
	isolateEnv(t)
	target := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	jump := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t,
		hostBlock("box", target, "ProxyJump hop")+hostBlock("hop", jump)+hostBlock("direct", target),
		target, jump)
	dir := t.TempDir()
	src, data := randomFile(t, t.TempDir(), "f.bin", 300<<10)
	require.NotContains(t, jump.Log(), "Accepted publickey", "nothing has used the jump host yet")

	r := runCLI(t, "put", src, "box:"+dir+"/")
	requireOK(t, r)
	got, err := os.ReadFile(filepath.Join(dir, "f.bin"))
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Contains(t, jump.Log(), "Accepted publickey for "+jump.User, "the connection went through the jump host")

	// -J on the command line, to a host whose block has no ProxyJump.
	before := strings.Count(jump.Log(), "Accepted publickey")
	r = runCLI(t, "-J", "hop", "ls", "direct:"+dir)
	requireOK(t, r)
	require.Equal(t, "f.bin\n", r.stdout)
	require.Equal(t, before+1, strings.Count(jump.Log(), "Accepted publickey"))

	// ProxyCommand, with OpenSSH's ssh -W through the same jump host as the pipe, and
	// ServerAliveInterval and ConnectTimeout set (the probes stop with the session:
	// goleak checks).
	if sshBin, err := exec.LookPath("ssh"); err == nil {
		before = strings.Count(jump.Log(), "Accepted publickey")
		proxy := fmt.Sprintf("%s -F none -o BatchMode=yes -o UserKnownHostsFile=%s -i %s -p %d -W %%h:%%p %s@127.0.0.1",
			sshBin, filepath.Join(os.Getenv("HOME"), ".ssh", "known_hosts"), jump.KeyFile, jump.Port, jump.User)
		r = runCLI(t, "-o", "ProxyCommand="+proxy, "-o", "ServerAliveInterval=1", "-o", "ConnectTimeout=20", "ls", "-l", "direct:"+dir)
		requireOK(t, r)
		require.Regexp(t, `f\.bin\n$`, r.stdout)
		require.Equal(t, before+1, strings.Count(jump.Log(), "Accepted publickey"), "the ProxyCommand carried the connection")
	}

	// A jump host that refuses us is named in the error.
	writeUserSSHConfig(t, hostBlock("box", target, "ProxyJump hop")+
		fmt.Sprintf("Host hop\n    HostName 127.0.0.1\n    Port %d\n    User nobody-here\n    IdentityFile %s\n", jump.Port, jump.KeyFile), target, jump)
	r = runCLI(t, "ls", "box:"+dir)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: jump host hop: SSH to 127.0.0.1:"+strconv.Itoa(jump.Port)+" as nobody-here")
}

// StrictHostKeyChecking=accept-new records an unknown host's key in OpenSSH's format:
// OpenSSH's own ssh then accepts the host with StrictHostKeyChecking=yes, plain and
// hashed. A changed key is refused all the same.
func TestSSHAcceptNewWritesKnownHosts(t *testing.T) {
	isolateEnv(t)
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("OpenSSH's ssh is not installed")
	}
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	port := strconv.Itoa(s.Port)
	target := s.User + "@127.0.0.1:/"
	hostName := "[127.0.0.1]:" + port
	opensshAccepts := func(kh string) {
		t.Helper()
		out, err := exec.Command(sshBin, "-F", "none", "-o", "UserKnownHostsFile="+kh, "-o", "GlobalKnownHostsFile=/dev/null",
			"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", s.KeyFile,
			"-p", port, s.User+"@127.0.0.1", "true").CombinedOutput()
		require.NoError(t, err, "ssh refused the recorded key: %s", out)
	}

	for _, hashed := range []bool{false, true} {
		kh := filepath.Join(t.TempDir(), "sub", "known_hosts") // the directory is made too
		// -o HashKnownHosts is given both ways: Debian's /etc/ssh/ssh_config says yes.
		args := []string{"-i", s.KeyFile, "-P", port, "-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + kh,
			"-o", "HashKnownHosts=" + map[bool]string{false: "no", true: "yes"}[hashed]}
		r := runCLI(t, append(args, "ls", target)...)
		requireOK(t, r)
		require.Contains(t, r.stderr, "sluice: warning: permanently added "+hostName+" (ED25519) to the list of known hosts in "+kh)
		line, err := os.ReadFile(kh)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(line), "\n"))
		if hashed {
			require.True(t, strings.HasPrefix(string(line), "|1|"), "hashed: %s", line)
			require.NotContains(t, string(line), "127.0.0.1")
		} else {
			require.True(t, strings.HasPrefix(string(line), hostName+" ssh-ed25519 "), "%s", line)
		}
		opensshAccepts(kh)

		// Known now: nothing more is written.
		r = runCLI(t, append(args, "ls", target)...)
		requireOK(t, r)
		require.Empty(t, r.stderr)
		again, err := os.ReadFile(kh)
		require.NoError(t, err)
		require.Equal(t, line, again)
	}

	// A changed key: refused even with accept-new (and with no), the file untouched.
	changed := knownHostsFile(t, knownhosts.Line([]string{s.Addr}, newEd25519Key(t)))
	before, err := os.ReadFile(changed)
	require.NoError(t, err)
	for _, mode := range []string{"accept-new", "no"} {
		r := runCLI(t, "-i", s.KeyFile, "-P", port, "-o", "StrictHostKeyChecking="+mode, "-o", "UserKnownHostsFile="+changed, "ls", target)
		require.Equal(t, exitFail, r.code, mode)
		require.Contains(t, r.stderr, "HOST KEY MISMATCH for "+hostName)
		after, err := os.ReadFile(changed)
		require.NoError(t, err)
		require.Equal(t, before, after)
	}

	// yes: an unknown host is refused, nothing written.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	r := runCLI(t, "-i", s.KeyFile, "-P", port, "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+kh, "ls", target)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "unknown host "+hostName)
	require.NoFileExists(t, kh)
}
