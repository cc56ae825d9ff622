package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The memory account. What a call holds because of what the server sent (listed
// entries with their names and attributes, extended pairs included, paths built from
// names, glob matches, the frontier of a tree walk, the failures a tree returns) is
// charged to one budget per call,
// from the decoded sizes, with the formulas below, as each page of a listing arrives
// and before the next is asked for. Past the Client's limit (WithMemoryLimit) the
// call fails with an error matching ErrListingTooLarge, never with a shortened result.
// Bounds on counts alone do not work: an entry the server sends in 12 bytes costs over
// a hundred in memory, and an empty extended pair costs 32 for its 8.
//
// What is not charged is bounded by the protocol instead: the one page being decoded
// and turned into entries before its charge (at most pageInflation times a reply's
// length, see decodeName), and the replies in flight (readAhead replies, each at most
// the Client's reply length cap, 256 KiB by default), per listing under way. The data
// of a tree's small files in flight has a bound of its own (smallBudget, smallCost),
// and a server's text in an error is cut (maxStatusMessage).

// defaultMemoryLimit is what one call may hold by default: low enough for a service
// talking to many servers at once.
const defaultMemoryLimit = 64 << 20

// minMemoryLimit keeps a limit from being so low that an honest directory page
// cannot be held.
const minMemoryLimit = 1 << 20

// ErrListingTooLarge is matched by the error of a call that would hold more memory
// than WithMemoryLimit allows because of what the server sent: a whole listing
// (ReadDir, Dir.ReadDir(n <= 0), the io/fs ReadDir), the listings and paths on a
// walk's current path, the matches of a Glob. The error says which option raises
// the limit; a directory of any size is still listed by DirEntries or
// Dir.ReadDir(n > 0), which hold one page at a time.
var ErrListingTooLarge = errors.New("sftp: the call would hold more memory than WithMemoryLimit allows")

// WithMemoryLimit sets the most memory one call may hold because of what the server
// sent (default 64 MiB, at least 1 MiB): the entries of a whole listing (ReadDir,
// Dir.ReadDir(n <= 0), the io/fs ReadDir), the listings and paths on a walk's current
// path (WalkDir, Walk, RemoveAll), the matches of a Glob, the frontier of a tree
// transfer (Get, Put with Recursive) and the failures its *TreeError keeps (within a
// quarter of the limit: past it they are counted, not kept). Each entry is charged
// its name, its attributes with every extended pair, and the memory the structures
// holding them take, as measured on 64-bit Go. A call that would pass the limit fails with an error
// matching ErrListingTooLarge, except that a walk goes on through a directory too
// large to hold whole by reading it a page at a time. Streaming listings (DirEntries,
// Dir.ReadDir(n) with n > 0) hold one page at a time and are not limited by it.
//
// A call may briefly hold a little more than the limit: the page being decoded when
// the limit is passed, and the replies in flight (a few MiB; see the package
// documentation's table).
func WithMemoryLimit(bytes int64) Option {
	return func(o *options) error {
		if bytes < minMemoryLimit {
			return fmt.Errorf("sftp: WithMemoryLimit(%d): want at least %d", bytes, minMemoryLimit)
		}
		o.memoryLimit = bytes
		return nil
	}
}

// budget is the memory account of one call. It is safe for concurrent use: a tree
// charges it from several listings at once.
type budget struct {
	limit int64
	held  atomic.Int64
	peak  atomic.Int64 // the most held at once, for tests and measurements
}

func (c *Client) newBudget() *budget { return &budget{limit: c.opts.memoryLimit} }

// charge adds n bytes to what the call holds. Past the limit it returns an error
// matching ErrListingTooLarge; the charge stays, and the caller releases it as it
// drops what it held.
func (b *budget) charge(n int64) error {
	held := b.held.Add(n)
	storeMax(&b.peak, held)
	if held > b.limit {
		return fmt.Errorf("%w (%d bytes of names and attributes)", ErrListingTooLarge, b.limit)
	}
	return nil
}

// release gives back n bytes charged before.
func (b *budget) release(n int64) { b.held.Add(-n) }

// free is what the call may still charge.
func (b *budget) free() int64 { return b.limit - b.held.Load() }

// hold is what one holder (a listing, a level of a walk, a set of matches) charged
// to a budget, so that it gives back exactly that when it drops what it held. Not
// safe for concurrent use; the budget behind it is.
type hold struct {
	b *budget
	n int64
}

func (b *budget) newHold() *hold { return &hold{b: b} }

// add charges n more; see budget.charge.
func (h *hold) add(n int64) error {
	h.n += n
	return h.b.charge(n)
}

// sub gives back n of what was added.
func (h *hold) sub(n int64) {
	h.n -= n
	h.b.release(n)
}

// drop gives back everything the hold charged.
func (h *hold) drop() { h.sub(h.n) }

// addPage charges a page of entries the holder keeps; it is readAll's charge.
func (h *hold) addPage(page []fs.DirEntry) error { return h.add(pageCost(page)) }

// What held things cost, beyond the bytes of their strings. Measured on 64-bit Go by
// budget_test.go, which builds entries and paths as the decoder and the listings do
// and fails if these formulas undercount the heap they take. The structures are
// smaller on 32-bit platforms, never larger.
const (
	// fileInfoBytes is one entry's fileInfo (name header, mode, sshfx.Attrs: 88
	// bytes), in the allocator's 96-byte size class.
	fileInfoBytes = 96
	// entrySlotBytes is one fs.DirEntry in a slice, with the allocator's rounding of
	// the slice (a quarter at most). A whole listing holds two per entry when it
	// ends: the page it came in and the listing they are joined into.
	entrySlotBytes = 20
	// entryOverhead is one listed entry held in a whole listing.
	entryOverhead = fileInfoBytes + 2*entrySlotBytes
	// pageOverhead is one page held in a whole listing until it ends: the page's
	// slice header in the list of pages, which grows by appending (so up to three
	// headers per page while it grows), and the rounding of the page's array.
	pageOverhead = 3*24 + 16
	// extendedPairBytes is one extended pair in its attributes' array: two string
	// headers.
	extendedPairBytes = 32
	// pathSlotBytes is a string header in a slice grown by appending, which holds up
	// to three headers per element while it grows.
	pathSlotBytes = 3 * 16
)

// pageInflation bounds what decoding one READDIR reply and turning it into entries
// allocates, per byte of the reply, before the page is charged: the worst case is an
// entry of 12 bytes on the wire (empty name and longname, bare flags), which costs its
// nameEntry (88 bytes) while decoding and its fileInfo and slot (112) once kept, about
// 17 times its size. With the 256 KiB reply cap that is 4.3 MiB, once per listing
// in progress. Extended pairs inflate less: 32 bytes for the 8 of an empty pair.
// budget_test.go measures it.
const pageInflation = 17

// heapBytes is an upper bound of the heap an object of n bytes takes: the allocator
// rounds a small object up to its size class (less than a fifth more, or a 16-byte
// tiny block; a quarter is counted, so the bound holds if the classes change) and a
// large one, past 32 KiB, to whole 8 KiB pages. Empty strings take nothing.
func heapBytes(n int) int64 {
	const maxSmall, page = 32 << 10, 8 << 10
	switch {
	case n <= 0:
		return 0
	case n > maxSmall:
		return int64(n+page-1) &^ (page - 1)
	}
	return int64(n) + int64(n)/4 + 16
}

// extendedCost is what an entry's extended pairs cost held: their array and their
// strings.
func extendedCost(ext []sshfx.ExtendedAttr) int64 {
	if len(ext) == 0 {
		return 0
	}
	n := heapBytes(extendedPairBytes * cap(ext))
	for _, x := range ext {
		n += heapBytes(len(x.Type)) + heapBytes(len(x.Data))
	}
	return n
}

// entryCost is what one entry of a whole listing costs held: its name and its
// attributes, every extended pair included.
func entryCost(name string, a *sshfx.Attrs) int64 {
	return entryOverhead + heapBytes(len(name)) + extendedCost(a.Extended)
}

// pageCost is what a page of entries costs held in a whole listing.
func pageCost(page []fs.DirEntry) int64 {
	if len(page) == 0 {
		return 0
	}
	n := int64(pageOverhead)
	for _, e := range page {
		if de, ok := e.(dirEntry); ok {
			n += entryCost(de.fi.name, &de.fi.attrs)
		} else {
			n += entryOverhead + heapBytes(len(e.Name()))
		}
	}
	return n
}

// pathCost is what a path kept on its own costs: its bytes and its header in a slice.
func pathCost(p string) int64 { return pathSlotBytes + heapBytes(len(p)) }
