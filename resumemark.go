package sftp

import (
	"context"
	"io/fs"
	"os"
	"time"

	"github.com/sluicehq/sftp/internal/localfs"
	"github.com/sluicehq/sftp/internal/sshfx"
)

// The resume mark: how a part file cut to a prefix known whole says so to the next
// run, so that Resume continues it from its end instead of W before it (resume.go has
// the proof). The mark is a modification time no clock shows, markTime, set on the
// part:
//
//   - by a failed upload, through its own handle, once every WRITE of the upload has
//     landed and the part was cut to the acknowledged prefix (cutAndClose): the
//     FSETSTAT of the times goes out only after the FSETSTAT of the size was answered
//     OK, in a request of its own, since a server may apply the times of one
//     request when its size fails (OpenSSH's does) or before it;
//   - by a failed download, through the part's descriptor, once every writer has
//     ended: ftruncate to the prefix written, then futimens (markLocalPart).
//
// It goes away at the next write of anything on a POSIX file system (a WRITE updates
// the modification time), and a run that continues a marked part takes it away itself
// before it writes a byte (unmarkRemote, unmarkLocal), whatever the server does with
// modification times. Where the times cannot be set (a server that refuses or ignores
// them, as SFTPGo with setstat_mode 1 and AWS Transfer with SetStatOption
// ENABLE_NO_OP do; a file system that clamps them; Windows, where a descriptor's times
// are not set here) there is no mark, and Resume continues from W before the end, as
// without it.

// What else sets a part's times: Preserve, only on a part complete (the run that
// finishes the transfer sets them after the last byte, before the rename), where the
// claim a mark would make holds anyway; a run that stops after that cuts and marks
// the part over them, and the run that finishes it sets them again. Another program
// can set any time, the mark included, as it can write any bytes: Resume takes the
// part files in its directory on trust (see Resume).

// markTime is the mark: 2101-03-04T05:06:08Z, in seconds since 1970. A part's writes
// set its modification time to its machine's clock; no clock shows this one (a
// machine without a clock starts at 1970 or at its build date, and SFTP v3 carries no
// time past 2106). It is an even second, which file systems of 2-second times (FAT)
// keep as it is. A later version may choose another one only with a new name for
// part files: a mark is read by every later run.
const markTime = 4139355968

// markedRemote reports whether a remote part's attributes carry the mark.
func markedRemote(a *sshfx.Attrs) bool {
	return a.Has(sshfx.AttrACModTime) && a.MTime == markTime
}

// markedLocal reports whether a local part's attributes carry the mark.
func markedLocal(fi fs.FileInfo) bool {
	t := fi.ModTime()
	return t.Unix() == markTime && t.Nanosecond() == 0
}

// markAttrs is the FSETSTAT that marks a part.
func markAttrs() *sshfx.Attrs {
	return &sshfx.Attrs{Flags: sshfx.AttrACModTime, ATime: markTime, MTime: markTime}
}

// unmarkedNow is the time a continued part gets in place of the mark: now, or a
// second before the mark for a clock that shows it.
func unmarkedNow() uint32 {
	now := uint32(max(0, min(time.Now().Unix(), 1<<32-1)))
	if now == markTime {
		now--
	}
	return now
}

// unmarkRemote takes the mark off f, a marked part about to be continued, and waits
// for the answer while ctx lasts: no WRITE of the run goes out before it. An error
// means the mark may still be there, and the part must not be continued.
func unmarkRemote(ctx context.Context, f *File) error {
	now := unmarkedNow()
	return f.setstat(ctx, &sshfx.Attrs{Flags: sshfx.AttrACModTime, ATime: now, MTime: now})
}

// markLocalPart cuts lf, a download's part file whose writers have all ended, to
// size, the prefix known written, and marks it, both through its descriptor. A
// failure of either leaves no mark (the cut comes first, so a mark is never on a part
// longer than what it vouches for).
func markLocalPart(lf *os.File, size int64) error {
	if err := lf.Truncate(size); err != nil {
		return err
	}
	mark := time.Unix(markTime, 0)
	return localfs.Futimes(lf, mark, mark)
}

// unmarkLocal takes the mark off lf, a marked part about to be continued.
func unmarkLocal(lf *os.File) error {
	now := time.Unix(int64(unmarkedNow()), 0)
	return localfs.Futimes(lf, now, now)
}
