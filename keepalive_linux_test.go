package sftp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/realserver"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// The keepalive is on by default, so every SSH server a Client meets must answer
// keepalive@openssh.com, or an idle Client would be given up after the count of
// intervals. RFC 4254 requires an answer to any global request (a failure for one the
// server does not know), and each real SSH server here gives one: OpenSSH's sshd,
// ProFTPD mod_sftp, asyncssh, paramiko and dropbear (rclone's is x/crypto's, as the
// in-process server of keepalive_test.go). An idle Client on each sees more answers
// than its count of intervals, and is alive after them.
func TestKeepaliveAnsweredByRealServers(t *testing.T) {
	dial := map[string]func(t *testing.T) *ssh.Client{
		"openssh": func(t *testing.T) *ssh.Client {
			sc, err := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{}).Dial()
			require.NoError(t, err)
			return sc
		},
		"proftpd": func(t *testing.T) *ssh.Client {
			srv := realserver.StartProFTPD(t, serverDir(t))
			sc, err := srv.Dial()
			require.NoError(t, err)
			return sc
		},
		"asyncssh": func(t *testing.T) *ssh.Client { return dialAsUser(t, realserver.StartAsyncSSH) },
		"paramiko": func(t *testing.T) *ssh.Client { return dialAsUser(t, realserver.StartParamiko) },
		"dropbear": func(t *testing.T) *ssh.Client {
			srv := realserver.StartDropbear(t, serverDir(t))
			sc, err := srv.Dial()
			require.NoError(t, err)
			return sc
		},
	}
	for _, name := range []string{"openssh", "proftpd", "asyncssh", "paramiko", "dropbear"} {
		t.Run(name, func(t *testing.T) {
			sc := dial[name](t)
			t.Cleanup(func() { sc.Close() })
			count, answered := answers()
			c, err := NewClient(testCtx(t), sc, WithKeepalive(testKeepalive/4, 2), count)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			awaitAnswers(t, answered, 2+2)
			require.NoError(t, c.Err())
			_, err = c.Stat(testCtx(t), ".")
			require.NoError(t, err)
		})
	}
}

// dialAsUser starts a Python server serving a directory per user and logs in as the
// user of a fresh one.
func dialAsUser(t *testing.T, launch func(tb testing.TB, root string) *realserver.Server) *ssh.Client {
	base := serverDir(t)
	require.NoError(t, os.Mkdir(filepath.Join(base, "k1"), 0o755))
	srv := launch(t, base)
	sc, err := srv.DialAs("k1")
	require.NoError(t, err)
	return sc
}
