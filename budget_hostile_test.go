package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// What a call allocates against a hostile server, per call that holds what a server
// lists. The server runs in a child process (this test binary re-executed, serving
// the testserver over its stdin and stdout), so the heap measured here is the
// client's alone: in-process, the server's own allocations (it encodes the hostile
// listings over and over) would count too and hide what the client does.
//
// Each call must fail with ErrListingTooLarge, having allocated (runtime.MemStats
// TotalAlloc, which counts every allocation, garbage included, so it bounds the peak
// from above) at most hostileFactor times the memory limit, plus hostileSlack for
// the pages not yet charged when the limit is passed.

// hostileServerEnv names the scenario the child process serves.
const hostileServerEnv = "SLUICE_TEST_HOSTILE_SERVER"

// testMemoryLimit is the memory limit of the heap tests' clients, def unless
// SLUICE_TEST_MEMORY_LIMIT_MIB sets another, to measure the default (64) by hand.
func testMemoryLimit(def int64) int64 {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_TEST_MEMORY_LIMIT_MIB")); err == nil && n > 0 {
		return int64(n) << 20
	}
	return def
}

var hostileLimit = testMemoryLimit(8 << 20)

const (
	hostileFactor = 2
	// hostileSlack is what is not yet charged when the limit is passed: the page
	// being decoded (at most pageInflation times the reply cap) and the replies in
	// flight.
	hostileSlack = pageInflation*defaultMaxReply + readAhead*defaultMaxReply
)

// TestHostileServerProcess is the child process's server; it does nothing in a
// normal run.
func TestHostileServerProcess(t *testing.T) {
	scenario := os.Getenv(hostileServerEnv)
	if scenario == "" {
		t.Skip("the hostile server of the heap tests; it runs only as their child process")
	}
	var srv *testserver.Server
	opts := hostileOptions(scenario)
	corrupt := opts.Corrupt
	opts.Corrupt = func(req testserver.Request, reply []byte) [][]byte {
		if req.Type == testserver.TypeStat && (req.Path == openHandlesPath || req.Path == removesPath) {
			n := srv.OpenHandles()
			if req.Path == removesPath {
				n = srv.Requests(testserver.TypeRemove)
			}
			a := sshfx.AppendAttrs(nil, &sshfx.Attrs{Flags: sshfx.AttrSize | sshfx.AttrPermissions, Size: uint64(n), Permissions: 0o100644})
			return [][]byte{replyPacket(sshfx.TypeAttrs, req.ID, a)}
		}
		if corrupt == nil {
			return nil
		}
		return corrupt(req, reply)
	}
	srv = testserver.New(opts)
	for _, d := range []string{"/h", "/t", "/s", "/g", "/big", "/rm"} {
		if err := srv.Mkdir(d, 0o755); err != nil {
			panic(err)
		}
	}
	r, w := srv.Conn()
	go func() {
		io.Copy(w, os.Stdin)
		w.Close()
	}()
	io.Copy(os.Stdout, r)
	os.Exit(0)
}

// openHandlesPath is a name whose STAT the child answers with the number of handles
// its server holds open, as the size: requests are served in order, so every CLOSE
// sent before it has been carried out.
const openHandlesPath = "/.open-handles"

// removesPath is a name whose STAT the child answers with the number of REMOVEs its
// server was sent, as the size.
const removesPath = "/.removes"

// requireChildHandlesClosed checks that the child's server holds no handle open.
func requireChildHandlesClosed(t *testing.T, c *Client) {
	t.Helper()
	fi, err := c.Stat(testCtx(t), openHandlesPath)
	require.NoError(t, err)
	require.Zero(t, fi.Size(), "handles left open")
}

// Page kinds a hostile listing is made of, each about a whole reply (256 KiB). Every
// page of a kind is the same: the client does not mind names listed twice.
var hostilePages = map[string]func() []testserver.ListEntry{
	// emptyext: one entry with 32,000 empty extended pairs: 8 bytes each on the wire,
	// 32 in memory (issue 19, item 1).
	"emptyext": func() []testserver.ListEntry {
		return []testserver.ListEntry{{Name: "e", Mode: 0o100644, Extended: make([]testserver.ExtendedPair, 32_000)}}
	},
	// names: four names of 60 KB.
	"names": func() []testserver.ListEntry {
		out := make([]testserver.ListEntry, 4)
		for i := range out {
			out[i] = testserver.ListEntry{Name: fmt.Sprintf("n%d%s", i, strings.Repeat("x", 60_000)), Mode: 0o100644}
		}
		return out
	},
	// many: 9,000 entries with two-byte names, the most entries a reply can carry
	// with these attributes.
	"many": func() []testserver.ListEntry {
		out := make([]testserver.ListEntry, 9_000)
		for i := range out {
			out[i] = testserver.ListEntry{Name: string(rune('a'+i%26)) + string(rune('a'+i/26%26)), Mode: 0o100644}
		}
		return out
	},
}

