//go:build unix && !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package localfs

import (
	"errors"
	"os"
	"time"
)

// Futimes: no portable call here; the caller falls back to the directory's name.
func Futimes(*os.File, time.Time, time.Time) error { return errors.ErrUnsupported }
