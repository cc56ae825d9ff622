package localfs

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// Local files a transfer opens by name after it has looked at them: the files a Put
// sends (found by its walk, or given by the caller), a Get's part file reopened by
// Resume, a Get's directories given their mode and times last. Between the look and
// the open, someone with write access to the directory can put something else at the
// name: a link to a private key (which would be uploaded), a FIFO (whose open blocks
// until a writer comes, past any ctx), a device. So every such open
//   - goes through the os.Root of the tree where there is one, so a link cannot lead
//     outside it;
//   - does not block and does not take a terminal as controlling one (O_NONBLOCK and
//     O_NOCTTY where the system has them: OpenFlags);
//   - is checked, by fstat on what was opened, to be a file of the kind expected and
//     os.SameFile as the one looked at; otherwise it is closed and that file fails,
//     with nothing read from or written to it.
// A final link is not followed past that check: os.Root opens a final link's target
// (inside the root), which then differs from the link the walk saw. os.Root.OpenFile
// hands the flags to openat on Unix (Linux and Darwin alike: it adds O_NOFOLLOW and
// O_CLOEXEC, and resolves a final link itself, inside the root), so O_NONBLOCK and
// O_NOCTTY reach the open; on Windows it maps them to NtCreateFile, where there are no
// FIFOs or terminals to name in a directory, and the flags are none.

// ErrSwapped is the failure of a local file that changed between the look and the open.
var ErrSwapped = errors.New("sftp: the local file was replaced since it was listed (by another file, a link or a special file); it is not used")

// Source is a local file a Put reads: where it is, what its walk saw, and how to
// open it so that what is read is what was seen.
type Source struct {
	Path string      // as the caller knows it, for errors and progress
	Info fs.FileInfo // what the walk saw (Lstat), or Stat of a file the caller named
	Root *os.Root    // the tree's source, when the file is in one: opened as Name in it
	Name string
}

// open opens the file for reading, as the package comment says.
func (s Source) Open() (*os.File, error) {
	var f *os.File
	var err error
	if s.Root != nil {
		f, err = s.Root.OpenFile(s.Name, os.O_RDONLY|OpenFlags, 0)
	} else {
		// The file the caller named: links in its path are the caller's, followed.
		f, err = os.OpenFile(s.Path, os.O_RDONLY|OpenFlags, 0)
	}
	if err != nil {
		return nil, err
	}
	if err := CheckOpened(f, s.Info, fs.FileMode.IsRegular); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: s.Path, Err: err}
	}
	return f, nil
}

// CheckOpened checks that f is what want describes, of a kind ok accepts, and puts it
// back in blocking mode for the reads and writes to come.
func CheckOpened(f *os.File, want fs.FileInfo, ok func(fs.FileMode) bool) error {
	if err := CheckSame(f, want, ok); err != nil {
		return err
	}
	return SetBlocking(f)
}

// CheckSame checks that f is what want describes, of a kind ok accepts.
func CheckSame(f *os.File, want fs.FileInfo, ok func(fs.FileMode) bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !ok(fi.Mode()) || !os.SameFile(fi, want) {
		return ErrSwapped
	}
	return nil
}

func isDirMode(m fs.FileMode) bool { return m.IsDir() }

// OpenDir opens the directory name in root for listing, checked to be the one
// want describes.
func OpenDir(root *os.Root, name string, want fs.FileInfo) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|OpenFlags, 0)
	if err != nil {
		return nil, err
	}
	if err := CheckOpened(f, want, isDirMode); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// SetDirMeta gives the directory name in root mode and, when setTimes, times, on the
// directory itself: it is opened (as CheckOpened says) and changed through that
// descriptor, so a link someone put at its name meanwhile is not followed. Where the
// system has no such calls (Windows, some Unixes), it falls back to the name, after
// the same check: a swap between the check and the change then acts on what replaced
// the directory, still inside the root.
func SetDirMeta(root *os.Root, name string, mode fs.FileMode, setTimes bool, atime, mtime time.Time) error {
	want, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !want.IsDir() {
		return ErrSwapped
	}
	f, err := root.OpenFile(name, os.O_RDONLY|OpenFlags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := CheckOpened(f, want, isDirMode); err != nil {
		return err
	}
	err = Fchmod(f, mode)
	if errors.Is(err, errors.ErrUnsupported) {
		err = root.Chmod(name, mode)
	}
	if err != nil || !setTimes {
		return err
	}
	err = Futimes(f, atime, mtime)
	if errors.Is(err, errors.ErrUnsupported) {
		err = root.Chtimes(name, atime, mtime)
	}
	return err
}
