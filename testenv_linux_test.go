package sftp

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The parts of the test environment only Linux provides: stopping a server process in
// its tracks, and reading back owners, times, FIFOs and statfs from the local disk.
// testenv_other_test.go skips the tests that need them elsewhere.

// stopNow is stop for goroutines other than the test's. A stop is reported to a
// waiter that asks for it (WUNTRACED) without reaping the process, so this does not
// disturb cmd.Wait.
func (p *serverProc) stopNow() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(p.cmd.Process.Pid, &ws, syscall.WUNTRACED, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if !ws.Stopped() {
			return fmt.Errorf("sftp-server is not stopped: %v", ws)
		}
		return nil
	}
}

// resume lets a server stopped by stop run again.
func (p *serverProc) resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// localStat returns the stat of a local path, without following a final symlink.
func localStat(t testing.TB, name string) *localStatT {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Lstat(name, &st))
	out := &localStatT{Uid: st.Uid, Gid: st.Gid, Size: st.Size}
	// The conversions are for 32-bit targets, where the fields are narrower.
	out.Atim.Sec, out.Atim.Nsec = int64(st.Atim.Sec), int64(st.Atim.Nsec)
	out.Mtim.Sec, out.Mtim.Nsec = int64(st.Mtim.Sec), int64(st.Mtim.Nsec)
	return out
}

// localStatfs returns the statfs of the file system holding dir.
func localStatfs(t testing.TB, dir string) localStatFS {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return localStatFS{
		Bsize: uint64(st.Bsize), Frsize: uint64(st.Frsize), Blocks: st.Blocks,
		Files: st.Files, Namelen: uint64(st.Namelen),
	}
}

// mkfifo makes a named pipe at name.
func mkfifo(t testing.TB, name string, perm uint32) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(name, perm))
}
