package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Tree transfers, copied as they are walked. Walkers list directories a page at a time
// and hand each file and link to the workers as soon as it is listed, so data moves
// from the first page on, and what the call holds is the frontier of the walk, never
// the plan of the whole tree:
//   - the page each walker is reading (one READDIR reply, or localPageEntries);
//   - the subdirectories a walker found and has not walked yet (treePendingDirs at
//     most: past it the walker walks them first and comes back to the listing);
//   - the files and links handed to workers and not finished (the worker slots, 512
//     by default: a walker waits for a free one, which is the walk's back-pressure);
//   - the directories whose subtree is not finished: each is finished (Preserve's
//     mode and times, set last) by whichever of its files or subdirectories ends last.
//
// Every one of them is charged to the call's memory account (budget.go), so a
// server cannot make the call hold more than WithMemoryLimit, and an honest tree of
// any size (a million files, a directory of a million entries) needs a few MiB.
//
// Directories are walked by up to Parallel walkers at once: a walker that finds
// subdirectories gives each to a free walker, or walks it itself when none is free, so
// the walk is depth first where it must be and parallel where it can be.

// treeEntry is one thing found in a tree: a file, link or directory to copy.
type treeEntry struct {
	src, dst string
	// info describes the source without its extended attributes, which a tree never
	// needs: only names, types, sizes, modes and times are kept of what the server sent.
	info   fs.FileInfo
	target string // a local symbolic link's target, read during the walk (Put)
}

// cost is what the entry costs held: its paths and its attributes.
func (e *treeEntry) cost() int64 {
	return pathCost(e.src) + pathCost(e.dst) + pathCost(e.target) + entryOverhead
}

// treeDir is a directory of the tree from the moment it is found until everything
// below it is finished.
type treeDir struct {
	treeEntry
	parent *treeDir
	top    *treeTop
	depth  int   // levels below its tree's root
	cost   int64 // charged to the budget until it is finished

	// pending counts what must end before the directory is finished: its own walk,
	// and each file, link and subdirectory handed out from it.
	pending atomic.Int64
	// failed is set by its walker when it could not be made or entered: nothing is
	// below it, and it is not finished.
	failed bool

	// A Put's directory is made on the server by a MKDIR that may still be in flight
	// when its files are handed out: they wait for made.
	made    chan struct{}
	madeErr error // set before made is closed
	// sendChildren is set by its walker when MKDIRs of its subdirectories may go out
	// without waiting for it: it was missing, or this call made it, so nothing below
	// it can be a link that would take them elsewhere.
	sendChildren bool
}

// treeTop is what the directories of one source tree share.
type treeTop struct {
	src  string   // the source root's path as given
	root *os.Root // Put: the local source, opened on src
	// fresh is set for a Put when the remote root was missing: its MKDIR, and those
	// below it, go out without waiting (treeput.go).
	fresh bool
}

// treeSide is what Get and Put do differently in a tree transfer.
type treeSide interface {
	// enter makes d, or checks that it is there, before it is listed. An error
	// matching errParentFailed is not recorded: the parent's failure was.
	enter(ctx context.Context, d *treeDir) error
	// list lists d a page at a time, calling emit with each entry; emit's error
	// ends the listing, which then returns it.
	list(ctx context.Context, d *treeDir, emit func(treeEntry) error) error
	// small reports whether a file moves by the two-round-trip path (smallfile.go);
	// size is its size as listed, -1 when the server sent none.
	small(fi fs.FileInfo) bool
	size(fi fs.FileInfo) int64
	file(ctx context.Context, d *treeDir, e treeEntry) error
	link(ctx context.Context, d *treeDir, e treeEntry) error
	// finish sets d's mode and times (Preserve) once everything below it is done.
	finish(ctx context.Context, d *treeDir) error
}

