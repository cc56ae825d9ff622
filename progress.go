package sftp

import (
	"context"
	"os"
	"sync"
)

// Progress is one report from a Get or Put given OnProgress. Each file yields a first
// report when it starts, one per piece of data moved, and a last one with Done or Err
// set. A file SkipUnchanged leaves alone yields only that last report, with Skipped.
//
// The counters sort the files that ended four ways: moved (Files less FilesSkipped),
// skipped (FilesSkipped), failed (FilesFailed) and canceled (FilesCanceled). A file
// counts as canceled, not failed, when the call stopped it rather than its own
// transfer failing: the call's ctx ended, or a tree stopped (StopOnError after
// another file's failure, or the connection lost) while the file was in flight. Such
// a file's last report has Err and Canceled set; it is worth retrying as it is.
type Progress struct {
	Path string // the file's source path (remote for Get, local for Put)
	Dest string // where it goes, under its final name

	// Bytes of this file done so far: for Get received and written to the local
	// file, for Put acknowledged by the server. A resumed file starts where Resume
	// continues it (the part's end when a clean stop marked it, else W before its
	// end; see Resume).
	Bytes int64
	Size  int64 // the file's size, or -1 when the server did not say
	Done  bool  // the file is complete and in place under its final name
	// Skipped is set with Done when SkipUnchanged found the destination up to date.
	// Such a file's bytes are in Bytes and Size but not in TotalBytes or TotalSize:
	// nothing of it moves.
	Skipped bool
	Err     error // set on a file's last report when it failed or was canceled
	// Canceled is set with Err when the file was stopped by the call, not failed of
	// itself (see above).
	Canceled bool

	TotalBytes int64 // Bytes summed over every file started so far (skipped files not included)
	TotalSize  int64 // the sizes of the files found summed, less the skipped ones; -1 when one is unknown
	Files      int   // files completed: moved, or skipped as up to date
	// FilesSkipped, FilesFailed and FilesCanceled count the files that ended that way
	// so far; FilesSkipped are among Files.
	FilesSkipped  int
	FilesFailed   int
	FilesCanceled int
	FilesTotal    int // files found so far; final once Walked is set
	InProgress    int // files started and not yet ended
	// Walked is set once the whole source has been walked: FilesTotal and TotalSize
	// are final from then on. A tree is copied as it is walked, so until then they
	// count what has been found so far. A single file is walked from the start.
	Walked bool

	// Files are regular files: directories and symbolic links in a tree are made
	// without reports and are not counted. Files a SkipFiles predicate leaves out are
	// not reported or counted at all.
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
	skipped    int
	failed     int
	canceled   int
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

// add counts n more bytes of the file done. It is also an upload's File.onAcked.
func (p *fileProgress) add(n int64) {
	if p == nil || n <= 0 {
		return
	}
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	p.bytes += n
	r.totalBytes += n
	r.emit(p)
}

// end reports the file's outcome: err nil means it is in place. ctx is the one the
// file's transfer ran under: when it has ended, a failure is the call stopping the
// file (Canceled), not the file's own.
func (p *fileProgress) end(ctx context.Context, err error) {
	if p == nil {
		return
	}
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inProgress--
	canceled := err != nil && ctx.Err() != nil
	switch {
	case err == nil:
		r.files++
	case canceled:
		r.canceled++
	default:
		r.failed++
	}
	pr := r.snapshot(p)
	pr.Done, pr.Err, pr.Canceled = err == nil, err, canceled
	r.fn(pr)
}

// emit calls the callback; r.mu must be held.
func (r *reporter) emit(p *fileProgress) { r.fn(r.snapshot(p)) }

func (r *reporter) snapshot(p *fileProgress) Progress {
	return Progress{
		Path: p.path, Dest: p.dest, Bytes: p.bytes, Size: p.size,
		TotalBytes: r.totalBytes, TotalSize: r.totalSize,
		Files: r.files, FilesSkipped: r.skipped, FilesFailed: r.failed, FilesCanceled: r.canceled,
		FilesTotal: r.filesTotal, InProgress: r.inProgress,
		Walked: r.done,
	}
}

// progressFile counts what File.WriteTo writes into a local file. It keeps the
// methods that let a download write at offsets with several goroutines (WriteAt,
// Seek), so counting costs no speed. An upload counts acknowledgements instead
// (File.onAcked).
type progressFile struct {
	f *os.File
	p *fileProgress
}

func (pf *progressFile) Write(b []byte) (int, error) {
	n, err := pf.f.Write(b)
	pf.p.add(int64(n))
	return n, err
}

func (pf *progressFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := pf.f.WriteAt(b, off)
	pf.p.add(int64(n))
	return n, err
}

func (pf *progressFile) Seek(off int64, whence int) (int64, error) { return pf.f.Seek(off, whence) }
