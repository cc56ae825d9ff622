package sftp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/testserver"
)

func TestWithTransferMemoryChecksItsValue(t *testing.T) {
	_, err := newClient([]Option{WithTransferMemory(minTransferMemory - 1)})
	require.ErrorContains(t, err, "WithTransferMemory")
	c, err := newClient(nil)
	require.NoError(t, err)
	require.Equal(t, int64(defaultTransferMemory), c.mem.limit.Load())
	c, err = newClient([]Option{WithTransferMemory(5 << 20)})
	require.NoError(t, err)
	require.Equal(t, int64(5<<20), c.mem.free.Load())
}

// memClient is a Client with a budget of slots buffers of unit bytes, for the
// share's arithmetic alone.
func memClient(slots int, unit int64) *Client {
	c := &Client{}
	c.dataSize.Store(unit - packetSlack)
	c.mem.init(int64(slots) * unit)
	return c
}

func TestMemShareFairShare(t *testing.T) {
	const unit = 10 << 10
	c := memClient(12, unit)
	var a, b memShare
	a.join(c)
	require.True(t, a.ensure(12), "a transfer alone may take the whole budget")
	require.False(t, a.ensure(13), "but no more")
	a.trim(3)
	require.Equal(t, int64(9*unit), c.mem.free.Load(), "trim gives back what is not in use")

	b.join(c) // its floor is charged whatever is free
	require.False(t, a.ensure(7), "two transfers: a's fair share is 6")
	require.True(t, a.ensure(6))
	require.True(t, b.ensure(6), "the rest is b's")
	require.False(t, b.ensure(7))
	require.Equal(t, int64(0), c.mem.free.Load())

	a.trim(0)
	require.Equal(t, 1, a.have, "a keeps its floor")
	a.leave()
	a.leave() // twice changes nothing
	require.Equal(t, int64(1), c.mem.active.Load())
	require.True(t, b.ensure(12), "alone again, b may take it all")
	b.leave()
	require.Equal(t, int64(12*unit), c.mem.free.Load(), "everything is back")
	require.Equal(t, int64(12*unit), c.mem.peak())
}

// TestMemShareFloorPastTheBudget checks that a transfer that starts when the budget
// is spent still gets its floor, so it can make progress, and no more.
func TestMemShareFloorPastTheBudget(t *testing.T) {
	const unit = 10 << 10
	c := memClient(2, unit)
	var a, b, d memShare
	a.join(c)
	b.join(c)
	d.join(c)
	require.Equal(t, int64(-unit), c.mem.free.Load(), "floors are charged past the budget")
	require.True(t, d.ensure(1))
	require.False(t, d.ensure(2))
	require.Equal(t, int64(3*unit), c.mem.peak())
	for _, m := range []*memShare{&a, &b, &d} {
		m.leave()
	}
	require.Equal(t, int64(2*unit), c.mem.free.Load())
}

// TestMemShareUploadWait checks an upload's producer waiting for a slot: it ends when
// ctx does, and a buffer of the transfer being freed lets it go on.
func TestMemShareUploadWait(t *testing.T) {
	const unit = 10 << 10
	c := memClient(2, unit)
	var a, b memShare
	a.join(c)
	b.join(c) // the budget is spent on the two floors
	ctx := testCtx(t)
	require.True(t, a.take(ctx), "the floor")

	cctx, cancel := context.WithCancel(ctx)
	waited := tsGo(func() bool { return a.take(cctx) })
	cancel()
	require.False(t, <-waited, "the wait ends with ctx")
	require.Equal(t, 1, a.inUse)

	got := tsGo(func() bool { return a.take(ctx) })
	a.put() // the buffer in use is freed: the waiting take may have its slot
	require.True(t, <-got)
	require.Equal(t, 1, a.inUse)

	a.leave()
	require.Equal(t, int64(0), c.mem.free.Load(), "a buffer still in use keeps its slot after the end")
	a.put()
	require.Equal(t, int64(unit), c.mem.free.Load(), "and gives it back when freed")
	b.leave()
	require.Equal(t, int64(2*unit), c.mem.free.Load())
}

// budgetServerClient is a Client of the in-process server whose transfers share a
// budget of 1 MiB in buffers of 9 KiB: about 113 of them.
func budgetServerClient(t *testing.T, opts testserver.Options) (*Client, *testserver.Server) {
	return newTestServerClient(t, opts, WithMaxPacket(8192), WithTransferMemory(minTransferMemory))
}

// slotsOver is the most buffers n transfers may hold on c: the budget, and for each
// its floor and the one READ a download may send to fill a gap.
func slotsOver(c *Client, n int) int64 {
	unit := c.dataSize.Load() + packetSlack
	return c.mem.limit.Load()/unit + int64(n*(floorSlots+1))
}

