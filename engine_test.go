package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// The transfer engine's parallel paths, against the in-process server. Each test is
// built so that a serial engine could not pass it at all (it would wait forever, and
// the test's deadline would fail it), not so that it passes faster: no timing.

// meetingReaderAt is a sized source whose first ReadAt waits until a second ReadAt has
// begun: only an engine that reads the source from several goroutines gets past it.
type meetingReaderAt struct {
	*bytes.Reader
	met      chan struct{}
	calls    atomic.Int32
	failAt   int64 // ReadAt of a chunk holding this offset fails; -1: never
	sizeFake int64 // Size reports this when > 0 (a source that shrank)
}

var errSourceBroke = errors.New("the source broke")

func newMeetingReaderAt(data []byte) *meetingReaderAt {
	return &meetingReaderAt{Reader: bytes.NewReader(data), met: make(chan struct{}), failAt: -1}
}

func (m *meetingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	switch m.calls.Add(1) {
	case 1:
		<-m.met
	case 2:
		close(m.met)
	}
	if m.failAt >= 0 && off <= m.failAt && m.failAt < off+int64(len(p)) {
		return 0, errSourceBroke
	}
	return m.Reader.ReadAt(p, off)
}

func (m *meetingReaderAt) Size() int64 {
	if m.sizeFake > 0 {
		return m.sizeFake
	}
	return m.Reader.Size()
}

func TestEngineReaderAtParallel(t *testing.T) {
	const size = 4<<20 + 12345
	data := randBytes(size, 11)

	t.Run("whole", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{})
		f, err := c.Create(testCtx(t), "/up")
		require.NoError(t, err)
		src := newMeetingReaderAt(data)
		var n int64
		within(t, func() { n, err = f.ReadFrom(src) })
		require.NoError(t, err)
		require.Equal(t, int64(size), n)
		pos, err := src.Seek(0, io.SeekCurrent)
		require.NoError(t, err)
		require.Equal(t, int64(size), pos, "the source is left after what was written")
		require.NoError(t, f.Close())
		got, err := srv.ReadFile("/up")
		require.NoError(t, err)
		requireSameBytes(t, data, got)
	})

	t.Run("from its position", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{})
		f, err := c.Create(testCtx(t), "/up")
		require.NoError(t, err)
		const skip = 1000
		src := newMeetingReaderAt(data)
		_, err = src.Seek(skip, io.SeekStart)
		require.NoError(t, err)
		var n int64
		within(t, func() { n, err = f.ReadFrom(src) })
		require.NoError(t, err)
		require.Equal(t, int64(size-skip), n)
		require.NoError(t, f.Close())
		got, err := srv.ReadFile("/up")
		require.NoError(t, err)
		requireSameBytes(t, data[skip:], got)
	})

	t.Run("source shorter than its size", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{})
		f, err := c.Create(testCtx(t), "/up")
		require.NoError(t, err)
		src := newMeetingReaderAt(data)
		src.sizeFake = size + 3<<20
		var n int64
		within(t, func() { n, err = f.ReadFrom(src) })
		require.NoError(t, err, "a source that ends early just ends")
		require.Equal(t, int64(size), n)
		require.NoError(t, f.Close())
		got, err := srv.ReadFile("/up")
		require.NoError(t, err)
		requireSameBytes(t, data, got)
	})

	t.Run("source fails", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{})
		f, err := c.Create(testCtx(t), "/up")
		require.NoError(t, err)
		src := newMeetingReaderAt(data)
		src.failAt = 2<<20 + 7
		var n int64
		within(t, func() { n, err = f.ReadFrom(src) })
		require.ErrorIs(t, err, errSourceBroke)
		require.Equal(t, errSourceBroke, err, "the source's error comes back bare")
		require.LessOrEqual(t, n, src.failAt)
		require.NoError(t, f.Close())
		got, err := srv.ReadFile("/up")
		require.NoError(t, err)
		require.GreaterOrEqual(t, int64(len(got)), n)
		requireSameBytes(t, data[:n], got[:n])
	})
}

// recordingWriterAt is a local file in memory that records the offset of every
// WriteAt; the first piece written past offset 0 calls onAhead.
type recordingWriterAt struct {
	mu      sync.Mutex
	buf     []byte
	pos     int64
	offsets []int64
	onAhead func()
}

