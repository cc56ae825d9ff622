package sshdtest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tests of what only /proc can tell: which processes sshd started, and whether
// they are gone.

func TestSSHDCloseLeavesNoProcess(t *testing.T) {
	if err := SSHDUsable(); err != nil {
		t.Skip(err)
	}
	s, err := StartSSHD(SSHDOptions{})
	require.NoError(t, err)
	c, err := s.Dial()
	require.NoError(t, err)
	defer c.Close()
	// Leave a session open so that per-connection sshd processes and an sftp-server
	// exist when Close runs: Close must stop them too.
	sftpSession(t, c)

	pids := append([]int{s.Pid()}, descendants(s.Pid())...)
	require.GreaterOrEqual(t, len(pids), 3, "sshd, its connection child and sftp-server")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	for _, p := range pids {
		require.False(t, processAlive(p), "pid %d still running", p)
	}
	_, err = os.Stat(s.Dir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestReadProc(t *testing.T) {
	p, err := readProc(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), p.ppid)
	require.True(t, processAlive(os.Getpid()))
}

// TestSSHDLoginUser logs in as the LoginUser account, not as the user running the test,
// and starts sftp-server as that account: the benchmarks' set-up.
func TestSSHDLoginUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating the login account needs root")
	}
	s := NewSSHD(t, SSHDOptions{LoginUser: "sluicebench"})
	require.Equal(t, "sluicebench", s.User)
	c, err := s.Dial()
	require.NoError(t, err)
	defer c.Close()
	sess, err := c.NewSession()
	require.NoError(t, err)
	out, err := sess.Output("id -un")
	require.NoError(t, err)
	require.Equal(t, "sluicebench\n", string(out))
	_, _, exts := sftpSession(t, c)
	require.Contains(t, exts, "limits@openssh.com")
}
