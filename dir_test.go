package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// synthetic serves the directory at (absolute) from pages, and the file system
// elsewhere. The testserver's start directory is "/".
func synthetic(at string, pages testserver.Lister) func(string) testserver.Lister {
	return func(p string) testserver.Lister {
		if path.Clean("/"+p) == at {
			return pages
		}
		return nil
	}
}

// numbered serves total regular files named f0000000, f0000001, ... in pages of per.
func numbered(total, per int) testserver.Lister {
	return func(page int) []testserver.ListEntry {
		first := page * per
		if first >= total {
			return nil
		}
		out := make([]testserver.ListEntry, 0, per)
		for i := first; i < min(first+per, total); i++ {
			out = append(out, testserver.ListEntry{Name: numberedName(i), Mode: 0o100644, Size: uint64(i)})
		}
		return out
	}
}

// numberedName is "f" and i in seven digits, without fmt's cost: the huge listing
// makes a million of them on each side.
func numberedName(i int) string {
	var b [8]byte
	b[0] = 'f'
	for k := 7; k >= 1; k-- {
		b[k] = byte('0' + i%10)
		i /= 10
	}
	return string(b[:])
}

// endless serves pages of per regular files and never ends the listing.
func endless(per int) testserver.Lister { return numbered(math.MaxInt32, per) }

func TestDirStreamsMillionEntriesInBoundedHeap(t *testing.T) {
	const total = 1_000_000
	c, _ := newTestServerClient(t, testserver.Options{Listing: synthetic("/huge", numbered(total, 2000))})
	ctx := testCtx(t) // a million entries under -race on a busy machine: the long bound

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	n := 0
	for de, err := range c.DirEntries(ctx, "/huge") {
		require.NoError(t, err)
		if de.Name() != numberedName(n) {
			require.Equal(t, numberedName(n), de.Name())
		}
		n++
		if n%50_000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	require.Equal(t, total, n)
	growth := int64(peak) - int64(base)
	t.Logf("heap: base %d MiB, peak %d MiB over %d entries", base>>20, peak>>20, n)
	require.Less(t, growth, int64(64<<20), "the streaming listing held more than 64 MiB of heap")
}

func TestDirReadDirNOverPages(t *testing.T) {
	c, _ := newTestServerClient(t, testserver.Options{Listing: synthetic("/d", numbered(2500, 1000))})
	ctx := testCtx(t)
	d, err := c.OpenDir(ctx, "/d")
	require.NoError(t, err)
	var names []string
	for {
		page, err := d.ReadDirContext(ctx, 700)
		if err == io.EOF {
			require.Empty(t, page)
			break
		}
		require.NoError(t, err)
		require.NotEmpty(t, page)
		require.LessOrEqual(t, len(page), 700)
		for _, e := range page {
			names = append(names, e.Name())
		}
	}
	require.Len(t, names, 2500)
	require.True(t, slices.IsSorted(names))
	_, err = d.ReadDir(1)
	require.Equal(t, io.EOF, err, "io.EOF stays bare")
	require.NoError(t, d.Close())
	_, err = d.ReadDir(1)
	require.ErrorIs(t, err, fs.ErrClosed)
	require.ErrorIs(t, d.Close(), fs.ErrClosed)
}

func TestReadDirRefusesEndlessListing(t *testing.T) {
	w := newCloseWatch()
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: synthetic("/loop", endless(1000)),
		Stall:   func(r testserver.Request) bool { w.observe(r); return false },
	})
	ctx := testCtx(t)
	_, err := c.ReadDir(ctx, "/loop")
	require.ErrorIs(t, err, ErrListingTooLarge)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/loop", pe.Path)
	requireWorks(t, c)

	// The streaming reader goes on as long as it is read, one page at a time, and stops
	// between pages when ctx ends.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	var last error
	for _, err := range c.DirEntries(cctx, "/loop") {
		if err != nil {
			last = err
			break
		}
		if n++; n == 5000 {
			cancel()
		}
	}
	require.ErrorIs(t, last, context.Canceled)
	require.Less(t, n, 5000+1000, "the reader fetched pages after ctx ended")
	requireWorks(t, c)
	w.waitHandles(t, srv) // every directory handle is closed
}

func TestReadDirRefusesEmptyPagesForever(t *testing.T) {
	empty := func(int) []testserver.ListEntry { return []testserver.ListEntry{} }
	c, _ := newTestServerClient(t, testserver.Options{Listing: synthetic("/empty", empty)})
	ctx := testCtx(t)
	_, err := c.ReadDir(ctx, "/empty")
	require.ErrorContains(t, err, "without an entry")
	for _, err := range c.DirEntries(ctx, "/empty") {
		require.ErrorContains(t, err, "without an entry")
	}
	requireWorks(t, c)
}