// hostileOptions is the server of a scenario, named "kind": the pages every listing
// is made of (see hostilePages). Under /h a directory lists such pages without end.
// Under /t every directory, at any depth, lists the subdirectory "d" and one page,
// then ends: a deep tree of large directories. Under /s every directory lists "d"
// and pages without end. /g lists 16 subdirectories whose names are 200 KB, each
// of which lists 128 entries (issue 19, item 3). STAT and LSTAT under all of them
// answer a directory.
func hostileOptions(kind string) testserver.Options {
	if kind == "honest" {
		return testserver.Options{Listing: honestListing}
	}
	page := hostilePages[kind]()
	pages := func(int) []testserver.ListEntry { return page }
	dirPage := append([]testserver.ListEntry{{Name: "d", Mode: 0o040755}}, page...)
	withDir := func(int) []testserver.ListEntry { return dirPage }
	var gDirs [16][]testserver.ListEntry
	for i := range gDirs {
		gDirs[i] = []testserver.ListEntry{{Name: fmt.Sprintf("%02d%s", i, strings.Repeat("g", 200_000)), Mode: 0o040755}}
	}
	gFiles := make([]testserver.ListEntry, 128)
	for i := range gFiles {
		gFiles[i] = testserver.ListEntry{Name: fmt.Sprintf("m%03d", i), Mode: 0o100644}
	}
	return testserver.Options{
		Listing: func(p string) testserver.Lister {
			p = path.Clean("/" + p)
			switch {
			case p == "/h" || strings.HasPrefix(p, "/h/"):
				return pages
			case p == "/t" || strings.HasPrefix(p, "/t/"):
				return func(page int) []testserver.ListEntry {
					if page > 0 {
						return nil
					}
					return withDir(page)
				}
			case p == "/s" || strings.HasPrefix(p, "/s/"):
				return func(page int) []testserver.ListEntry {
					if page > 0 {
						return pages(page)
					}
					return withDir(page)
				}
			case p == "/g":
				return func(page int) []testserver.ListEntry {
					if page >= len(gDirs) {
						return nil
					}
					return gDirs[page]
				}
			case strings.HasPrefix(p, "/g/"):
				return func(page int) []testserver.ListEntry {
					if page > 0 {
						return nil
					}
					return gFiles
				}
			}
			return nil
		},
		Corrupt: func(req testserver.Request, _ []byte) [][]byte {
			if req.Type != testserver.TypeStat && req.Type != testserver.TypeLstat {
				return nil
			}
			switch top, _, _ := strings.Cut(path.Clean("/" + req.Path)[1:], "/"); top {
			case "h", "t", "s", "g":
			default:
				return nil
			}
			a := sshfx.AppendAttrs(nil, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: 0o40755})
			return [][]byte{replyPacket(sshfx.TypeAttrs, req.ID, a)}
		},
	}
}

// newHostileClient starts the child process serving scenario kind and returns a
// Client on it with the memory limit limit.
// With peak set, the heap in use is sampled as each reply arrives.
func newHostileClient(t *testing.T, kind string, limit int64, peak *heapPeak) *Client {
	t.Helper()
	tsNoLeaks(t)
	childIn, toChild, err := os.Pipe()
	require.NoError(t, err)
	fromChild, childOut, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileServerProcess$")
	cmd.Env = append(os.Environ(), hostileServerEnv+"="+kind)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = childIn, childOut, os.Stderr
	err = cmd.Start()
	childIn.Close()
	childOut.Close()
	if err != nil {
		toChild.Close()
		fromChild.Close()
		t.Fatalf("starting the hostile server: %v", err)
	}
	var r io.Reader = fromChild
	if peak != nil {
		r = heapSampling{r: fromChild, h: peak}
	}
	c, err := NewClientPipe(testCtx(t), r, toChild, WithMemoryLimit(limit))
	if err != nil {
		toChild.Close()
		fromChild.Close()
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("NewClientPipe: %v", err)
	}
	t.Cleanup(func() {
		c.Close() // closes toChild: the child's server sees the end and exits
		require.NoError(t, cmd.Wait())
		fromChild.Close()
	})
	return c
}

// allocatedBy runs call and returns the bytes it allocated.
func allocatedBy(call func() error) (int64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	err := call()
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc - before), err
}

// failOnError is a walk's fn that ends the walk at the first error.
func failOnError(_ string, _ fs.DirEntry, err error) error { return err }