func (r *recordingWriterAt) Write(p []byte) (int, error) {
	return 0, errors.New("Write called: WriteTo should have used WriteAt")
}

func (r *recordingWriterAt) WriteAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	if end := off + int64(len(p)); end > int64(len(r.buf)) {
		r.buf = append(r.buf, make([]byte, end-int64(len(r.buf)))...)
	}
	copy(r.buf[off:], p)
	if len(p) > 0 {
		r.offsets = append(r.offsets, off)
	}
	ahead := off > 0 && r.onAhead != nil
	fn := r.onAhead
	if ahead {
		r.onAhead = nil
	}
	r.mu.Unlock()
	if ahead {
		fn()
	}
	return len(p), nil
}

func (r *recordingWriterAt) Seek(off int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch whence {
	case io.SeekStart:
		r.pos = off
	case io.SeekCurrent:
		r.pos += off
	default:
		return 0, errors.New("unsupported whence")
	}
	return r.pos, nil
}

// TestEngineWriterAtOutOfOrder: the server withholds the reply to the READ at offset
// 0 until a later piece has been written. An engine that handed an io.WriterAt its
// data in order would wait for offset 0 forever.
func TestEngineWriterAtOutOfOrder(t *testing.T) {
	const size = 3<<20 + 777
	data := randBytes(size, 12)
	var stalled atomic.Bool
	c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
		return r.Type == testserver.TypeRead && r.Offset == 0 && stalled.CompareAndSwap(false, true)
	}})
	require.NoError(t, srv.WriteFile("/f", data, 0o644))
	f, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	defer f.Close()
	w := &recordingWriterAt{onAhead: func() { srv.ReleaseStalled() }}
	var n int64
	within(t, func() { n, err = f.WriteTo(w) })
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	requireSameBytes(t, data, w.buf)
	require.NotZero(t, w.offsets[0], "the first piece written is not the first of the file")
	require.Equal(t, int64(size), w.pos, "the writer is left after what was written")
}

// gatedWriter holds every WRITE packet written through it until open is closed: a
// channel whose flow-control window the server does not reopen.
type gatedWriter struct {
	w    io.WriteCloser
	open chan struct{}
	once sync.Once
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	if len(p) > 4 && sshfx.PacketType(p[4]) == sshfx.TypeWrite {
		<-g.open
	}
	return g.w.Write(p)
}

func (g *gatedWriter) release() { g.once.Do(func() { close(g.open) }) }

// TestEngineStalledLaneDoesNotStallOthers stripes an upload over four channels of the
// in-process server, one of which takes no WRITE at all until the server has received
// half of the file over the others: only an engine whose lanes send independently
// gets that far.
func TestEngineStalledLaneDoesNotStallOthers(t *testing.T) {
	const size = 24<<20 + 4321
	data := randBytes(size, 13)
	gate := &gatedWriter{open: make(chan struct{})}
	var received atomic.Int64
	c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeWrite && received.Add(int64(r.Len)) >= size/2 {
			gate.release()
		}
		return 0
	}}, withStripeMinRTT(0))
	c.opts.channels = 4
	pinLanes(c, 4)
	var opened atomic.Int32
	c.source = channelSourceFunc(func(ctx context.Context) (*conn, error) {
		r, w := srv.Conn()
		var wc io.Writer = w
		var closeGate func()
		if opened.Add(1) == 1 { // the first extra channel is the stalled one
			gate.w = w
			wc, closeGate = gate, gate.release
		}
		closer := func() error {
			if closeGate != nil {
				closeGate()
			}
			r.Close()
			return w.Close()
		}
		return newConn(ctx, r, wc, closer, true, &c.dataPool)
	})
	f, err := c.Create(testCtx(t), "/up")
	require.NoError(t, err)
	var n int64
	within(t, func() { n, err = f.ReadFrom(bytes.NewReader(data)) })
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	require.NoError(t, f.Close())
	// The file is on the main channel (the first data channel was not open yet when it
	// was created), so the upload striped over it and four data channels.
	require.Equal(t, 5, len(c.chans.live()), "channels the upload striped over")
	got, err := srv.ReadFile("/up")
	require.NoError(t, err)
	requireSameBytes(t, data, got)
	require.Zero(t, srv.OpenHandles())
}

