//go:build !unix

package sftp

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// localOpenFlags: there are no FIFOs or terminals to open by a name in a directory.
const localOpenFlags = 0

func setBlocking(*os.File) error { return nil }

// fchmod and futimes: a directory opened for reading cannot be changed through its
// handle here; the caller falls back to its name.
func fchmod(*os.File, fs.FileMode) error { return errors.ErrUnsupported }

func futimes(*os.File, time.Time, time.Time) error { return errors.ErrUnsupported }