// TestTransferMemoryBoundsConcurrentDownloads runs 16 downloads at once on one
// Client against a server that delays, reorders and shortens replies: each would keep
// 64 READs in flight on its own (1024 together), but they share the Client's budget,
// and every one finishes with the right bytes.
func TestTransferMemoryBoundsConcurrentDownloads(t *testing.T) {
	const files, size = 16, 512 << 10
	c, srv := budgetServerClient(t, testserver.Options{
		Latency: 5 * time.Millisecond,
		Reorder: 8,
		Shorten: func(off int64, asked int) int {
			if off%(5*8192) == 0 {
				return asked / 2
			}
			return asked
		},
	})
	want := make([][]byte, files)
	for i := range files {
		want[i] = randBytes(size, uint64(i))
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/f%02d", i), want[i], 0o644))
	}
	ctx := testCtx(t)
	var g errgroup.Group
	got := make([]bytes.Buffer, files)
	for i := range files {
		g.Go(func() error {
			f, err := c.Open(ctx, fmt.Sprintf("/f%02d", i))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(onlyWriter{&got[i]}, f) // WriteTo, in offset order
			return err
		})
	}
	require.NoError(t, g.Wait())
	for i := range files {
		require.Equal(t, want[i], got[i].Bytes(), "file %d", i)
	}
	t.Logf("in flight %d bound %d peak %d", srv.MaxInflight(), slotsOver(c, files), c.mem.peak())
	require.LessOrEqual(t, int64(srv.MaxInflight()), slotsOver(c, files), "READs in flight across the Client")
	require.LessOrEqual(t, c.mem.peak(), c.mem.limit.Load()+files*(c.dataSize.Load()+packetSlack))
	require.Equal(t, c.mem.limit.Load(), c.mem.free.Load(), "every slot is back")
	require.Equal(t, int64(0), c.mem.active.Load())
}

// TestTransferMemoryRemoteToRemote copies files from the server to the server on
// one Client, a download feeding uploads, many at once on a budget that cannot hold
// their windows: the uploads take buffers while the downloads hold theirs, and no
// transfer may wait on the other for memory.
func TestTransferMemoryRemoteToRemote(t *testing.T) {
	const files, size = 12, 768 << 10
	c, srv := budgetServerClient(t, testserver.Options{Latency: 2 * time.Millisecond, Reorder: 4})
	want := make([][]byte, files)
	for i := range files {
		want[i] = randBytes(size, uint64(100+i))
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/src%02d", i), want[i], 0o644))
	}
	ctx := testCtx(t)
	var g errgroup.Group
	for i := range files {
		g.Go(func() error {
			src, err := c.Open(ctx, fmt.Sprintf("/src%02d", i))
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := c.Create(ctx, fmt.Sprintf("/dst%02d", i))
			if err != nil {
				return err
			}
			// Writes of 64 KiB: each an upload of several WRITEs of its own.
			bw := bufio.NewWriterSize(onlyWriter{dst}, 64<<10)
			if _, err := src.WriteTo(bw); err != nil {
				dst.Close()
				return err
			}
			if err := bw.Flush(); err != nil {
				dst.Close()
				return err
			}
			return dst.Close()
		})
	}
	require.NoError(t, g.Wait())
	for i := range files {
		got, err := srv.ReadFile(fmt.Sprintf("/dst%02d", i))
		require.NoError(t, err)
		require.Equal(t, want[i], got, "file %d", i)
	}
	require.LessOrEqual(t, c.mem.peak(), c.mem.limit.Load()+2*files*(c.dataSize.Load()+packetSlack))
}

// TestIdleBuffersExpire checks what empties the buffer pool once transfers have
// stopped (the timer only calls expire): nothing while a transfer runs or when one
// started since the wait began, else the pool, but for what other Ps keep to
// themselves (sync.Pool's Get cannot take it).
func TestIdleBuffersExpire(t *testing.T) {
	c, err := newClient(nil)
	require.NoError(t, err)
	tm := &c.mem
	t.Cleanup(tm.idle.stop) // no Close: its wait would outlive the test
	put := make(map[*[]byte]bool)
	for range 64 {
		bp := new([]byte)
		put[bp] = true
		c.dataPool.Put(bp)
	}

	var m memShare
	m.join(c)
	joins := tm.idle.joins.Load()
	require.False(t, tm.idle.expire(tm, joins), "a transfer runs")
	m.leave()
	require.False(t, tm.idle.expire(tm, joins-1), "a transfer started since the wait began")
	require.True(t, tm.idle.expire(tm, joins))

	left := 0
	for range len(put) {
		made := tm.idle.fresh.Load()
		bp := c.dataPool.Get().(*[]byte)
		if tm.idle.fresh.Load() != made {
			break
		}
		if put[bp] {
			left++
		}
	}
	require.LessOrEqual(t, left, runtime.GOMAXPROCS(0), "buffers left in the pool")
}

// TestIdleBuffersStop checks that Close ends the wait: no timer outlives the Client.
func TestIdleBuffersStop(t *testing.T) {
	c, err := newClient(nil)
	require.NoError(t, err)
	var m memShare
	m.join(c)
	m.leave() // the last transfer: the wait starts
	c.mem.idle.mu.Lock()
	armed := c.mem.idle.timer != nil
	c.mem.idle.mu.Unlock()
	require.True(t, armed)
	c.mem.idle.stop()
	c.mem.idle.arm(&c.mem)
	c.mem.idle.mu.Lock()
	defer c.mem.idle.mu.Unlock()
	require.Nil(t, c.mem.idle.timer, "nothing is armed once stopped")
}
