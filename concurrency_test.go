package sftp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Replies out of order, requests in flight, and many goroutines on one Client.

// readSmall reads f to the end through a bufio.Reader in small pieces, so File.Read
// (and its read-ahead) does the work: bufio's WriteTo would hand over to File.WriteTo.
func readSmall(f *File) ([]byte, error) {
	br := bufio.NewReaderSize(f, 32<<10)
	var out bytes.Buffer
	p := make([]byte, 4096)
	for {
		n, err := br.Read(p)
		out.Write(p[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

// TestReorderedReplies: a server that answers in shuffled order. Transfers must still
// deliver and store the exact bytes, and directory listings must be whole.
func TestReorderedReplies(t *testing.T) {
	const size = 5<<20 + 4321
	for _, reorder := range []int{8, 64} {
		t.Run(fmt.Sprintf("Reorder %d", reorder), func(t *testing.T) {
			c, srv := newTestServerClient(t, testserver.Options{Reorder: reorder})
			data := randBytes(size, 21)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			ctx := testCtx(t)

			f, err := c.Open(ctx, "/f")
			require.NoError(t, err)
			var buf bytes.Buffer
			_, err = tsRecv(t, tsGo(func() tsResult { n, err := f.WriteTo(&buf); return tsResult{n, err} }), "WriteTo").get()
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, buf.Bytes()), "WriteTo bytes differ")

			p := make([]byte, size)
			n, err := f.ReadAt(p, 0)
			require.NoError(t, err)
			require.Equal(t, size, n)
			require.True(t, bytes.Equal(data, p), "ReadAt bytes differ")

			_, err = f.Seek(0, io.SeekStart)
			require.NoError(t, err)
			got, err := readSmall(f)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got), "Read bytes differ")
			require.NoError(t, f.Close())

			w, err := c.Create(ctx, "/up")
			require.NoError(t, err)
			_, err = tsRecv(t, tsGo(func() tsResult { n, err := w.ReadFrom(bytes.NewReader(data)); return tsResult{n, err} }), "ReadFrom").get()
			require.NoError(t, err)
			require.NoError(t, w.Close())
			stored, err := srv.ReadFile("/up")
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, stored), "uploaded bytes differ")

			require.NoError(t, c.WriteFile(ctx, "/up2", data, 0o644))
			stored, err = srv.ReadFile("/up2")
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, stored), "WriteFile bytes differ")

			// More names than one READDIR returns (100).
			require.NoError(t, srv.Mkdir("/dir", 0o755))
			var want []string
			for i := range 250 {
				name := fmt.Sprintf("n%03d", i)
				want = append(want, name)
				require.NoError(t, srv.WriteFile("/dir/"+name, []byte(name), 0o644))
			}
			entries, err := c.ReadDir(ctx, "/dir")
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			require.Equal(t, want, names)
			requireWorks(t, c) // ReadDir does not wait for its CLOSE; this round trip does
			require.Zero(t, srv.OpenHandles())
		})
	}
}

// pipeProbe proves pipelining without timing: armed for a phase, it withholds the
// reply to the stallAt-th request of one type and reports when the server has been
// sent the next one. The client cannot have read a reply that was never sent, so from
// then on it has two requests in flight; a client that waits for each reply never
// sends the next, and the test fails at its bounded wait instead.
type pipeProbe struct {
	typ     atomic.Uint32
	count   atomic.Int64
	stallAt int64
	next    chan struct{}
}

func newPipeProbe(stallAt int64) *pipeProbe {
	return &pipeProbe{stallAt: stallAt, next: make(chan struct{}, 1)}
}

// arm starts counting requests of type typ from zero.
func (p *pipeProbe) arm(typ uint8) {
	p.count.Store(0)
	p.typ.Store(uint32(typ))
}

// stall is the server's Stall hook.
func (p *pipeProbe) stall(r testserver.Request) bool {
	if uint32(r.Type) != p.typ.Load() {
		return false
	}
	n := p.count.Add(1)
	if n == p.stallAt+1 {
		select { // never block the server, even after a failed phase left one unread
		case p.next <- struct{}{}:
		default:
		}
	}
	return n == p.stallAt
}

