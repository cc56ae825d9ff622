package sftp

import (
	"fmt"
	"sync"
)

// What a tree transfer does when something in it fails. A failure that belongs to one
// file, link or directory (the server refuses to open it, a local name is taken by a
// directory, a part file is in the way, a directory cannot be listed or made) is
// recorded and the tree goes on without that file (or without what is below that
// directory). A failure that means nothing more can move stops the tree: its ctx
// ended, the connection died, or StopOnError was given and this is the first failure.
// Part files of the files that failed stay where they are for Resume: they are never
// renamed into place, and listings skip their names.

// TreeError is what a tree transfer returns when some of its files, links or
// directories failed: every other one was copied. errors.Is and errors.As match each
// failure, and the error that stopped the tree early, if one did.
type TreeError struct {
	Op     string  // "get" or "put"
	Failed []error // the failures, each an *fs.PathError naming the source; at most the first 1,000
	Count  int     // how many failed in all: more than len(Failed) when more than 1,000 did
	// Stopped is what stopped the tree before every file was tried: its ctx ending
	// or the connection dying. It is nil when every file was tried.
	Stopped error
}

// maxTreeFailures bounds the failures a TreeError keeps: a tree of a million
// unreadable files must not hold a million errors. TreeError's godoc states the
// number, as the constant is not exported.
const maxTreeFailures = 1000

func (e *TreeError) Error() string {
	var s string
	switch {
	case e.Count == 0:
		s = "sftp: " + e.Op + ": no failures"
	case e.Count == 1 && len(e.Failed) == 1:
		s = e.Failed[0].Error()
	case len(e.Failed) > 0:
		s = fmt.Sprintf("sftp: %s: %d failed; the first: %v", e.Op, e.Count, e.Failed[0])
	default:
		s = fmt.Sprintf("sftp: %s: %d failed", e.Op, e.Count)
	}
	if e.Stopped != nil {
		s += fmt.Sprintf(" (then the transfer stopped: %v)", e.Stopped)
	}
	return s
}

// Unwrap returns the failures kept and the error that stopped the tree, for errors.Is
// and errors.As.
func (e *TreeError) Unwrap() []error {
	if e.Stopped == nil {
		return e.Failed
	}
	return append(e.Failed[:len(e.Failed):len(e.Failed)], e.Stopped)
}

// treeFailures collects a tree's failures from its walkers and workers.
type treeFailures struct {
	mu     sync.Mutex
	failed []error
	count  int
}

func (f *treeFailures) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	if len(f.failed) < maxTreeFailures {
		f.failed = append(f.failed, err)
	}
}

// result is what the tree returns: nil when nothing failed and nothing stopped it,
// stopped alone when nothing failed before it, else a *TreeError.
func (f *treeFailures) result(op string, stopped error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count == 0 {
		return stopped
	}
	return &TreeError{Op: op, Failed: f.failed, Count: f.count, Stopped: stopped}
}