// hostileCalls are the calls that hold what a server lists, each against the part
// of the hostile tree that makes it hold the most.
var hostileCalls = []struct {
	name string
	call func(ctx context.Context, c *Client) error
}{
	{"ReadDir", func(ctx context.Context, c *Client) error {
		_, err := c.ReadDir(ctx, "/h")
		return err
	}},
	{"Dir.ReadDir(0)", func(ctx context.Context, c *Client) error {
		d, err := c.OpenDir(ctx, "/h")
		if err != nil {
			return err
		}
		defer d.Close()
		_, err = d.ReadDirContext(ctx, 0)
		return err
	}},
	{"FS ReadDir", func(_ context.Context, c *Client) error {
		_, err := fs.ReadDir(c.FS(), "h")
		return err
	}},
	{"FS ReadDirFile.ReadDir(-1)", func(_ context.Context, c *Client) error {
		f, err := c.FS().Open("h")
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.(fs.ReadDirFile).ReadDir(-1)
		return err
	}},
	{"WalkDir", func(ctx context.Context, c *Client) error { return c.WalkDir(ctx, "/t", failOnError) }},
	{"WalkDir, a page at a time", func(ctx context.Context, c *Client) error { return c.WalkDir(ctx, "/s", failOnError) }},
	{"Walk", func(ctx context.Context, c *Client) error {
		return c.Walk(ctx, "/t", func(_ string, _ fs.FileInfo, err error) error { return err })
	}},
	{"RemoveAll", func(ctx context.Context, c *Client) error { return c.RemoveAll(ctx, "/t") }},
	{"RemoveAll, a page at a time", func(ctx context.Context, c *Client) error { return c.RemoveAll(ctx, "/s") }},
	{"Glob", func(ctx context.Context, c *Client) error {
		_, err := c.Glob(ctx, "/g/*/*")
		return err
	}},
	{"FS Glob", func(_ context.Context, c *Client) error {
		_, err := fs.Glob(c.FS(), "g/*/*")
		return err
	}},
}

// TestHostileListingsHeap: every call that holds what a server lists, against
// listings made to cost the most memory for their size on the wire (issue 19, items
// 1 and 3), fails with ErrListingTooLarge within a small multiple of its limit. The
// heap in use, sampled as each reply arrives (garbage not yet collected included),
// is logged beside what the call allocated.
//
// RemoveAll keeps no extended pairs, so the empty pairs cost it nothing held: it is
// not run against them here (TestRemoveAllKeepsNoExtendedPairs is).
func TestHostileListingsHeap(t *testing.T) {
	for _, kind := range []string{"emptyext", "names", "many"} {
		t.Run(kind, func(t *testing.T) {
			var peak heapPeak
			c := newHostileClient(t, kind, hostileLimit, &peak)
			for _, hc := range hostileCalls {
				if (strings.Contains(hc.name, "Glob") && kind != "emptyext") || (strings.HasPrefix(hc.name, "RemoveAll") && kind == "emptyext") {
					continue // Glob's tree is the same for every kind
				}
				ctx := testCtx(t)
				peak.reset()
				allocated, err := allocatedBy(func() error { return hc.call(ctx, c) })
				t.Logf("%s: allocated %.1f MiB, heap grew by %.1f MiB at most, for a limit of %d MiB (%.2f, %.2f times)",
					hc.name, float64(allocated)/(1<<20), float64(peak.growth())/(1<<20), hostileLimit>>20,
					float64(allocated)/float64(hostileLimit), float64(peak.growth())/float64(hostileLimit))
				require.ErrorIs(t, err, ErrListingTooLarge, hc.name)
				require.ErrorContains(t, err, "WithMemoryLimit", "%s: the error names the option that raises the limit", hc.name)
				require.LessOrEqual(t, allocated, hostileFactor*hostileLimit+hostileSlack, hc.name)
				requireWorks(t, c)
				requireChildHandlesClosed(t, c)
			}
		})
	}
}

// heapPeak samples the heap in use as each reply's header is read (see heapSampling,
// the Client's reader).
type heapPeak struct {
	base, peak atomic.Int64
}

// reset takes the heap in use, after a collection, as the base of the next growth.
func (h *heapPeak) reset() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.base.Store(int64(ms.HeapAlloc))
	h.peak.Store(int64(ms.HeapAlloc))
}

// growth is the most the heap grew since reset, at the samples.
func (h *heapPeak) growth() int64 { return h.peak.Load() - h.base.Load() }

type heapSampling struct {
	r io.Reader
	h *heapPeak
}

// Read samples when the reader asks for a reply's header (its length, type and id).
func (s heapSampling) Read(p []byte) (int, error) {
	if len(p) == 9 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		for cur := s.h.peak.Load(); int64(ms.HeapAlloc) > cur && !s.h.peak.CompareAndSwap(cur, int64(ms.HeapAlloc)); cur = s.h.peak.Load() {
		}
	}
	return s.r.Read(p)
}

// TestHostileWholeListingSaysWhatListsIt: a whole listing refused for its size says
// which option raises the limit and what lists the directory anyway.
func TestHostileWholeListingSaysWhatListsIt(t *testing.T) {
	c := newHostileClient(t, "emptyext", minMemoryLimit, nil)
	_, err := c.ReadDir(testCtx(t), "/h")
	require.ErrorIs(t, err, ErrListingTooLarge)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/h", pe.Path)
	for _, s := range []string{"WithMemoryLimit", "DirEntries", "Dir.ReadDir(n > 0)"} {
		require.ErrorContains(t, err, s)
	}
	require.False(t, errors.Is(err, fs.ErrNotExist))
}
