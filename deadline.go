package sftp

import (
	"context"
	"os"
	"sync"
	"time"
)

// SetDeadline bounds the File's I/O in time, as os.File.SetDeadline does: once t
// passes, every wait of the File's reads, writes, transfers (ReadFrom, WriteTo, so
// io.Copy), Stat, Sync, Truncate, Chmod, Chown and Chtimes ends, in progress or
// future, and the call returns an error matching os.ErrDeadlineExceeded (and
// context.DeadlineExceeded). A zero t means no deadline; a t in the past makes I/O
// fail at once. Setting a later deadline after one has passed makes the File usable
// again: an interrupted call may have moved part of its data, as with os.File, and its
// n says how much; the offset stands where the acknowledged data left it.
//
// The ctx given to Open bounds only the open. SetDeadline is how to bound what comes
// after it. One deadline covers reads and writes alike, and Close's wait for the
// server's answer (or CloseContext's ctx).
func (f *File) SetDeadline(t time.Time) error {
	if !f.life.setDeadline(t) {
		return f.closedErr("setdeadline")
	}
	return nil
}

// errDeadline is what a File's waits end with once its deadline has passed.
var errDeadline error = deadlineError{}

type deadlineError struct{}

func (deadlineError) Error() string   { return "sftp: the file's deadline has passed" }
func (deadlineError) Timeout() bool   { return true }
func (deadlineError) Temporary() bool { return true }
func (deadlineError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded || target == context.DeadlineExceeded
}

// fileLife is the ctx a File's io methods wait on (see errors.go, "where ctx ends a
// wait"): their transfers, their round trips, and the gate of its handles (File.enter)
// all select on it or check it. It ends for good when the File is closed, with
// errFileClosed. It ends for the moment when the deadline passes, with errDeadline: a
// later SetDeadline then starts a fresh Done channel for the waits that follow, while
// those already ended stay ended. Until a deadline has passed, Done returns the same
// channel on every call.
//
// That renewal departs from context.Context's contract (Done and Err do not stay
// ended), as do its errors (not context.Canceled: a File's Close is not its caller's
// cancellation): the File's waits and its read-ahead stream (File.ra, which outlives
// one Read) select on the life itself, so a renewed deadline revives them, as
// os.File's does. A context derived from it with context.WithCancel or
// errgroup.WithContext follows the contract: once ended, it stays ended, and its cause
// is the life's error.
type fileLife struct {
	mu     sync.Mutex
	done   chan struct{}
	err    error // nil, errDeadline or errFileClosed
	closed bool
	when   time.Time // the deadline set, zero for none
	timer  *time.Timer
	gen    uint64 // counts SetDeadline calls, so that a stale timer does nothing
	// passed is closed when the deadline passes, Close or not (hasPassed then set),
	// and renewed as done is: what bounds the waits that outlast Close, those for the
	// CLOSEs of a transfer's siblings (File.siblingBound).
	passed    chan struct{}
	hasPassed bool
}

var _ context.Context = (*fileLife)(nil)

func newFileLife() *fileLife {
	return &fileLife{done: make(chan struct{}), passed: make(chan struct{})}
}

// deadlinePassed returns the channel closed when the current deadline passes, which
// Close does not close.
func (l *fileLife) deadlinePassed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.passed
}

// Deadline reports the deadline SetDeadline set, so that a context derived from the
// File's sees it too.
func (l *fileLife) Deadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.when, !l.when.IsZero()
}

func (l *fileLife) Value(any) any { return nil }

func (l *fileLife) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

func (l *fileLife) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// end ends the File's life for good.
func (l *fileLife) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true // the timer runs on: deadlinePassed outlasts Close
	if l.err == nil {
		close(l.done)
	}
	l.err = errFileClosed
}

// setDeadline arms the deadline; false when the File is closed.
func (l *fileLife) setDeadline(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.gen++
	l.when = t
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.err != nil { // passed: the waits that follow get a fresh channel
		l.done, l.err = make(chan struct{}), nil
	}
	if l.hasPassed {
		l.passed, l.hasPassed = make(chan struct{}), false
	}
	switch {
	case t.IsZero():
	case !t.After(time.Now()):
		l.expire()
	default:
		gen := l.gen
		l.timer = time.AfterFunc(time.Until(t), func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.gen == gen {
				l.expire()
			}
		})
	}
	return true
}

// expire ends the current waits, once for each deadline set. l.mu is held.
func (l *fileLife) expire() {
	if !l.hasPassed {
		l.hasPassed = true
		close(l.passed)
	}
	if l.err == nil { // neither passed already nor closed
		l.err = errDeadline
		close(l.done)
	}
}
