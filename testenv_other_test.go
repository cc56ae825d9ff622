//go:build !linux

package sftp

import (
	"errors"
	"testing"
)

// Stand-ins for testenv_linux_test.go: the suite builds everywhere, and a test that
// needs one of these is skipped, with the reason, where the OS does not provide it.

func (p *serverProc) stopNow() error {
	return errors.New("stopping a process with SIGSTOP is implemented for Linux only")
}

func (p *serverProc) resume() error {
	return errors.New("resuming a stopped process is implemented for Linux only")
}

func localStat(t testing.TB, _ string) *localStatT {
	t.Skip("skipping: reading back owners and times is implemented for Linux only")
	return nil
}

func localStatfs(t testing.TB, _ string) localStatFS {
	t.Skip("skipping: statfs is implemented for Linux only")
	return localStatFS{}
}

func mkfifo(t testing.TB, _ string, _ uint32) {
	t.Skip("skipping: named pipes are made on Linux only")
}
