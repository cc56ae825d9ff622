package sftp

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Hostile trees for the walk's bounds: the server serves every directory under a
// prefix with the same listing, so the tree has no end, and the walk (and RemoveAll,
// which is built on it) must stop at its depth or its held bytes, in bounded heap.

// selfListing lists, at every path under prefix, one subdirectory named dir and the
// files, in one page.
func selfListing(prefix, dir string, files ...string) func(string) testserver.Lister {
	page := []testserver.ListEntry{{Name: dir, Mode: 0o040755}}
	for _, f := range files {
		page = append(page, testserver.ListEntry{Name: f, Mode: 0o100644})
	}
	lister := func(n int) []testserver.ListEntry {
		if n > 0 {
			return nil
		}
		return page
	}
	return func(p string) testserver.Lister {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return lister
		}
		return nil
	}
}

// lstatDirs answers every LSTAT under prefix with a directory's attributes, so that
// a client checking each level with LSTAT (as RemoveAll did) finds the loop too.
func lstatDirs(prefix string) func(testserver.Request, []byte) [][]byte {
	return func(req testserver.Request, _ []byte) [][]byte {
		if req.Type != testserver.TypeLstat || !strings.HasPrefix(req.Path, prefix+"/") {
			return nil
		}
		a := sshfx.AppendAttrs(nil, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: 0o40755})
		return [][]byte{replyPacket(sshfx.TypeAttrs, req.ID, a)}
	}
}

// heapSampler wraps a Listing hook to sample the live heap at every every-th OPENDIR
// (the client is then waiting for that reply, holding what it walked so far).
type heapSampler struct {
	n, every int
	base     int64
	peak     int64
}

func newHeapSampler(every int) *heapSampler {
	return &heapSampler{every: every, base: liveHeap()}
}

// wrap runs on the server's reader goroutine, one OPENDIR at a time.
func (h *heapSampler) wrap(f func(string) testserver.Lister) func(string) testserver.Lister {
	return func(p string) testserver.Lister {
		if h.n++; h.n%h.every == 0 {
			h.peak = max(h.peak, liveHeap()-h.base)
		}
		return f(p)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestRemoveAllStopsAtMaxDepth: RemoveAll of a directory that contains itself forever
// (a loop served as plain directories) ends with ErrWalkTooDeep at MaxWalkDepth,
// instead of descending without end and holding every level's path and listing.
func TestRemoveAllStopsAtMaxDepth(t *testing.T) {
	heap := newHeapSampler(64)
	c, srv := newTestServerClient(t, testserver.Options{Listing: heap.wrap(selfListing("/loop", "d")), Corrupt: lstatDirs("/loop")})
	ctx := tsCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/loop", 0o755))
	err := c.RemoveAll(ctx, "/loop")
	require.ErrorIs(t, err, ErrWalkTooDeep)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/loop"+strings.Repeat("/d", MaxWalkDepth), pe.Path)
	require.Equal(t, MaxWalkDepth, srv.Requests(testserver.TypeOpendir), "one listing per level, then the bound")
	require.Zero(t, srv.Requests(testserver.TypeRmdir), "nothing below the bound is removed blindly")
	t.Logf("live heap growth, peak of samples: %d KiB", heap.peak>>10)
	require.Less(t, heap.peak, int64(16<<20))
}

// TestRemoveAllBoundsTheBytesItHolds: names long enough that the paths on the
// current path (which grow with depth, so their sum with its square) pass the held
// bytes before MaxWalkDepth. RemoveAll stops there with ErrListingTooLarge.
func TestRemoveAllBoundsTheBytesItHolds(t *testing.T) {
	long := strings.Repeat("n", 1000)
	heap := newHeapSampler(8)
	c, srv := newTestServerClient(t, testserver.Options{Listing: heap.wrap(selfListing("/loop", long)), Corrupt: lstatDirs("/loop")})
	ctx := tsCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/loop", 0o755))
	const budget = 4 << 20
	err := c.removeAll(ctx, "/loop", walkBound{entries: MaxWalkHeldEntries, bytes: budget})
	require.ErrorIs(t, err, ErrListingTooLarge)
	// Level k holds its path, about 1001*k bytes, and its entry, 1000: the sum passes
	// 4 MiB near level 90, far above MaxWalkDepth.
	levels := srv.Requests(testserver.TypeOpendir)
	require.Greater(t, levels, 80)
	require.Less(t, levels, 100)
	t.Logf("live heap growth, peak of samples: %d KiB", heap.peak>>10)
	require.Less(t, heap.peak, int64(3*budget))
}

// TestWalkDirBoundsTheBytesItHolds: a deep tree whose every directory holds long
// names. The walk holds each level's listing until its subtrees are walked; it must
// count their bytes, page by page, and stop at its byte bound (here 1 MiB), not only
// at its entry count.
func TestWalkDirBoundsTheBytesItHolds(t *testing.T) {
	var files []string
	for i := range 16 {
		files = append(files, fmt.Sprintf("%02d%s", i, strings.Repeat("x", 4094)))
	}
	heap := newHeapSampler(4)
	c, srv := newTestServerClient(t, testserver.Options{Listing: heap.wrap(selfListing("/deep", "d", files...))})
	ctx := tsCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/deep", 0o755))
	const budget = 1 << 20
	var tooLarge []string
	err := c.walkDir(ctx, "/deep", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			require.ErrorIs(t, err, ErrListingTooLarge)
			tooLarge = append(tooLarge, p)
			return fs.SkipDir
		}
		return nil
	}, nil, walkBound{entries: MaxWalkHeldEntries, bytes: budget}, nil)
	require.NoError(t, err)
	// Each level holds 16 names of 4 KiB: 64 KiB a level, so the sixteenth listing
	// passes 1 MiB and is refused; its siblings are still walked.
	require.Equal(t, []string{"/deep" + strings.Repeat("/d", 15)}, tooLarge)
	require.Equal(t, 16, srv.Requests(testserver.TypeOpendir))
	t.Logf("live heap growth, peak of samples: %d KiB", heap.peak>>10)
	require.Less(t, heap.peak, int64(3*budget))
}