// hostileNames are entry names no real directory can hold, each served after a
// plain name.
var hostileNames = map[string]string{
	"slash":      "a/b",
	"escape":     "../../outside",
	"absolute":   "/etc/passwd",
	"empty":      "",
	"nul":        "x\x00y",
	"dot-slash":  "./a",
	"trailing/":  "a/",
	"dotdot-sub": "a/../../b",
}

func hostileLister(name string) testserver.Lister {
	return func(page int) []testserver.ListEntry {
		if page > 0 {
			return nil
		}
		return []testserver.ListEntry{
			{Name: ".", Mode: 0o040755}, {Name: "..", Mode: 0o040755},
			{Name: "ok.txt", Mode: 0o100644},
			{Name: name, Mode: 0o100644, Size: 3},
		}
	}
}

func TestListingsRefuseInvalidEntryNames(t *testing.T) {
	for label, name := range hostileNames {
		t.Run(label, func(t *testing.T) {
			w := newCloseWatch()
			c, srv := newTestServerClient(t, testserver.Options{
				Listing: synthetic("/evil", hostileLister(name)),
				Stall:   func(r testserver.Request) bool { w.observe(r); return false },
			})
			ctx := testCtx(t)
			require.NoError(t, c.Mkdir(ctx, "/evil", 0o755)) // so Stat and Lstat see a directory

			_, err := c.ReadDir(ctx, "/evil")
			require.ErrorIs(t, err, ErrInvalidEntryName, "ReadDir")

			var got []string
			var streamErr error
			for de, err := range c.DirEntries(ctx, "/evil") {
				if err != nil {
					streamErr = err
					break
				}
				got = append(got, de.Name())
			}
			require.ErrorIs(t, streamErr, ErrInvalidEntryName, "DirEntries")
			require.Equal(t, []string{"ok.txt"}, got, "the entries before the bad one, then the error")

			d, err := c.OpenDir(ctx, "/evil")
			require.NoError(t, err)
			_, err = d.ReadDir(-1)
			require.ErrorIs(t, err, ErrInvalidEntryName, "Dir.ReadDir(-1)")
			_, err = d.ReadDir(10)
			require.ErrorIs(t, err, ErrInvalidEntryName, "the failure is sticky")
			require.NoError(t, d.Close())

			for _, fsys := range []fs.FS{c.FS(), c.DirFS("/")} {
				_, err = fs.ReadDir(fsys, "evil")
				require.ErrorIs(t, err, ErrInvalidEntryName, "fs.ReadDir")
				err = fs.WalkDir(fsys, ".", func(string, fs.DirEntry, error) error { return nil })
				require.NoError(t, err, "fs.WalkDir passes the error to fn, which ignores it")
				var walkErr error
				fs.WalkDir(fsys, "evil", func(_ string, _ fs.DirEntry, err error) error {
					if err != nil {
						walkErr = err
					}
					return err
				})
				require.ErrorIs(t, walkErr, ErrInvalidEntryName, "fs.WalkDir")
				f, err := fsys.Open("evil")
				require.NoError(t, err)
				_, err = f.(fs.ReadDirFile).ReadDir(-1)
				require.ErrorIs(t, err, ErrInvalidEntryName, "fs.ReadDirFile")
				require.NoError(t, f.Close())
			}

			var walkErr error
			err = c.WalkDir(ctx, "/evil", func(p string, d fs.DirEntry, err error) error {
				require.NotContains(t, p, name[min(len(name), 1):]+"x", "no path built from the bad name")
				if err != nil {
					walkErr = err
				}
				return err
			})
			require.ErrorIs(t, err, ErrInvalidEntryName, "Client.WalkDir")
			require.ErrorIs(t, walkErr, ErrInvalidEntryName)

			_, err = c.Glob(ctx, "/evil/*")
			require.ErrorIs(t, err, ErrInvalidEntryName, "Glob")

			// os.CopyFS of the view writes nothing outside its destination.
			outer := t.TempDir()
			dst := filepath.Join(outer, "dst")
			sub, err := fs.Sub(c.FS(), "evil")
			require.NoError(t, err)
			err = os.CopyFS(dst, sub)
			require.ErrorIs(t, err, ErrInvalidEntryName, "os.CopyFS")
			filepath.WalkDir(outer, func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				rel, _ := filepath.Rel(outer, p)
				require.Contains(t, []string{".", "dst"}, rel, "os.CopyFS made %s", p)
				return nil
			})

			requireWorks(t, c)
			w.waitHandles(t, srv) // every directory handle is closed
		})
	}
}

