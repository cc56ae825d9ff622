package sftp

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The memory account's formulas against the heap they stand for. Each case builds
// entries as a whole listing does (NAME replies decoded by decodeName, turned into
// kept entries by keptEntries, the pages joined by joinPages, with the pages and the
// joined listing alive together, as at the end of readAll) and compares the live heap
// they take with what pageCost charges for them. A formula that undercounts by more
// than 1% fails.

// listedName is one entry to encode in a NAME reply.
type listedName struct {
	name  string
	attrs sshfx.Attrs
}

// maxNameBody is the longest NAME body a channel accepts by default: the reply cap
// less the type and the id.
const maxNameBody = defaultMaxReply - 5

// nameBodies encodes entries into NAME bodies of at most perPage entries and
// maxNameBody bytes each.
func nameBodies(entries []listedName, perPage int) [][]byte {
	var bodies [][]byte
	var body []byte
	count := 0
	flush := func() {
		if count > 0 {
			bodies = append(bodies, sshfx.AppendUint32(body[:0:0], uint32(count)))
			bodies[len(bodies)-1] = append(bodies[len(bodies)-1], body...)
		}
		body, count = nil, 0
	}
	for _, e := range entries {
		var one []byte
		one = sshfx.AppendString(one, e.name)
		one = sshfx.AppendString(one, "-rw-r--r--    1 user     group           0 Jan  1 00:00 "+e.name)
		one = sshfx.AppendAttrs(one, &e.attrs)
		if count == perPage || 4+len(body)+len(one) > maxNameBody {
			flush()
		}
		body = append(body, one...)
		count++
	}
	flush()
	return bodies
}

// liveHeapOf returns how much the live heap grew while build ran, counting only what
// is still reachable after a collection.
func liveHeapOf(build func()) int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := int64(ms.HeapAlloc)
	build()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc) - before
}

// listingHeap decodes bodies as a whole listing does and returns the live heap the
// listing takes at its end and what the account charged for it.
func listingHeap(t *testing.T, bodies [][]byte) (live, charged int64, n int) {
	t.Helper()
	var pages [][]fs.DirEntry
	var all []fs.DirEntry
	live = liveHeapOf(func() {
		for _, b := range bodies {
			names, err := decodeName("READDIR", &response{typ: sshfx.TypeName, body: b})
			if err != nil {
				panic(err)
			}
			kept, err := keptEntries(names)
			if err != nil {
				panic(err)
			}
			pages = append(pages, kept)
		}
		all = joinPages(pages)
	})
	for _, p := range pages {
		charged += pageCost(p)
	}
	n = len(all)
	runtime.KeepAlive(pages)
	runtime.KeepAlive(all)
	runtime.KeepAlive(bodies) // the input stays, so its bytes are not counted freed
	return live, charged, n
}

func attrsWith(ext ...sshfx.ExtendedAttr) sshfx.Attrs {
	a := sshfx.Attrs{Flags: sshfx.AttrSize | sshfx.AttrUIDGID | sshfx.AttrPermissions | sshfx.AttrACModTime,
		Size: 1234, UID: 1000, GID: 1000, Permissions: 0o100644, ATime: 1, MTime: 2}
	if ext != nil {
		a.Flags |= sshfx.AttrExtended
		a.Extended = ext
	}
	return a
}