// A tree transfer holds the frontier of its walk, never the whole tree: these
// bound its parts by count, so that an honest tree stays far below the call's memory
// limit (WithMemoryLimit), which every part is charged to as well.
const (
	// treePendingDirs is how many subdirectories a directory's walker keeps before it
	// walks them: past it the walker goes down into them and comes back to the rest
	// of the listing after, so a directory of a million subdirectories is never held
	// whole.
	treePendingDirs = 64
	// treePageEntries bounds the entries taken from one READDIR page at a time (a
	// page is one reply, 100 names on OpenSSH); localPageEntries is the local
	// equivalent, one ReadDir(n) of a local directory.
	treePageEntries  = 1 << 10
	localPageEntries = 256
	// treeRepliesAhead is how many replies a tree's collectors wait for in order
	// (MKDIRs of new directories, CLOSEs of listed ones) while the walk goes on:
	// past it the walk waits. OpenSSH carries out a channel's requests in order, so
	// a new tree's directories are made in one round trip per this many.
	treeRepliesAhead = 256
	// maxTreeDepth is how many directory levels a tree transfer descends, its root
	// being the first, as OpenSSH's client: a server can serve a directory that
	// contains itself forever.
	maxTreeDepth = 64
)

// errParentFailed ends the work below a directory that could not be made: that
// failure was recorded, these are not.
var errParentFailed = errors.New("sftp: the parent directory could not be made")

// treeRun is one tree transfer: the walk of one or more sources, the copying of
// what it finds, and the failures.
type treeRun struct {
	t      *getPutCall
	op     string // "get" or "put"
	side   treeSide
	budget *budget

	// stop ends when the tree stops: the caller's ctx ended, the connection died, or
	// StopOnError met a failure. Every walk and transfer of the tree runs under it.
	stop context.Context
	halt context.CancelCauseFunc

	walkers sync.WaitGroup      // walkers started on goroutines of their own
	slots   *semaphore.Weighted // walkers at once
	work    errgroup.Group      // files and links, in flight at once: SetLimit
	large   chan struct{}       // a place for a file that is not small
	small   *semaphore.Weighted // the bytes small files in flight hold (smallBudget)
	replies []*replyQueue       // collectors to drain before the tree returns
	bg      sync.WaitGroup      // work the collectors started (treeput.go's remake)
	fails   treeFailures

	found  atomic.Int64 // files found so far
	walked atomic.Bool  // set once the walk has ended

	claimMu sync.Mutex
	claimed map[string]struct{} // destinations in flight (see claim)
}

// newTreeRun starts a tree transfer of op under t.
func (t *getPutCall) newTreeRun(op string, side treeSide) *treeRun {
	r := &treeRun{
		t: t, op: op, side: side, budget: t.c.newBudget(),
		slots:   semaphore.NewWeighted(int64(t.o.parallel)),
		large:   make(chan struct{}, t.o.parallel),
		small:   semaphore.NewWeighted(smallBudget),
		claimed: map[string]struct{}{},
	}
	r.fails.b = r.budget
	r.stop, r.halt = context.WithCancelCause(t.ctx)
	r.work.SetLimit(max(t.o.parallel, t.o.smallParallel))
	// Files side by side share the window (File.share); how many there are is known
	// only once the walk has ended (see getPutCall.fileShare).
	t.share = t.o.parallel
	t.tree = r
	return r
}

// walkRoot walks d, the root of a source tree, on the calling goroutine, which has
// a walker's slot, or fails it with what stopped the tree.
func (r *treeRun) walkRoot(d *treeDir) {
	d.pending.Store(1)
	if !r.claim(d.dst) {
		r.fail(d.src, errDuplicateName)
		return
	}
	d.cost = d.treeEntry.cost() + treeDirOverhead
	if err := r.budget.charge(d.cost); err != nil {
		r.budget.release(d.cost)
		r.unclaim(d.dst)
		r.fail(d.src, err)
		return
	}
	r.walk(d)
}

// wait waits for the walk and for every file in flight, and returns the outcome.
func (r *treeRun) wait() error {
	r.walkers.Wait()
	r.walked.Store(true)
	r.t.rep.walked()
	r.work.Wait()
	for _, q := range r.replies {
		q.close()
	}
	r.bg.Wait()
	stopped := context.Cause(r.stop)
	if r.t.ctx.Err() != nil {
		stopped = ctxError(r.t.ctx, "")
	}
	r.halt(nil)
	if r.t.o.stopOnError && stopped != nil {
		return stopped // the first failure, as StopOnError promises
	}
	return r.fails.result(r.op, stopped)
}

