package sshdtest

import (
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// initPacket is SSH_FXP_INIT for version 3, built by hand so these tests do not depend on
// the client package they serve: uint32 length 5, type 1, uint32 version 3.
var initPacket = []byte{0, 0, 0, 5, 1, 0, 0, 0, 3}

// readVersion reads one packet and checks it is VERSION 3; it returns the extension
// names the server advertised.
func readVersion(t *testing.T, r io.Reader) []string {
	t.Helper()
	var hdr [4]byte
	_, err := io.ReadFull(r, hdr[:])
	require.NoError(t, err)
	n := binary.BigEndian.Uint32(hdr[:])
	require.Less(t, n, uint32(1<<16), "VERSION packet length")
	body := make([]byte, n)
	_, err = io.ReadFull(r, body)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(body), 5)
	require.Equal(t, byte(2), body[0], "packet type VERSION")
	require.Equal(t, uint32(3), binary.BigEndian.Uint32(body[1:5]), "protocol version")
	var names []string
	for b := body[5:]; len(b) > 0; {
		name, rest, ok := cutString(b)
		require.True(t, ok, "malformed extension name")
		_, rest, ok = cutString(rest)
		require.True(t, ok, "malformed extension data")
		names, b = append(names, string(name)), rest
	}
	return names
}

func cutString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// sftpSession opens the sftp subsystem on c and completes INIT/VERSION by hand.
func sftpSession(t *testing.T, c *ssh.Client) (io.Reader, io.WriteCloser, []string) {
	t.Helper()
	sess, err := c.NewSession()
	require.NoError(t, err)
	w, err := sess.StdinPipe()
	require.NoError(t, err)
	r, err := sess.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, sess.RequestSubsystem("sftp"))
	_, err = w.Write(initPacket)
	require.NoError(t, err)
	return r, w, readVersion(t, r)
}

func TestSSHDSFTPSubsystem(t *testing.T) {
	s := NewSSHD(t, SSHDOptions{Ciphers: []string{CipherAES128GCM}})
	require.True(t, strings.HasPrefix(s.Addr, "127.0.0.1:"), s.Addr)

	c, err := s.Dial()
	require.NoError(t, err)
	defer c.Close()

	r, w, exts := sftpSession(t, c)
	require.Contains(t, exts, "limits@openssh.com")
	// sftp-server exits when its stdin ends, and sshd then closes the channel. (Session.Wait
	// does not apply: x/crypto only tracks sessions begun with Start, not subsystems.)
	require.NoError(t, w.Close())
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the channel did not end after stdin was closed")
	}
}

func TestSSHDMaxSessions(t *testing.T) {
	s := NewSSHD(t, SSHDOptions{MaxSessions: 2})
	c, err := s.Dial()
	require.NoError(t, err)
	defer c.Close()
	for range 2 {
		sess, err := c.NewSession()
		require.NoError(t, err)
		defer sess.Close()
	}
	_, err = c.NewSession()
	require.Error(t, err, "the third session must be refused with MaxSessions 2")
}

// TestSSHDFilesForOpenSSHClient checks KeyFile and KnownHostsFile with OpenSSH's own
// client, the way the benchmark harness drives sftp(1).
func TestSSHDFilesForOpenSSHClient(t *testing.T) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("ssh client not installed")
	}
	s := NewSSHD(t, SSHDOptions{})
	out, err := exec.Command(sshBin, "-F", "/dev/null", "-i", s.KeyFile,
		"-o", "UserKnownHostsFile="+s.KnownHostsFile, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-p", strconv.Itoa(s.Port), s.User+"@127.0.0.1", "echo", "hello").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "hello\n", string(out))
}