func TestMemoryAccountFormulas(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	many := func(n int, name func(i int) string, attrs func(i int) sshfx.Attrs) []listedName {
		out := make([]listedName, n)
		for i := range out {
			out[i] = listedName{name: name(i), attrs: attrs(i)}
		}
		return out
	}
	plain := func(int) sshfx.Attrs { return attrsWith() }
	sized := func(size int) func(i int) string {
		return func(i int) string {
			s := fmt.Sprintf("%08d", i)
			return s + strings.Repeat("x", max(size-len(s), 0))
		}
	}
	cases := []struct {
		name    string
		entries []listedName
		perPage int
	}{
		{"short names, OpenSSH pages", many(20_000, sized(8), plain), 100},
		{"short names, full pages", many(20_000, sized(8), plain), 1 << 20},
		{"two-byte names", many(20_000, func(i int) string { return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) }, plain), 1 << 20},
		{"names of 1 to 300 bytes", many(10_000, func(i int) string { return sized(1 + rng.IntN(300))(i) }, plain), 100},
		{"names past a size class (17, 33, 1025, 4097 bytes)", many(2_000, func(i int) string { return sized([]int{17, 33, 1025, 4097}[i%4])(i) }, plain), 100},
		{"names just past 32 KiB", many(80, sized(32<<10+1), plain), 100},
		{"names of 200 KB", many(16, sized(200_000), plain), 100},
		{"empty extended pairs", many(100, sized(8), func(int) sshfx.Attrs {
			return attrsWith(make([]sshfx.ExtendedAttr, 2000)...)
		}), 100},
		{"one empty extended pair", many(20_000, sized(8), func(int) sshfx.Attrs {
			return attrsWith(sshfx.ExtendedAttr{})
		}), 1 << 20},
		{"extended pairs of 1 to 100 bytes", many(8_000, sized(8), func(int) sshfx.Attrs {
			return attrsWith(
				sshfx.ExtendedAttr{Type: strings.Repeat("t", 1+rng.IntN(100)), Data: strings.Repeat("d", 1+rng.IntN(100))},
				sshfx.ExtendedAttr{Type: "user.x@example.com", Data: strings.Repeat("d", 1+rng.IntN(100))})
		}), 100},
		{"one extended pair of 100 KB", many(30, sized(8), func(int) sshfx.Attrs {
			return attrsWith(sshfx.ExtendedAttr{Type: "big", Data: strings.Repeat("d", 100_000)})
		}), 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bodies := nameBodies(tc.entries, tc.perPage)
			live, charged, n := listingHeap(t, bodies)
			require.Equal(t, len(tc.entries), n)
			t.Logf("%d entries in %d pages: live heap %d, charged %d (%.3f of live), %.1f charged and %.1f live per entry",
				n, len(bodies), live, charged, float64(charged)/float64(live), float64(charged)/float64(n), float64(live)/float64(n))
			require.LessOrEqual(t, live, charged+charged/100+16<<10, "the formula undercounts the heap")
		})
	}
}

// TestMemoryAccountPathFormula: paths kept in a slice grown by appending, as Glob's
// matches are.
func TestMemoryAccountPathFormula(t *testing.T) {
	for _, size := range []int{5, 13, 40, 100, 1000, 40_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			n := min(20_000, 4<<20/size)
			src := []byte(strings.Repeat("p", size))
			var paths []string
			var charged int64
			live := liveHeapOf(func() {
				for i := range n {
					src[0] = byte('a' + i%26)
					p := string(src)
					charged += pathCost(p)
					paths = append(paths, p)
				}
			})
			runtime.KeepAlive(paths)
			t.Logf("%d paths of %d bytes: live heap %d, charged %d (%.3f of live)", n, size, live, charged, float64(charged)/float64(live))
			require.LessOrEqual(t, live, charged+charged/100+16<<10, "the formula undercounts the heap")
		})
	}
}

// TestMemoryAccountStructSizes: the constants name the sizes of the structures they
// stand for; a field added to one of them must be counted.
func TestMemoryAccountStructSizes(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(fileInfo{}), uintptr(fileInfoBytes))
	var e fs.DirEntry
	require.LessOrEqual(t, unsafe.Sizeof(e), uintptr(entrySlotBytes))
	require.LessOrEqual(t, unsafe.Sizeof(sshfx.ExtendedAttr{}), uintptr(extendedPairBytes))
	require.LessOrEqual(t, 3*unsafe.Sizeof(""), uintptr(pathSlotBytes))
	require.LessOrEqual(t, 3*unsafe.Sizeof([]fs.DirEntry{}), uintptr(pageOverhead))
	require.LessOrEqual(t, unsafe.Sizeof(nameEntry{}), uintptr(88), "decodeName's comment and pageInflation count 88 bytes")
}