// TestPipelining checks that transfers keep several requests in flight, and never more
// than their window, as the server counts them.
func TestPipelining(t *testing.T) {
	const size = 16 << 20
	for _, tc := range []struct {
		name string
		opts []Option
		max  int // the window
	}{
		{"default window", nil, defaultFlight},
		{"WithMaxInflight(8)", []Option{WithMaxInflight(8)}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The 3rd: a download's first READ goes out alone beside its FSTAT, and a
			// sequential Read's read-ahead starts at one.
			probe := newPipeProbe(3)
			c, srv := newTestServerClient(t, testserver.Options{Stall: probe.stall}, tc.opts...)
			require.Equal(t, tc.max, c.window())
			data := randBytes(size, 22)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			ctx := testCtx(t)
			f, err := c.Open(ctx, "/f")
			require.NoError(t, err)
			defer f.Close()

			inflight := func(what string, typ uint8, run func() error) {
				t.Helper()
				srv.ResetStats()
				probe.arm(typ)
				res := tsGo(run)
				tsRecv(t, probe.next, what+": a request sent while an earlier one is unanswered")
				require.Equal(t, 1, srv.ReleaseStalled())
				require.NoError(t, tsRecv(t, res, what))
				probe.arm(0)
				got := srv.MaxInflight()
				t.Logf("%s: at most %d requests in flight", what, got)
				require.Greater(t, got, 1, "%s: requests were not pipelined", what)
				require.LessOrEqual(t, got, tc.max, "%s: more in flight than the window", what)
			}

			inflight("WriteTo", testserver.TypeRead, func() error {
				var buf bytes.Buffer
				if _, err := f.WriteTo(&buf); err != nil {
					return err
				}
				if !bytes.Equal(data, buf.Bytes()) {
					return errors.New("WriteTo bytes differ")
				}
				return nil
			})
			inflight("ReadAt", testserver.TypeRead, func() error {
				p := make([]byte, size)
				if _, err := f.ReadAt(p, 0); err != nil {
					return err
				}
				if !bytes.Equal(data, p) {
					return errors.New("ReadAt bytes differ")
				}
				return nil
			})
			_, err = f.Seek(0, io.SeekStart)
			require.NoError(t, err)
			inflight("sequential Read", testserver.TypeRead, func() error {
				got, err := readSmall(f)
				if err != nil {
					return err
				}
				if !bytes.Equal(data, got) {
					return errors.New("Read bytes differ")
				}
				return nil
			})

			w, err := c.Create(ctx, "/up")
			require.NoError(t, err)
			inflight("ReadFrom", testserver.TypeWrite, func() error {
				_, err := w.ReadFrom(bytes.NewReader(data))
				return err
			})
			inflight("WriteAt", testserver.TypeWrite, func() error {
				_, err := w.WriteAt(data, 0)
				return err
			})
			require.NoError(t, w.Close())
			stored, err := srv.ReadFile("/up")
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, stored), "uploaded bytes differ")
		})
	}
}

// TestConcurrentMixedOps runs 32 goroutines on one Client, each working in its own
// directory with every kind of call, while the server shuffles its replies.
func TestConcurrentMixedOps(t *testing.T) {
	const workers = 32
	c, srv := newTestServerClient(t, testserver.Options{Reorder: 8})
	ctx := testCtx(t)

	work := func(i int) error {
		dir := fmt.Sprintf("/w%02d", i)
		// Sizes from empty to several WRITEs, different in every goroutine.
		data := randBytes(i*37_013, uint64(100+i))
		if err := c.Mkdir(ctx, dir, 0o755); err != nil {
			return err
		}
		f, err := c.Create(ctx, dir+"/a")
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fi, err := c.Stat(ctx, dir+"/a")
		if err != nil {
			return err
		}
		if fi.Size() != int64(len(data)) {
			return fmt.Errorf("%s/a: Stat says %d bytes, wrote %d", dir, fi.Size(), len(data))
		}
		f, err = c.Open(ctx, dir+"/a")
		if err != nil {
			return err
		}
		got, err := readSmall(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(data, got) {
			return fmt.Errorf("%s/a: read back different bytes", dir)
		}
		if err := c.Rename(ctx, dir+"/a", dir+"/b"); err != nil {
			return err
		}
		if err := c.WriteFile(ctx, dir+"/c", data[:len(data)/2], 0o644); err != nil {
			return err
		}
		if err := c.Mkdir(ctx, dir+"/sub", 0o755); err != nil {
			return err
		}
		entries, err := c.ReadDir(ctx, dir)
		if err != nil {
			return err
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"b", "c", "sub"}) {
			return fmt.Errorf("%s: ReadDir lists %v", dir, names)
		}
		half, err := c.ReadFile(ctx, dir+"/c")
		if err != nil {
			return err
		}
		if !bytes.Equal(data[:len(data)/2], half) {
			return fmt.Errorf("%s/c: ReadFile returned different bytes", dir)
		}
		for _, name := range []string{"b", "c", "sub"} {
			if err := c.Remove(ctx, dir+"/"+name); err != nil {
				return err
			}
		}
		if err := c.Remove(ctx, dir); err != nil {
			return err
		}
		if _, err := c.Stat(ctx, dir); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: Stat after Remove: %v", dir, err)
		}
		return nil
	}

	err := tsRecv(t, tsGo(func() error {
		var g errgroup.Group
		for i := range workers {
			g.Go(func() error { return work(i) })
		}
		return g.Wait()
	}), "the workers")
	require.NoError(t, err)

	entries, err := c.ReadDir(ctx, "/")
	require.NoError(t, err)
	require.Empty(t, entries, "every worker cleans up after itself")
	requireWorks(t, c) // ReadDir does not wait for its CLOSE; this round trip does
	require.Zero(t, srv.OpenHandles())
	require.NoError(t, c.main.failed())
}

