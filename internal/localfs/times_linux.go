package localfs

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// Futimes sets f's access and modification times through its descriptor:
// utimensat(fd, NULL, times, 0), as glibc's futimens does.
func Futimes(f *os.File, atime, mtime time.Time) error {
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(atime.UnixNano()), syscall.NsecToTimespec(mtime.UnixNano())}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return &os.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}