// walk lists d and hands out what it finds, then walks its subdirectories.
func (r *treeRun) walk(d *treeDir) {
	defer r.dirDone(d)
	if err := r.side.enter(r.stop, d); err != nil {
		d.failed = true
		r.fail(d.src, err)
		return
	}
	var subdirs []treeEntry
	var held int64 // what subdirs is charged
	defer func() { r.budget.release(held) }()
	err := r.side.list(r.stop, d, func(e treeEntry) error {
		switch mode := e.info.Mode(); {
		case mode.IsDir():
			if !r.claim(e.dst) {
				r.fail(e.src, errDuplicateName)
				return nil
			}
			c := e.cost()
			held += c
			if err := r.budget.charge(c); err != nil {
				r.unclaim(e.dst)
				return err
			}
			subdirs = append(subdirs, e)
			if len(subdirs) == treePendingDirs {
				r.descend(d, subdirs)
				clear(subdirs)
				subdirs = subdirs[:0]
				r.budget.release(held)
				held = 0
			}
		case mode&fs.ModeSymlink != 0:
			r.hand(d, e, false)
		case mode.IsRegular() && !r.t.skipped(e.src, e.info):
			r.foundFile(e.info)
			r.hand(d, e, true)
		}
		return r.stop.Err()
	})
	if err != nil {
		r.fail(d.src, err)
	}
	r.descend(d, subdirs)
}

// descend walks the subdirectories of d that its walker found (and claimed): each on
// a walker of its own when one is free, else on this one, so that the walk goes deep,
// not wide, once every walker is busy.
func (r *treeRun) descend(d *treeDir, subdirs []treeEntry) {
	for i, e := range subdirs {
		if r.stop.Err() != nil || d.depth+1 >= maxTreeDepth {
			r.unclaim(e.dst)
			if r.stop.Err() != nil {
				for _, e := range subdirs[i+1:] {
					r.unclaim(e.dst)
				}
				return
			}
			r.fail(e.src, fmt.Errorf("%w: more than %d levels", errTooDeep, maxTreeDepth))
			continue
		}
		child := &treeDir{treeEntry: e, parent: d, top: d.top, depth: d.depth + 1}
		child.cost = e.cost() + treeDirOverhead
		if err := r.budget.charge(child.cost); err != nil {
			r.budget.release(child.cost)
			r.unclaim(e.dst)
			r.fail(e.src, err)
			continue
		}
		child.pending.Store(1)
		d.pending.Add(1)
		if r.slots.TryAcquire(1) {
			r.walkers.Add(1)
			go func() {
				defer r.walkers.Done()
				defer r.slots.Release(1)
				r.walk(child)
			}()
		} else {
			r.walk(child)
		}
	}
}

// foundFile counts a file the walk found.
func (r *treeRun) foundFile(fi fs.FileInfo) {
	r.found.Add(1)
	r.t.rep.found(r.side.size(fi))
}

// fileShare is how many files File.share says move side by side: Parallel, or fewer
// once the walk has ended and found fewer.
func (t *getPutCall) fileShare() int {
	if r := t.tree; r != nil && r.walked.Load() {
		return max(1, min(t.share, int(r.found.Load())))
	}
	return t.share
}

// hand gives e, a file (isFile) or a link found in d (nil for a source of GetAll or
// PutAll given as a file), to a worker, waiting for a free one: that wait is what
// keeps the walk from running ahead of the copying.
func (r *treeRun) hand(d *treeDir, e treeEntry, isFile bool) {
	if !r.claim(e.dst) {
		r.fail(e.src, errDuplicateName)
		return
	}
	cost := e.cost()
	if err := r.budget.charge(cost); err != nil {
		r.budget.release(cost)
		r.unclaim(e.dst)
		r.fail(e.src, err)
		return
	}
	if d != nil {
		d.pending.Add(1)
	}
	r.work.Go(func() error {
		defer r.dirDone(d)
		defer r.budget.release(cost)
		defer r.unclaim(e.dst)
		if !isFile {
			r.fail(e.src, r.side.link(r.stop, d, e))
			return nil
		}
		release, err := r.place(e.info)
		if err != nil {
			return nil // the tree stopped
		}
		defer release()
		r.fail(e.src, r.side.file(r.stop, d, e))
		return nil
	})
}

