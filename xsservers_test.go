//go:build linux

package sftp

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/realserver"
)

// Harness: the servers of the cross-server suite (xs_test.go says where tests go).
//
// The real servers the cross-server scenarios run against, each serving a fresh
// directory per scenario. Pipe servers speak SFTP on their stdin and stdout; the others
// are SSH servers on 127.0.0.1, reached with NewClient over x/crypto/ssh, their
// channels' streams going through the same packet tap. docs/servers.md says what each
// is and does.

const (
	xsOpenSSH      = "openssh"
	xsRclone       = "rclone"        // rclone serve sftp, --vfs-cache-mode off (its default)
	xsRcloneWrites = "rclone-writes" // rclone serve sftp --vfs-cache-mode writes
	xsGreenEnd     = "gesftpserver"
	xsProFTPD      = "proftpd"
	xsAsyncSSH     = "asyncssh"
	xsParamiko     = "paramiko"
	xsDropbear     = "dropbear"
)

// Groups of servers, as keys of xsExpect: an outcome under a group's key holds on each
// server of the group that has no outcome of its own.
const (
	xsOnDisk = "disk" // every server but rclone, serving the local disk as it is
	xsOnVFS  = "vfs"  // rclone, serving the disk through its VFS
)

var xsGroup = map[string]string{
	xsOpenSSH: xsOnDisk, xsGreenEnd: xsOnDisk, xsProFTPD: xsOnDisk, xsAsyncSSH: xsOnDisk, xsParamiko: xsOnDisk, xsDropbear: xsOnDisk,
	xsRclone: xsOnVFS, xsRcloneWrites: xsOnVFS,
}

// gesftpserverPath is where Debian's gesftpserver package puts the server.
const gesftpserverPath = "/usr/libexec/gesftpserver"

// xsServer is a server and how to run scenarios on it: begin prepares a run (for the
// Python servers, slow to start, one process shared by every scenario) and returns a
// starter for each scenario.
type xsServer struct {
	name  string
	begin func(t *testing.T) xsStarter
}

// xsStarter gives each scenario a fresh directory, which the scenario fills, and then
// starts a Client on a server serving it, with tap watching the packets.
type xsStarter struct {
	dir   func(t *testing.T) string
	start func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client
}

// xsEach starts a server of its own for each scenario.
func xsEach(start func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client) func(*testing.T) xsStarter {
	return func(*testing.T) xsStarter {
		return xsStarter{dir: func(t *testing.T) string { return serverDir(t) }, start: start}
	}
}

// xsShared starts one server for the run, serving a directory per user: each
// scenario's is a fresh one, logged into as its user.
func xsShared(launch func(tb testing.TB, root string) *realserver.Server) func(*testing.T) xsStarter {
	return func(t *testing.T) xsStarter {
		base := serverDir(t)
		srv := launch(t, base)
		n := 0
		return xsStarter{
			dir: func(t *testing.T) string {
				n++
				d := filepath.Join(base, fmt.Sprintf("s%d", n))
				require.NoError(t, os.Mkdir(d, 0o755))
				t.Cleanup(func() { os.RemoveAll(d) })
				return d
			},
			start: func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
				return startSSHClient(t, srv, filepath.Base(dir), tap, opts...)
			},
		}
	}
}

var xsServers = []xsServer{
	{xsOpenSSH, xsEach(func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		return startPipeServer(t, sftpServerCmd(t, dir), tap.wrap, opts...)
	})},
	{xsRclone, xsEach(func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		return startPipeServer(t, rcloneCommand(t, dir), tap.wrap, opts...)
	})},
	{xsRcloneWrites, xsEach(func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		cmd := rcloneCommand(t, dir)
		// --vfs-write-back 0s: the file reaches the directory before CLOSE is
		// answered (by default 5 s later, in the background).
		cmd.Args = append(cmd.Args, "--vfs-cache-mode", "writes", "--vfs-write-back", "0s")
		return startPipeServer(t, cmd, tap.wrap, opts...)
	})},
	{xsGreenEnd, xsEach(func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		if _, err := os.Stat(gesftpserverPath); err != nil {
			t.Skipf("SKIPPED, real server unavailable: gesftpserver: %v (apt-get install gesftpserver)", err)
		}
		// It serves its working directory.
		cmd := exec.Command(gesftpserverPath)
		cmd.Dir = dir
		return startPipeServer(t, cmd, tap.wrap, opts...)
	})},
	{xsProFTPD, xsEach(func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		srv := realserver.StartProFTPD(t, dir)
		return startSSHClient(t, srv, srv.User, tap, opts...)
	})},
	{xsAsyncSSH, xsShared(realserver.StartAsyncSSH)},
	{xsParamiko, xsShared(realserver.StartParamiko)},
	{xsDropbear, xsEach(func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		srv := realserver.StartDropbear(t, dir)
		return startSSHClient(t, srv, srv.User, tap, opts...)
	})},
}

// startSSHClient connects to srv as user and returns a Client on the connection, as
// any program using sluice over SSH would (NewClient), with tap watching the packets of
// every channel. Cleanup closes the Client, then the connection.
func startSSHClient(t *testing.T, srv *realserver.Server, user string, tap *xsTap, opts ...Option) *Client {
	t.Helper()
	sc, err := srv.DialAs(user)
	require.NoError(t, err, "dialing %s", srv.Name)
	t.Cleanup(func() { sc.Close() })
	if tap != nil {
		opts = append(opts, withStreamWrap(func(r io.Reader, w io.WriteCloser) (io.Reader, io.WriteCloser) {
			return tap.wrap(io.NopCloser(r), w)
		}))
	}
	c, err := NewClient(testCtx(t), sc, opts...)
	require.NoError(t, err, "NewClient to %s", srv.Name)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Client.Close: %v", err)
		}
	})
	return c
}