// TestStripedGetSiblingCloseNeverAnswered: a server that never answers the CLOSE of a
// striping lane's handle must not hold a Get past its ctx (issue 8, item 7, on the
// striped path): the wait for sibling CLOSEs is bounded by the call's ctx.
func TestStripedGetSiblingCloseNeverAnswered(t *testing.T) {
	c, srv := stripedStallingCloses(t) // waits_test.go
	require.NoError(t, srv.WriteFile("/big", randBytes(waitsSize, 5), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := tsGo(func() error { return c.Get(ctx, "/big", filepath.Join(t.TempDir(), "big")) })
	tsWaitStalled(t, srv, 1) // the first CLOSE is a sibling's: the data has all arrived
	require.Greater(t, len(c.chans.live()), 1, "the Get striped")
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "Get"), context.Canceled)
	srv.ReleaseStalled()
}

// The engine's bookkeeping, directly: prefixTracker (what is known done when pieces
// complete in any order) and firstFailure (which failure the caller gets).

// TestPrefixTracker completes a file's pieces in shuffled orders and checks, after
// every piece, that the prefix is exactly the end of the contiguous run of completed
// pieces from the start (computed here the slow way), and that at the end nothing is
// left waiting ahead of it.
func TestPrefixTracker(t *testing.T) {
	t.Run("gap", prefixTrackerGap)
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		start := int64(rng.IntN(3)) * 1000 // 0, or a resumed transfer's offset
		type piece struct {
			off int64
			n   int
		}
		var pieces []piece
		off := start
		for range 1 + rng.IntN(40) {
			n := 1 + rng.IntN(5000)
			pieces = append(pieces, piece{off, n})
			off += int64(n)
		}
		end := off
		rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })

		p := newPrefixTracker(start, 4)
		completed := map[int64]int{}
		for i, pc := range pieces {
			p.done(pc.off, pc.n)
			completed[pc.off] = pc.n
			want := start
			for n, ok := completed[want]; ok; n, ok = completed[want] {
				want += int64(n)
			}
			require.Equal(t, want, p.prefix, "seed %d, after piece %d (%d+%d)", seed, i, pc.off, pc.n)
			for o := range p.ahead {
				require.Greater(t, o, p.prefix, "seed %d: a piece at %d is kept ahead of the prefix %d", seed, o, p.prefix)
			}
		}
		require.Equal(t, end, p.prefix, "seed %d: every piece done", seed)
		require.Empty(t, p.ahead, "seed %d: nothing left ahead once all is done", seed)
	}
}

// prefixTrackerGap: a piece that never completes holds the prefix at its offset,
// however much completes after it.
func prefixTrackerGap(t *testing.T) {
	p := newPrefixTracker(100, 4)
	p.done(100, 10) // [100,110)
	p.done(120, 10) // [120,130): [110,120) never arrives
	p.done(130, 10)
	require.Equal(t, int64(110), p.prefix)
	require.Len(t, p.ahead, 2)
	p.done(110, 10)
	require.Equal(t, int64(140), p.prefix)
	require.Empty(t, p.ahead)
}

// TestFirstFailure: whatever order failures arrive in, the one kept is at the lowest
// offset, and of several at that offset the first to arrive; no failure, no error.
func TestFirstFailure(t *testing.T) {
	var none firstFailure
	require.NoError(t, none.err, "no failure reported")

	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var f firstFailure
		var want error
		wantAt := int64(-1)
		for i := range 1 + rng.IntN(20) {
			at := int64(rng.IntN(8)) * 4096
			err := fmt.Errorf("failure %d at %d", i, at)
			f.fail(at, err)
			if wantAt < 0 || at < wantAt {
				want, wantAt = err, at
			}
			require.Same(t, want, f.err, "seed %d, after failure %d", seed, i)
			require.Equal(t, wantAt, f.errAt, "seed %d, after failure %d", seed, i)
		}
	}

	var f firstFailure
	later := errors.New("at 8192")
	f.fail(8192, later)
	f.fail(8192, errors.New("again at 8192"))
	require.Same(t, later, f.err, "an equal offset keeps the first")
	lower := errors.New("at 0")
	f.fail(0, lower)
	f.fail(4096, errors.New("at 4096"))
	require.Same(t, lower, f.err, "a lower offset replaces, a higher one does not")
	require.Equal(t, int64(0), f.errAt)
}