// TestPageInflation: what decoding one READDIR reply and turning it into kept
// entries allocates, for the reply shapes that inflate most, stays within
// pageInflation times the reply's length: the part of a listing not yet charged.
func TestPageInflation(t *testing.T) {
	fill := func(one func(i int) listedName) []listedName {
		var out []listedName
		size := 4
		for i := 0; ; i++ {
			e := one(i)
			n := 4 + len(e.name) + 4 + len(sshfx.AppendAttrs(nil, &e.attrs)) // name, an empty longname, attributes
			if size+n > maxNameBody {
				return out
			}
			size += n
			out = append(out, e)
		}
	}
	var bare sshfx.Attrs // flags only: the fewest bytes an entry can take
	emptyPairs := bare
	emptyPairs.Flags |= sshfx.AttrExtended
	emptyPairs.Extended = make([]sshfx.ExtendedAttr, (maxNameBody-64)/8)
	shortPairs := bare
	shortPairs.Flags |= sshfx.AttrExtended
	for range (maxNameBody - 64) / 10 {
		shortPairs.Extended = append(shortPairs.Extended, sshfx.ExtendedAttr{Type: "t", Data: "d"})
	}
	cases := []struct {
		name    string
		entries []listedName
	}{
		{"one-byte names", fill(func(int) listedName { return listedName{name: "a", attrs: bare} })},
		{"two-byte names", fill(func(i int) listedName { return listedName{name: string(rune('a'+i%26)) + "b", attrs: bare} })},
		{"dots", fill(func(int) listedName { return listedName{name: ".", attrs: bare} })},
		{"empty extended pairs", []listedName{{name: "e", attrs: emptyPairs}}},
		{"one-byte extended pairs", []listedName{{name: "e", attrs: shortPairs}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			body = sshfx.AppendUint32(body, uint32(len(tc.entries)))
			for _, e := range tc.entries {
				body = sshfx.AppendString(body, e.name)
				body = sshfx.AppendString(body, "")
				body = sshfx.AppendAttrs(body, &e.attrs)
			}
			require.LessOrEqual(t, len(body), maxNameBody)
			var kept []fs.DirEntry
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			names, err := decodeName("READDIR", &response{typ: sshfx.TypeName, body: body})
			require.NoError(t, err)
			kept, err = keptEntries(names)
			runtime.ReadMemStats(&ms)
			require.NoError(t, err)
			allocated := int64(ms.TotalAlloc - before)
			runtime.KeepAlive(kept)
			t.Logf("%d entries in %d bytes: %d allocated, %.2f per byte", len(tc.entries), len(body), allocated, float64(allocated)/float64(len(body)))
			require.LessOrEqual(t, allocated, int64(pageInflation*len(body)))
		})
	}
}

// TestBudgetHold: a hold gives back exactly what it charged, and a charge past the
// limit fails with ErrListingTooLarge, naming the option that raises it.
func TestBudgetHold(t *testing.T) {
	b := &budget{limit: 100}
	h1, h2 := b.newHold(), b.newHold()
	require.NoError(t, h1.add(60))
	require.NoError(t, h2.add(40))
	err := h2.add(1)
	require.ErrorIs(t, err, ErrListingTooLarge)
	require.ErrorContains(t, err, "WithMemoryLimit")
	require.Equal(t, int64(101), b.peak.Load())
	h2.drop()
	require.Equal(t, int64(60), b.held.Load())
	require.Equal(t, int64(40), b.free())
	h1.sub(10)
	h1.drop()
	require.Zero(t, b.held.Load())

	_, err = newClient([]Option{WithMemoryLimit(minMemoryLimit - 1)})
	require.ErrorContains(t, err, "WithMemoryLimit")
	c, err := newClient([]Option{WithMemoryLimit(minMemoryLimit)})
	require.NoError(t, err)
	require.Equal(t, int64(minMemoryLimit), c.newBudget().limit)
	c, err = newClient(nil)
	require.NoError(t, err)
	require.Equal(t, int64(defaultMemoryLimit), c.newBudget().limit)
}

// TestKeptEntriesKeepNothingForDots: a page of dots and one name keeps an array of
// one, not of the page's length.
func TestKeptEntriesKeepNothingForDots(t *testing.T) {
	page := make([]nameEntry, 1000)
	for i := range page {
		page[i].name = "."
	}
	page[500].name = "x"
	kept, err := keptEntries(page)
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.Equal(t, 1, cap(kept))
	_ = slices.Clip(kept)
}