func TestDirCloseEndsARead(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: synthetic("/d", numbered(10, 10)),
		Stall:   stallFirst(ofType(testserver.TypeReaddir)),
	})
	ctx := testCtx(t)
	d, err := c.OpenDir(ctx, "/d")
	require.NoError(t, err)
	res := tsGo(func() error { _, err := d.ReadDir(1); return err })
	tsWaitStalled(t, srv, 1)
	require.NoError(t, d.Close())
	err = tsRecv(t, res, "ReadDir after Close")
	require.ErrorIs(t, err, fs.ErrClosed)
	requireWorks(t, c)
}

func TestReadDirCtxBoundsAStalledPage(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: synthetic("/d", numbered(10, 10)),
		Stall:   stallFirst(ofType(testserver.TypeReaddir)),
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { _, err := c.ReadDir(ctx, "/d"); return err })
	tsWaitStalled(t, srv, 1)
	cancel()
	err := tsRecv(t, res, "ReadDir after cancel")
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	requireWorks(t, c)
}

// Against OpenSSH's sftp-server, which sends at most 100 names per READDIR: Dir.ReadDir(n)
// and DirEntries list every entry once, across pages, and close their handles.
func TestDirStreamsOnSFTPServer(t *testing.T) {
	dir := t.TempDir()
	want := make([]string, 0, 1234)
	for i := range 1234 {
		name := fmt.Sprintf("e%04d", i)
		want = append(want, name)
		writeLocal(t, filepath.Join(dir, name), nil, 0o644)
	}
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	d, err := c.OpenDir(ctx, ".")
	require.NoError(t, err)
	var got []string
	for {
		page, err := d.ReadDirContext(ctx, 77)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 77)
		for _, e := range page {
			got = append(got, e.Name())
			require.True(t, e.Type().IsRegular())
		}
	}
	require.NoError(t, d.Close())
	require.ElementsMatch(t, want, got)

	got = got[:0]
	for de, err := range c.DirEntries(ctx, ".") {
		require.NoError(t, err)
		got = append(got, de.Name())
		if len(got) == 500 {
			break // an early break closes the handle too
		}
	}
	require.Len(t, got, 500)
	all, err := c.ReadDir(ctx, ".")
	require.NoError(t, err)
	require.Len(t, all, 1234)
	require.Equal(t, "e0000", all[0].Name(), "ReadDir sorts")
	requireNoOpenHandles(t, c)

	_, err = c.OpenDir(ctx, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	for _, err := range c.DirEntries(ctx, "missing") {
		require.ErrorIs(t, err, fs.ErrNotExist)
	}
}

// A panic in the body of a range over DirEntries unwinds through the iterator, which
// must still close the directory handle (it was only closed on the normal paths).
func TestDirEntriesClosesOnPanic(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Listing: synthetic("/d", numbered(10, 5))})
	ctx := testCtx(t)
	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		for range c.DirEntries(ctx, "/d") {
			panic("boom")
		}
	}()
	require.Zero(t, srv.OpenHandles(), "the directory handle is closed")
	requireWorks(t, c)
}

// TestReadDirPagesBehindAnEOF: a server that carries out a handle's READDIRs out of
// order answers the first of a batch with EOF and a later one with a page. The page
// is kept, and the listing goes on; the replies behind it are decoded one page at a
// time, each charged before the next (see drainAfterEOF).
func TestReadDirPagesBehindAnEOF(t *testing.T) {
	pages := [][]testserver.ListEntry{{}, {{Name: "b", Mode: 0o100644}}, {{Name: "a", Mode: 0o100644}, {Name: "c", Mode: 0o100644}}}
	readdirs := 0
	c, _ := newTestServerClient(t, testserver.Options{
		Listing: synthetic("/r", func(page int) []testserver.ListEntry {
			if page < len(pages) {
				return pages[page]
			}
			return nil
		}),
		// The first READDIR's reply (an empty page) becomes an EOF, as if the server
		// had read the directory for the second one first.
		Corrupt: func(req testserver.Request, _ []byte) [][]byte {
			if req.Type != testserver.TypeReaddir {
				return nil
			}
			if readdirs++; readdirs == 1 {
				return [][]byte{statusReply(req.ID, sshfx.StatusEOF, "")}
			}
			return nil
		},
	})
	entries, err := c.ReadDir(testCtx(t), "/r")
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"a", "b", "c"}, names)
}
