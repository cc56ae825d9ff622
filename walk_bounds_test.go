package sftp

import (
	"fmt"
	"io/fs"
	"math"
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
	ctx := testCtx(t)
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

// walkRefusal is where a walk with the memory limit limit refuses a tree whose every
// directory lists page and has the subdirectory dir: each level charges its path,
// then its listing, as the walker does, with the memory account's formulas. opened is
// how many directories it opens; refused is the path of the one it refuses.
func walkRefusal(limit int64, root, dir string, page []testserver.ListEntry) (opened int, refused string) {
	listing := pageCost(listedEntries(page))
	var held int64
	p := root
	for k := 0; ; k++ {
		if held += pathCost(p); held > limit {
			return k, p
		}
		if held += listing; held > limit {
			return k + 1, p
		}
		p += "/" + dir
	}
}

// listedEntries is what the client keeps of a page the testserver lists.
func listedEntries(page []testserver.ListEntry) []fs.DirEntry {
	out := make([]fs.DirEntry, 0, len(page))
	for _, e := range page {
		a := sshfx.Attrs{Flags: sshfx.AttrSize | sshfx.AttrPermissions, Size: e.Size, Permissions: e.Mode}
		if e.Extended != nil {
			a.Flags |= sshfx.AttrExtended
			a.Extended = make([]sshfx.ExtendedAttr, 0, len(e.Extended))
			for _, x := range e.Extended {
				a.Extended = append(a.Extended, sshfx.ExtendedAttr{Type: x.Type, Data: x.Data})
			}
		}
		out = append(out, dirEntry{newFileInfo(e.Name, &a, 0)})
	}
	return out
}

// TestRemoveAllBoundsTheBytesItHolds: names long enough that the paths on the
// current path (which grow with depth, so their sum with its square) pass the memory
// limit before MaxWalkDepth. RemoveAll stops there with ErrListingTooLarge.
func TestRemoveAllBoundsTheBytesItHolds(t *testing.T) {
	long := strings.Repeat("n", 1000)
	heap := newHeapSampler(8)
	const limit = 4 << 20
	c, srv := newTestServerClient(t, testserver.Options{Listing: heap.wrap(selfListing("/loop", long)), Corrupt: lstatDirs("/loop")},
		WithMemoryLimit(limit))
	ctx := testCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/loop", 0o755))
	err := c.RemoveAll(ctx, "/loop")
	require.ErrorIs(t, err, ErrListingTooLarge)
	// Level k holds its path, about 1001*k bytes, and its entry, 1000: the sum passes
	// 4 MiB near level 80, far above MaxWalkDepth.
	opened, _ := walkRefusal(limit, "/loop", long, []testserver.ListEntry{{Name: long, Mode: 0o040755}})
	require.Equal(t, opened, srv.Requests(testserver.TypeOpendir))
	require.Greater(t, opened, 50)
	require.Less(t, opened, MaxWalkDepth)
	t.Logf("%d levels; live heap growth, peak of samples: %d KiB", opened, heap.peak>>10)
	require.Less(t, heap.peak, int64(3*limit))
}

// TestWalkDirBoundsTheBytesItHolds: a deep tree whose every directory holds long
// names. The walk holds each level's listing until its subtrees are walked; it must
// count their bytes, page by page, and stop at the memory limit (here 1 MiB), not
// only at its entry count.
func TestWalkDirBoundsTheBytesItHolds(t *testing.T) {
	page := []testserver.ListEntry{{Name: "d", Mode: 0o040755}}
	var files []string
	for i := range 16 {
		files = append(files, fmt.Sprintf("%02d%s", i, strings.Repeat("x", 4094)))
		page = append(page, testserver.ListEntry{Name: files[i], Mode: 0o100644})
	}
	heap := newHeapSampler(4)
	const limit = 1 << 20
	c, srv := newTestServerClient(t, testserver.Options{Listing: heap.wrap(selfListing("/deep", "d", files...))}, WithMemoryLimit(limit))
	ctx := testCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/deep", 0o755))
	var tooLarge []string
	err := c.WalkDir(ctx, "/deep", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			require.ErrorIs(t, err, ErrListingTooLarge)
			tooLarge = append(tooLarge, p)
			return fs.SkipDir
		}
		return nil
	})
	require.NoError(t, err)
	// Each level holds 16 names of 4 KiB, charged over 5 KiB each with their
	// rounding and fileInfo: about 84 KiB a level, so the thirteenth listing passes
	// 1 MiB and is refused; its siblings are still walked.
	opened, refused := walkRefusal(limit, "/deep", "d", page)
	require.Equal(t, []string{refused}, tooLarge)
	require.Equal(t, opened, srv.Requests(testserver.TypeOpendir))
	require.Equal(t, "/deep"+strings.Repeat("/d", 12), refused)
	t.Logf("live heap growth, peak of samples: %d KiB", heap.peak>>10)
	require.Less(t, heap.peak, int64(3*limit))
}

