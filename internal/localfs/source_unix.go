//go:build unix

package localfs

import (
	"io/fs"
	"os"
	"syscall"
)

// OpenFlags keep the open of a local file checked after it is opened from
// blocking (on a FIFO with no writer, say) and from making a terminal the process's
// controlling one.
const OpenFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY

// SetBlocking clears O_NONBLOCK once the file is known to be the one wanted.
func SetBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

func Fchmod(f *os.File, mode fs.FileMode) error { return f.Chmod(mode) }
