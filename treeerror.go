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
// failure kept, and the error that stopped the tree early, if one did.
type TreeError struct {
	Op string // "get" or "put"
	// Failed holds the first failures, each an *fs.PathError naming the source: at most
	// 1,000, and only while they hold no more than a quarter of the call's memory limit
	// (WithMemoryLimit), so that a tree of a million unreadable files, or of failures
	// with long paths, returns an error of bounded size. A server's message in one is
	// cut to its first 1 KiB (see StatusError).
	Failed []error
	Count  int // how many failed in all; more than len(Failed) when some were not kept
	// Stopped is what stopped the tree before every file was tried: its ctx ending
	// or the connection dying. It is nil when every file was tried.
	Stopped error
}

// maxTreeFailures bounds how many failures a TreeError keeps.
const maxTreeFailures = 1000

// What the failures a TreeError keeps are charged to the call's memory account. No
// layer of an error (an *fs.PathError, a fmt.Errorf wrap, the server's *StatusError)
// holds more text than the whole error shows (a StatusError's language tag, which it
// does not show, is 64 bytes at most), so a layer's structure and the whole text, once
// per layer, bound what one holds (treeerror_test.go measures it). The failures keep
// at most a quarter of the limit, so that a tree failing file after file still has the
// rest for its walk.
const (
	failureLayerOverhead = 128
	failureShare         = 4 // the failures' share of the limit: 1/failureShare
	// maxFailureLayers bounds the layers counted: an error nested deeper is charged
	// as this deep, and the tree's own are a handful.
	maxFailureLayers = 64
)

// failureCost is what err costs kept in a TreeError.
func failureCost(err error) int64 {
	return errorLayers(err, maxFailureLayers) * (failureLayerOverhead + maxStatusLang + heapBytes(len(err.Error())))
}

// errorLayers counts the errors in err's tree, up to limit.
func errorLayers(err error, limit int64) int64 {
	n := int64(1)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			n += errorLayers(inner, limit-n)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			if n >= limit {
				break
			}
			if inner != nil {
				n += errorLayers(inner, limit-n)
			}
		}
	}
	return min(n, max(limit, 1))
}

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

// treeFailures collects a tree's failures from its walkers and workers, charging
// those it keeps to the call's account.
type treeFailures struct {
	b *budget

	mu     sync.Mutex
	failed []error
	held   int64 // what failed is charged
	count  int
}

// add records err, and keeps it while the failures' share of the account has room.
func (f *treeFailures) add(err error) {
	cost := failureCost(err)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	if len(f.failed) >= maxTreeFailures || f.held+cost > f.b.limit/failureShare {
		return
	}
	if f.b.charge(cost) != nil {
		f.b.release(cost)
		return
	}
	f.held += cost
	f.failed = append(f.failed, err)
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
