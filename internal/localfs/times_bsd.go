//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package localfs

import (
	"os"
	"syscall"
	"time"
)

// Futimes sets f's access and modification times through its descriptor.
func Futimes(f *os.File, atime, mtime time.Time) error {
	tv := []syscall.Timeval{syscall.NsecToTimeval(atime.UnixNano()), syscall.NsecToTimeval(mtime.UnixNano())}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Futimes(int(fd), tv) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "Futimes", Path: f.Name(), Err: serr}
	}
	return nil
}