// TestSSHDSFTPServerLog runs OpenSSH sftp(1) against the server and finds its transfer in
// the sftp-server log, which is how the benchmark harness checks byte counts.
func TestSSHDSFTPServerLog(t *testing.T) {
	sftpBin, err := exec.LookPath("sftp")
	if err != nil {
		t.Skip("sftp client not installed")
	}
	work := t.TempDir()
	logFile := filepath.Join(work, "sftp-server.log")
	s := NewSSHD(t, SSHDOptions{SFTPServerArgs: []string{"-l", "INFO"}, SFTPServerLog: logFile})
	src := filepath.Join(work, "src.bin")
	require.NoError(t, os.WriteFile(src, make([]byte, 100_000), 0o600))

	cmd := exec.Command(sftpBin, "-b", "-", "-F", "/dev/null", "-i", s.KeyFile,
		"-o", "UserKnownHostsFile="+s.KnownHostsFile, "-o", "BatchMode=yes",
		"-o", "Ciphers="+CipherAES128GCM, "-P", strconv.Itoa(s.Port), s.User+"@127.0.0.1")
	cmd.Stdin = strings.NewReader("get " + src + " /dev/null\n")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	// sftp-server logs the close before it replies, and sftp(1) waits for the reply.
	b, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.Contains(t, string(b), `close "`+src+`" bytes read 100000 written 0`)
}

func TestStartSSHDRejectsBadOptions(t *testing.T) {
	if err := SSHDUsable(); err != nil {
		t.Skip(err)
	}
	_, err := StartSSHD(SSHDOptions{SFTPServerArgs: []string{"-d", "/tmp/a\nb"}})
	require.ErrorContains(t, err, "sshd_config line")
	_, err = StartSSHD(SSHDOptions{ExtraConfig: []string{"Match User x"}})
	require.ErrorContains(t, err, "Match")
}

// TestSSHDQuotesStartDir passes a start directory full of characters that the config
// parser and the shell both interpret, and checks that sftp-server got it verbatim.
func TestSSHDQuotesStartDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), `it's a "dir" with $HOME #1 \ & (x)`)
	require.NoError(t, os.Mkdir(dir, 0o755))
	logFile := filepath.Join(dir, "log file's.txt")
	s := NewSSHD(t, SSHDOptions{SFTPServerArgs: []string{"-d", dir, "-l", "INFO"}, SFTPServerLog: logFile})
	c, err := s.Dial()
	require.NoError(t, err)
	defer c.Close()
	r, w, _ := sftpSession(t, c)
	// REALPATH "." (type 16, id 1) resolves against the start directory.
	_, err = w.Write([]byte{0, 0, 0, 10, 16, 0, 0, 0, 1, 0, 0, 0, 1, '.'})
	require.NoError(t, err)
	var hdr [4]byte
	_, err = io.ReadFull(r, hdr[:])
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err = io.ReadFull(r, body)
	require.NoError(t, err)
	require.Equal(t, byte(104), body[0], "NAME reply")
	require.Equal(t, uint32(1), binary.BigEndian.Uint32(body[5:9]), "one name")
	name, _, ok := cutString(body[9:])
	require.True(t, ok)
	require.Equal(t, dir, string(name))
	// The redirection to the log must not leave a shell between sshd and sftp-server.
	for _, pid := range descendants(s.Pid()) {
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err == nil {
			require.Contains(t, []string{"sshd", "sftp-server"}, strings.TrimSpace(string(comm)))
		}
	}
	require.NoError(t, w.Close())
	_, _ = io.Copy(io.Discard, r)
	b, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.Contains(t, string(b), "session opened")
}

func TestStartSFTPServerCmdExitsOnEOF(t *testing.T) {
	if !Available() {
		t.Skip("sftp-server not installed")
	}
	cmd, r, w, err := StartSFTPServerCmd(t.TempDir(), nil)
	require.NoError(t, err)
	_, err = w.Write(initPacket)
	require.NoError(t, err)
	require.Contains(t, readVersion(t, r), "posix-rename@openssh.com")
	require.NoError(t, w.Close())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("sftp-server did not exit after stdin closed")
	}
}
