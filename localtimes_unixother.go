//go:build unix && !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package sftp

import (
	"errors"
	"os"
	"time"
)

// futimes: no portable call here; the caller falls back to the directory's name.
func futimes(*os.File, time.Time, time.Time) error { return errors.ErrUnsupported }
