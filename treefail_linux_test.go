package sftp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// plainServerClient starts OpenSSH's sftp-server over pipes as a plain account, so
// that file modes deny it what they say (root reads a mode-000 file all the same), and
// returns a Client on it and a directory it serves. Run as root, the server runs as
// the account sluicetest (made if missing); run as a plain user, as that user.
func plainServerClient(t *testing.T) (*Client, string) {
	t.Helper()
	sftpServerCmd(t, "") // skips when it is not installed
	// Not under t.TempDir, whose parent only its owner may enter.
	dir, err := os.MkdirTemp("", "sluice-plain-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	dir, err = filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	cmd := sftpServerCmd(t, dir)
	if os.Geteuid() == 0 {
		pw := make([]byte, 16)
		_, _ = rand.Read(pw)
		if _, err := sshdtest.EnsureUser("sluicetest", hex.EncodeToString(pw)); err != nil {
			t.Skipf("cannot make a plain account to run sftp-server as: %v", err)
		}
		u, err := user.Lookup("sluicetest")
		require.NoError(t, err)
		uid, err := strconv.Atoi(u.Uid)
		require.NoError(t, err)
		gid, err := strconv.Atoi(u.Gid)
		require.NoError(t, err)
		require.NoError(t, os.Chown(dir, uid, gid))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	return startPipeServer(t, cmd, nil), dir
}

// TestTreeGoesOnPastAnUnreadableFile: one file of 200 the server may not read. The
// other 199 are copied, and the Get returns a *TreeError listing exactly that one,
// which matches fs.ErrPermission and names the remote file; nothing of it is left
// behind (no data came, so no part file). With StopOnError the same Get stops at
// that file and returns its failure alone.
func TestTreeGoesOnPastAnUnreadableFile(t *testing.T) {
	c, remote := plainServerClient(t)
	ctx := testCtx(t)
	src := filepath.Join(remote, "tree")
	var bad string
	for i := range 200 {
		name := filepath.Join(src, "d"+strconv.Itoa(i%4), fmt.Sprintf("f%03d", i))
		gpWrite(t, name, gpData(1000+i, uint64(i)))
		if i == 117 {
			bad = name
			require.NoError(t, os.Chmod(name, 0))
		}
	}
	if f, err := os.Open(bad); err == nil {
		f.Close()
		if os.Geteuid() != 0 {
			t.Skip("this user can read a mode-000 file")
		}
	}
	back := filepath.Join(t.TempDir(), "back")
	var ev events
	err := c.Get(ctx, src, back, Recursive(), ev.opt())
	var te *TreeError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "get", te.Op)
	require.Equal(t, 1, te.Count)
	require.Len(t, te.Failed, 1)
	require.Nil(t, te.Stopped)
	require.ErrorIs(t, err, fs.ErrPermission)
	var pe *fs.PathError
	require.ErrorAs(t, te.Failed[0], &pe)
	require.Equal(t, "get", pe.Op)
	require.Equal(t, bad, pe.Path)

	copied := 0
	require.NoError(t, filepath.WalkDir(back, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(back, p)
		require.NoError(t, err)
		require.NotEqual(t, filepath.Base(bad), d.Name(), "the unreadable file was copied")
		require.Equal(t, gpRead(t, filepath.Join(src, rel)), gpRead(t, p))
		copied++
		return nil
	}))
	require.Equal(t, 199, copied)
	var failedReports int
	for _, p := range ev.list {
		if p.Err != nil {
			failedReports++
			require.Equal(t, bad, p.Path)
		}
	}
	require.Equal(t, 0, failedReports, "the file failed before it started") // its OPEN failed

	// StopOnError: the first failure, alone, not a TreeError.
	err = c.Get(ctx, src, filepath.Join(t.TempDir(), "stop"), Recursive(), StopOnError())
	require.ErrorAs(t, err, &pe)
	require.Equal(t, bad, pe.Path)
	require.False(t, errors.As(err, &te), "StopOnError returned a TreeError")
	require.ErrorIs(t, err, fs.ErrPermission)
}