// TestGlobBoundsItsMatches: "*/*" over a server's directories matches every entry of
// every one of them, and the result is held whole; past the memory limit the Glob
// fails with ErrListingTooLarge rather than growing (a million directories of a
// million entries each would be 10^12 names). The limit is set here to exactly what
// the Glob holds at its peak, so that a byte less fails it.
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
	ctx := testCtx(t)
	glob := func(limit int64, pattern string) ([]string, *budget, error) {
		g := &globber{c: c, b: &budget{limit: limit}}
		m, err := g.glob(ctx, pattern, 0)
		return m, g.b, err
	}
	got, b, err := glob(math.MaxInt64, "/g/*/f*")
	require.NoError(t, err)
	require.Len(t, got, 4000)
	require.Equal(t, "/g/d/f0000999", got[3999])
	var matches int64
	for _, m := range got {
		matches += pathCost(m)
	}
	require.Equal(t, matches, b.held.Load(), "what is held at the end is the matches, each charged its path")
	var dirs int64
	for _, d := range []string{"/g/a", "/g/b", "/g/c", "/g/d"} {
		dirs += pathCost(d)
	}
	peak := b.peak.Load()
	require.Greater(t, peak, matches+dirs, "the directories the pattern passes through count too, and the page being matched")

	got, _, err = glob(peak, "/g/*/f*")
	require.NoError(t, err)
	require.Len(t, got, 4000, "exactly the peak is accepted")
	_, _, err = glob(peak-1, "/g/*/f*")
	require.ErrorIs(t, err, ErrListingTooLarge)

	got, err = c.Glob(ctx, "/g/*/f*")
	require.NoError(t, err)
	require.Len(t, got, 4000)
	requireWorks(t, c) // a listing does not wait for its CLOSE; this round trip does
	require.Zero(t, srv.OpenHandles())
}

// TestRemoveAllKeepsNoExtendedPairs: a deep tree whose every directory lists an
// entry with 2,000 empty extended pairs (64 KiB held each, 16 KiB on the wire).
// WalkDir keeps them, since fn can see them (Info().Sys()), and stops at the memory
// limit; RemoveAll, whose fn sees no attributes, drops them as each page arrives,
// holds a few hundred bytes a level, and goes down to MaxWalkDepth.
func TestRemoveAllKeepsNoExtendedPairs(t *testing.T) {
	page := []testserver.ListEntry{{Name: "d", Mode: 0o040755}, {Name: "a", Mode: 0o100644, Extended: make([]testserver.ExtendedPair, 2000)}}
	list := func(n int) []testserver.ListEntry {
		if n > 0 {
			return nil
		}
		return page
	}
	const limit = 4 << 20
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: func(p string) testserver.Lister {
			if strings.HasPrefix(p, "/x") {
				return list
			}
			return nil
		},
		Corrupt: lstatDirs("/x"),
	}, WithMemoryLimit(limit))
	ctx := testCtx(t)
	require.NoError(t, c.Mkdir(ctx, "/x", 0o755))

	var sys *FileAttrs
	err := c.WalkDir(ctx, "/x", func(p string, d fs.DirEntry, err error) error {
		if err == nil && p == "/x/a" {
			info, _ := d.Info()
			sys = info.Sys().(*FileAttrs)
		}
		return err
	})
	require.ErrorIs(t, err, ErrListingTooLarge)
	require.Len(t, sys.Extended, 2000, "WalkDir's fn sees the extended pairs")
	opened, _ := walkRefusal(limit, "/x", "d", page)
	require.Equal(t, opened, srv.Requests(testserver.TypeOpendir))
	require.Less(t, opened, 100)

	srv.ResetStats()
	err = c.RemoveAll(ctx, "/x")
	require.ErrorIs(t, err, ErrWalkTooDeep)
	require.Equal(t, MaxWalkDepth, srv.Requests(testserver.TypeOpendir))
}