// TestConcurrentSameFile shares one File between goroutines: ReadAt at many offsets,
// a sequential Read and Stat at once, then disjoint WriteAts, with replies shuffled.
func TestConcurrentSameFile(t *testing.T) {
	const size = 3<<20 + 11
	c, srv := newTestServerClient(t, testserver.Options{Reorder: 8})
	data := randBytes(size, 23)
	require.NoError(t, srv.WriteFile("/f", data, 0o644))
	ctx := testCtx(t)
	f, err := c.Open(ctx, "/f")
	require.NoError(t, err)
	defer f.Close()

	err = tsRecv(t, tsGo(func() error {
		var g errgroup.Group
		for i := range 12 {
			g.Go(func() error {
				off := i * 280_001
				p := make([]byte, min(500_000, size-off))
				n, err := f.ReadAt(p, int64(off))
				if err != nil {
					return fmt.Errorf("ReadAt at %d: %d bytes, %w", off, n, err)
				}
				if !bytes.Equal(data[off:off+n], p) {
					return fmt.Errorf("ReadAt at %d: bytes differ", off)
				}
				return nil
			})
		}
		g.Go(func() error {
			got, err := readSmall(f)
			if err != nil {
				return err
			}
			if !bytes.Equal(data, got) {
				return errors.New("Read: bytes differ")
			}
			return nil
		})
		g.Go(func() error {
			fi, err := f.Stat()
			if err == nil && fi.Size() != size {
				err = fmt.Errorf("Stat: size %d", fi.Size())
			}
			return err
		})
		return g.Wait()
	}), "readers")
	require.NoError(t, err)

	w, err := c.Create(ctx, "/w")
	require.NoError(t, err)
	const piece = 400_000
	err = tsRecv(t, tsGo(func() error {
		var g errgroup.Group
		for off := 0; off < size; off += piece {
			g.Go(func() error {
				_, err := w.WriteAt(data[off:min(off+piece, size)], int64(off))
				return err
			})
		}
		return g.Wait()
	}), "writers")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	stored, err := srv.ReadFile("/w")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, stored), "WriteAt pieces differ")
}

// TestConcurrentClientClose closes the Client under 16 busy goroutines. Every one
// must stop promptly with an error matching net.ErrClosed, whatever it was doing.
func TestConcurrentClientClose(t *testing.T) {
	const workers = 16
	c, srv := newTestServerClient(t, testserver.Options{Reorder: 8})
	require.NoError(t, srv.WriteFile("/f", randBytes(700_000, 24), 0o644))
	ctx := testCtx(t)
	progress := make(chan struct{}, workers*4)
	work := func(i int) error {
		name := fmt.Sprintf("/w%02d", i)
		data := randBytes(300_000+i, uint64(i))
		for {
			var err error
			switch i % 4 {
			case 0:
				_, err = c.Stat(ctx, "/f")
			case 1:
				_, err = c.ReadFile(ctx, "/f")
			case 2:
				err = c.WriteFile(ctx, name, data, 0o644)
			case 3:
				_, err = c.ReadDir(ctx, "/")
			}
			if err != nil {
				return err
			}
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}
	errs := make([]<-chan error, workers)
	for i := range workers {
		errs[i] = tsGo(func() error { return work(i) })
	}
	for range workers * 2 { // everyone is under way
		tsRecv(t, progress, "progress")
	}
	require.NoError(t, c.Close())
	for i, ch := range errs {
		err := tsRecv(t, ch, fmt.Sprintf("worker %d", i))
		require.ErrorIs(t, err, net.ErrClosed, "worker %d", i)
	}
}
