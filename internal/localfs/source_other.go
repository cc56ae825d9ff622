//go:build !unix

package localfs

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// OpenFlags: there are no FIFOs or terminals to open by a name in a directory.
const OpenFlags = 0

func SetBlocking(*os.File) error { return nil }

// Fchmod and Futimes: a directory opened for reading cannot be changed through its
// handle here; the caller falls back to its name.
func Fchmod(*os.File, fs.FileMode) error { return errors.ErrUnsupported }

func Futimes(*os.File, time.Time, time.Time) error { return errors.ErrUnsupported }