// TestHostileGetChargesEachPage: a recursive Get lists a level's directories Parallel
// at a time against one shared budget. Here sixteen directories list pages of names
// forever; the budget (1 MiB) must be charged page by page, so the Get stops after
// about a budget's worth of pages, not after each listing has run to its own bound
// (MaxReadDirBytes or MaxReadDirEntries, a thousand pages each).
func TestHostileGetChargesEachPage(t *testing.T) {
	var dirs []testserver.ListEntry
	for i := range 16 {
		dirs = append(dirs, testserver.ListEntry{Name: fmt.Sprintf("d%02d", i), Mode: 0o040755})
	}
	top := func(n int) []testserver.ListEntry {
		if n > 0 {
			return nil
		}
		return dirs
	}
	c, srv := newTestServerClient(t, testserver.Options{Listing: func(p string) testserver.Lister {
		switch {
		case p == "/wide":
			return top
		case strings.HasPrefix(p, "/wide/"):
			return endless(1000)
		}
		return nil
	}})
	require.NoError(t, srv.Mkdir("/wide", 0o755))
	lim := walkLimits{depth: 64, entries: 1 << 20, bytes: 1 << 20}
	err := c.Get(tsCtx(t), "/wide", filepath.Join(t.TempDir(), "out"), Recursive(), withWalkLimits(lim))
	require.ErrorIs(t, err, errTooBig)
	require.NotErrorIs(t, err, ErrListingTooLarge, "the shared budget, not one listing's own bound, stopped the Get")
	// A page of 1000 entries costs well over 16 KiB of the budget, so 64 pages pass it;
	// up to Parallel (16) listings have up to readAhead READDIRs each in flight when
	// it runs out.
	require.Less(t, srv.Requests(testserver.TypeReaddir), 1+64+16*readAhead)
	require.Zero(t, srv.OpenHandles())
}

// TestGlobBoundsItsMatches: "*/*" over a server's directories matches every entry of
// every one of them, and the result is held whole; past its bound the Glob fails with
// ErrListingTooLarge rather than growing (a million directories of a million entries
// each would be 10^12 names). The bound is lowered here; MaxGlobMatches in use.
func TestGlobBoundsItsMatches(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Listing: func(p string) testserver.Lister {
		if strings.HasPrefix(p, "/g/") {
			return numbered(1000, 300)
		}
		return nil
	}})
	for _, d := range []string{"/g", "/g/a", "/g/b", "/g/c", "/g/d"} {
		require.NoError(t, srv.Mkdir(d, 0o755))
	}
	ctx := tsCtx(t)
	got, err := c.glob(ctx, "/g/*/f*", 0, 4000)
	require.NoError(t, err)
	require.Len(t, got, 4000, "exactly the bound is accepted")
	require.Equal(t, "/g/d/f0000999", got[3999])
	_, err = c.glob(ctx, "/g/*/f*", 0, 3999)
	require.ErrorIs(t, err, ErrListingTooLarge)
	_, err = c.glob(ctx, "/g/*", 0, 3)
	require.ErrorIs(t, err, ErrListingTooLarge, "the directories the pattern passes through count too")
	got, err = c.Glob(ctx, "/g/*/f*")
	require.NoError(t, err)
	require.Len(t, got, 4000)
	requireWorks(t, c) // a listing does not wait for its CLOSE; this round trip does
	require.Zero(t, srv.OpenHandles())
}
