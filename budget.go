package sftp

import (
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The memory account. What a call holds because of what the server sent (names,
// attributes and their extended pairs, paths built from names, glob matches, the
// frontier of a tree walk) is charged to one budget per call, from the decoded sizes,
// with the formulas below, as each page of a listing arrives. Past the Client's limit
// (WithMemoryLimit) the call fails with an error matching ErrListingTooLarge, never
// with a shortened result. Bounds on counts alone do not work: an entry the server
// sends in 8 bytes can cost dozens in memory.

// defaultMemoryLimit is what one call may hold by default: low enough for a service
// talking to many servers at once.
const defaultMemoryLimit = 64 << 20

// minMemoryLimit keeps a limit from being so low that an honest directory page
// cannot be held.
const minMemoryLimit = 1 << 20

// WithMemoryLimit sets the most memory one call may hold because of what the server
// sent (default 64 MiB): the entries of a whole listing (ReadDir), the listings and
// paths on a walk's current path (WalkDir, Walk, RemoveAll), the matches of a Glob, and
// the frontier of a tree transfer (Get, Put with Recursive). Each entry is charged its
// name, its attributes with every extended pair, and the memory the structures holding
// them take. A call that would pass the limit fails with an error matching
// ErrListingTooLarge. Streaming listings (DirEntries, Dir.ReadDir(n) with n > 0) hold
// one page at a time and are not limited by it.
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
}

func (c *Client) newBudget() *budget { return &budget{limit: c.opts.memoryLimit} }

// charge adds n bytes to what the call holds. Past the limit it returns an error
// matching ErrListingTooLarge; the charge stays, and the caller releases it as it
// drops what it held.
func (b *budget) charge(n int64) error {
	if b.held.Add(n) > b.limit {
		return fmt.Errorf("%w: the call would hold more than %d bytes of names and attributes (WithMemoryLimit raises the limit)",
			ErrListingTooLarge, b.limit)
	}
	return nil
}

// release gives back n bytes charged before.
func (b *budget) release(n int64) { b.held.Add(-n) }

// What held things cost, beyond the bytes of their strings. Measured on 64-bit Go
// (budget_test.go): the structures are smaller on 32-bit platforms, never larger.
const (
	// entryOverhead is one listed entry: its fileInfo (name header, mode, Attrs),
	// the dirEntry interface in the listing's slice, and allocation rounding.
	entryOverhead = 160
	// extendedOverhead is one extended pair: its two string headers.
	extendedOverhead = 32
	// stringOverhead is a string kept on its own (a path): its header and rounding.
	stringOverhead = 24
)

// entryCost is what one entry of a listing costs held: its name and its attributes,
// every extended pair included.
func entryCost(name string, a *sshfx.Attrs) int64 {
	n := int64(entryOverhead + len(name))
	for _, x := range a.Extended {
		n += int64(extendedOverhead + len(x.Type) + len(x.Data))
	}
	return n
}

// pathCost is what a path kept on its own costs.
func pathCost(p string) int64 { return int64(stringOverhead + len(p)) }
