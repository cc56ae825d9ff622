package sftp

import (
	"io/fs"
	"os"
	"sync"
)

// Progress is one report from a Get or Put given OnProgress. Each file yields a first
// report when it starts, one per piece of data moved, and a last one with Done or Err
// set.
type Progress struct {
	Path string // the file's source path (remote for Get, local for Put)
	Dest string // where it goes, under its final name

	// Bytes of this file done so far. A resumed file starts where Resume continues it
	// (W before the part file's end, see Resume).
	// For Put it counts bytes handed to the transfer, which runs up to one window of
	// WRITEs ahead of the server's acknowledgements.
	Bytes int64
	Size  int64 // the file's size, or -1 when the server did not say
	Done  bool  // the file is complete and in place under its final name
	// Skipped is set with Done when SkipUnchanged found the destination up to date.
	Skipped bool
	Err     error // set on a file's last report when it failed

	TotalBytes int64 // Bytes summed over every file started so far
	TotalSize  int64 // the sizes of all files summed, or -1 when one is unknown
	Files      int   // files completed
	FilesTotal int   // files found so far; final once Walked is set
	InProgress int   // files started and not yet completed or failed
	// Walked is set once the whole source has been walked: FilesTotal and TotalSize
	// are final from then on. A tree is copied as it is walked, so until then they
	// count what has been found so far. A single file is walked from the start.
	Walked bool

	// Files are regular files: directories and symbolic links in a tree are made
	// without reports and are not counted.

}

// reporter serialises Progress calls: every call happens with mu held, so a callback
// needs no locking of its own even though files move in parallel. A nil *reporter
// (no OnProgress) does nothing.
type reporter struct {
	fn func(Progress)

	mu         sync.Mutex
	totalBytes int64
	totalSize  int64
	files      int
	filesTotal int
	inProgress int
	done       bool // the walk has ended
}

func newReporter(fn func(Progress)) *reporter {
	if fn == nil {
		return nil
	}
	return &reporter{fn: fn}
}

// plan records the one file a call of a single file moves, before it starts.
func (r *reporter) plan(size int64) {
	r.found(size)
	r.walked()
}

// found counts a file the walk found, of size bytes (-1: unknown).
func (r *reporter) found(size int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.filesTotal++
	if size < 0 || r.totalSize < 0 {
		r.totalSize = -1
	} else {
		r.totalSize += size
	}
	r.mu.Unlock()
}

// walked records that the walk has ended: FilesTotal and TotalSize are final.
func (r *reporter) walked() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// fileProgress is the running count of one file.
type fileProgress struct {
	r          *reporter
	path, dest string
	bytes      int64
	size       int64
}

// start reports a file beginning with off bytes already in place (from a part file).
func (r *reporter) start(path, dest string, off, size int64) *fileProgress {
	if r == nil {
		return nil
	}
	p := &fileProgress{r: r, path: path, dest: dest, bytes: off, size: size}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inProgress++
	r.totalBytes += off
	r.emit(p)
	return p
}

func (p *fileProgress) add(n int) {
	if p == nil || n <= 0 {
		return
	}
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	p.bytes += int64(n)
	r.totalBytes += int64(n)
	r.emit(p)
}

// end reports the file's outcome; err nil means it is in place.
func (p *fileProgress) end(err error) {
	if p == nil {
		return
	}
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inProgress--
	if err == nil {
		r.files++
	}
	pr := r.snapshot(p)
	pr.Done, pr.Err = err == nil, err
	r.fn(pr)
}

// emit calls the callback; r.mu must be held.
func (r *reporter) emit(p *fileProgress) { r.fn(r.snapshot(p)) }

func (r *reporter) snapshot(p *fileProgress) Progress {
	return Progress{
		Path: p.path, Dest: p.dest, Bytes: p.bytes, Size: p.size,
		TotalBytes: r.totalBytes, TotalSize: r.totalSize,
		Files: r.files, FilesTotal: r.filesTotal, InProgress: r.inProgress,
		Walked: r.done,
	}
}

// progressFile counts what File.WriteTo writes into, or File.ReadFrom reads from, a
// local file. It keeps the methods that let those transfers work at offsets with
// several goroutines (WriteAt, ReadAt, Seek, Stat), so counting costs no speed.
type progressFile struct {
	f *os.File
	p *fileProgress
}

func (pf *progressFile) Write(b []byte) (int, error) {
	n, err := pf.f.Write(b)
	pf.p.add(n)
	return n, err
}

func (pf *progressFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := pf.f.WriteAt(b, off)
	pf.p.add(n)
	return n, err
}

func (pf *progressFile) Read(b []byte) (int, error) {
	n, err := pf.f.Read(b)
	pf.p.add(n)
	return n, err
}

func (pf *progressFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := pf.f.ReadAt(b, off)
	pf.p.add(n)
	return n, err
}

func (pf *progressFile) Seek(off int64, whence int) (int64, error) { return pf.f.Seek(off, whence) }

func (pf *progressFile) Stat() (fs.FileInfo, error) { return pf.f.Stat() }
