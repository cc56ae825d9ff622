package sftp

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Nothing a server can make a Client give up accumulates (issue 26, item 6): calls
// that give up at their ctx on a server that never answers leave at most maxGivenUp
// entries on the channel, and the late replies to those forgotten are dropped (a
// HANDLE closed), never taken for replies nobody asked for.

// swallower is a server hook that drops the replies to requests of one type while
// on is set, and tells seen of each, so that a test cancels a call only once its
// request has reached the server.
type swallower struct {
	typ  uint8
	on   atomic.Bool
	seen chan struct{}
}

func newSwallower(typ uint8) *swallower {
	s := &swallower{typ: typ, seen: make(chan struct{}, 1)}
	s.on.Store(true)
	return s
}

func (s *swallower) corrupt(req testserver.Request, _ []byte) [][]byte {
	if req.Type != s.typ || !s.on.Load() {
		return nil
	}
	s.seen <- struct{}{} // room: the test takes each before its next call
	return [][]byte{}
}

// giveUpOnStats makes n Stat calls that each give up at their ctx once the server has
// read the request (whose reply sw drops).
func giveUpOnStats(t *testing.T, c *Client, sw *swallower, n int) {
	t.Helper()
	base := testCtx(t) // one for all: testCtx registers a cleanup per call
	for range n {
		ctx, cancel := context.WithCancel(base)
		res := tsGo(func() error { _, err := c.Stat(ctx, "/"); return err })
		tsRecv(t, sw.seen, "the STAT at the server")
		cancel()
		require.ErrorIs(t, tsRecv(t, res, "Stat"), context.Canceled)
	}
}

// heapAndGoroutines returns the live heap after a collection, and the goroutine count.
func heapAndGoroutines() (heap uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

// TestGivenUpCallsDoNotAccumulate gives up on 4 x 2048 Stat calls on one Client
// whose server never answers them: the channel keeps at most maxGivenUp of them, the
// heap and the goroutines stop growing after the first rounds, and the channel lives.
func TestGivenUpCallsDoNotAccumulate(t *testing.T) {
	sw := newSwallower(testserver.TypeStat)
	c, _ := newTestServerClient(t, testserver.Options{Corrupt: sw.corrupt})
	const phase = 2 * maxGivenUp
	giveUpOnStats(t, c, sw, phase)
	var heaps [3]uint64
	var gors [3]int
	for i := range heaps {
		giveUpOnStats(t, c, sw, phase)
		heaps[i], gors[i] = heapAndGoroutines()
		require.LessOrEqual(t, c.main.givenUpPending(), maxGivenUp, "given-up requests kept after %d calls", (i+2)*phase)
	}
	t.Logf("after %d, %d, %d calls given up: heap %d, %d, %d B; goroutines %d, %d, %d",
		2*phase, 3*phase, 4*phase, heaps[0], heaps[1], heaps[2], gors[0], gors[1], gors[2])
	// Each call kept would be some 40 bytes: 2 x 2048 of them, 160 KiB.
	require.Less(t, int64(heaps[2])-int64(heaps[0]), int64(phase*8), "heap growth over %d calls", 2*phase)
	require.LessOrEqual(t, gors[2], gors[0], "goroutines")
	sw.on.Store(false)
	requireWorks(t, c)
}

// TestForgottenLateRepliesDropped: late replies to requests the channel forgot (more
// than maxGivenUp given up since) are dropped, the channel lives, and a late HANDLE
// is closed.
func TestForgottenLateRepliesDropped(t *testing.T) {
	w := newCloseWatch()
	var stalling atomic.Bool
	stalling.Store(true)
	c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
		w.observe(r)
		return stalling.Load() && (r.Type == testserver.TypeOpen || r.Type == testserver.TypeStat)
	}})
	require.NoError(t, srv.WriteFile("/f", []byte("x"), 0o644))
	// One OPEN first, then enough STATs that it is forgotten.
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { _, err := c.Open(ctx, "/f"); return err })
	tsWaitStalled(t, srv, 1)
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "Open"), context.Canceled)
	base := testCtx(t)
	for i := range maxGivenUp + 8 {
		ctx, cancel := context.WithCancel(base)
		res := tsGo(func() error { _, err := c.Stat(ctx, "/"); return err })
		tsWaitStalled(t, srv, i+2)
		cancel()
		require.ErrorIs(t, tsRecv(t, res, "Stat"), context.Canceled)
	}
	require.LessOrEqual(t, c.main.givenUpPending(), maxGivenUp)
	require.Equal(t, 1, srv.OpenHandles(), "the OPEN was carried out")
	stalling.Store(false)
	require.Equal(t, maxGivenUp+9, srv.ReleaseStalled())
	requireWorks(t, c) // answered after every late reply: none failed the channel
	w.waitHandles(t, srv)
}