// place waits for room for a file in flight: among the small files, their bytes
// bounded by smallBudget; among the others, Parallel at once.
//
// The workers have no recover. A panic on one would end the caller's process, but
// turning it into an error would hide a bug and keep using what it left broken (a
// handle open, a lock held, a pooled buffer still referenced). Server input is kept
// from panicking where it is read instead: every decoder checks a length before
// slicing by it (and is fuzzed), and a handle longer than the drafts allow, which
// would overrun the room data buffers keep for headers, is refused (decodeHandle).
func (r *treeRun) place(fi fs.FileInfo) (release func(), err error) {
	if r.side.small(fi) {
		cost := smallCost(fi.Size())
		if err := r.small.Acquire(r.stop, cost); err != nil {
			return nil, err
		}
		return func() { r.small.Release(cost) }, nil
	}
	select {
	case r.large <- struct{}{}:
		return func() { <-r.large }, nil
	case <-r.stop.Done():
		return nil, r.stop.Err()
	}
}

// dirDone drops one of d's pending counts; the last finishes d, and so on up.
func (r *treeRun) dirDone(d *treeDir) {
	for ; d != nil; d = d.parent {
		if d.pending.Add(-1) > 0 {
			return
		}
		if !d.failed && r.t.o.preserve && r.stop.Err() == nil {
			r.fail(d.src, r.side.finish(r.stop, d))
		}
		r.budget.release(d.cost)
		r.unclaim(d.dst)
	}
}

// fail records err, the failure of the file, link or directory src, or stops the
// tree when it means nothing more can move. A failure while the tree is stopping is
// a consequence of the stop, whose cause is returned instead, and one below a
// directory that could not be made (errParentFailed) is that directory's, recorded
// already.
func (r *treeRun) fail(src string, err error) {
	if err == nil || r.stop.Err() != nil || errors.Is(err, errParentFailed) {
		return
	}
	err = pathErr(r.op, src, err)
	switch {
	case r.t.ctx.Err() != nil:
		r.halt(ctxError(r.t.ctx, ""))
	case r.t.c.main.failed() != nil:
		r.halt(err) // the connection died: every request from now on would fail
	case r.t.o.stopOnError:
		r.halt(err)
	default:
		r.fails.add(err)
	}
}

// claim marks dst as in flight, or reports that it already is. A server that lists a
// name twice in a directory would otherwise have two workers write the same part file
// at once. Only names in flight are kept, not every name of a directory (a million
// names would be a listing held whole): a repeat that comes after its first finished
// is copied again, which a rename makes whole, and nothing it does can write outside
// the destination or through a link (os.Root and the link checks see to that).
func (r *treeRun) claim(dst string) bool {
	r.claimMu.Lock()
	defer r.claimMu.Unlock()
	if _, ok := r.claimed[dst]; ok {
		return false
	}
	r.claimed[dst] = struct{}{}
	return true
}

func (r *treeRun) unclaim(dst string) {
	r.claimMu.Lock()
	delete(r.claimed, dst)
	r.claimMu.Unlock()
}

// treeDirOverhead is what a directory's bookkeeping costs beyond its entry: the
// treeDir, its claim in the map, its made channel.
const treeDirOverhead = 256

// replyQueue waits, on a goroutine of its own, for replies to requests sent without
// waiting (a new tree's MKDIRs, the CLOSEs of listed directories), in the order they
// were sent: the walk goes on meanwhile, up to treeRepliesAhead of them.
type replyQueue struct {
	ch   chan func()
	done chan struct{}
}

func (r *treeRun) newReplyQueue() *replyQueue {
	q := &replyQueue{ch: make(chan func(), treeRepliesAhead), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for wait := range q.ch {
			wait()
		}
	}()
	r.replies = append(r.replies, q)
	return q
}

// add queues wait, which waits for one reply; it blocks while the queue is full.
func (q *replyQueue) add(wait func()) { q.ch <- wait }

// close waits for every reply queued.
func (q *replyQueue) close() {
	close(q.ch)
	<-q.done
}

var errUnsafeName = errors.New("sftp: the server listed a name that is not a plain file name")

var (
	errDuplicateName = errors.New("sftp: the same name is being copied already (the server listed it twice)")
	errTooDeep       = errors.New("sftp: the remote tree nests directories too deep")
)

// dirPerm is the mode a directory is created with: owner rwx is added, or the copy
// could not fill it. Preserve sets the exact mode once it is full.
func dirPerm(mode fs.FileMode, known bool) fs.FileMode {
	if !known {
		return 0o755
	}
	return mode.Perm() | 0o700
}
