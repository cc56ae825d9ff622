package sftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshfx"
)

// The striping tests (lanes.go); their environment (a private sshd, and what they
// read of its sftp-servers) is in stripeenv_test.go. The channel pool's own tests are
// in channelpool_test.go.

func TestStripeTransfers(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 1)

	t.Run("WriteTo", func(t *testing.T) {
		name := e.file(t, "down", data)
		c, _ := e.client(t, "", WithChannels(4))
		f, got, err := download(t, c, name, 1, func() error { return e.awaitLanes(c, name, 4) })
		require.NoError(t, err)
		requireSameBytes(t, data, got)
		require.Len(t, c.chans.live(), 5)
		require.Equal(t, 1, e.serverHandles(name), "sibling handles left open")
		closeFile(t, f)
		require.Zero(t, e.serverHandles(name))
		e.requireStriped(t, name, 4, stripeSize, false)
	})

	for _, sized := range []bool{true, false} {
		t.Run(fmt.Sprintf("ReadFrom/sized=%v", sized), func(t *testing.T) {
			name := e.file(t, fmt.Sprintf("up-%v", sized), nil)
			c, _ := e.client(t, "", WithChannels(4))
			// Without a size, striping starts once 8 MiB have been sent.
			at := int64(1 << 20)
			if !sized {
				at = stripeMin + 1<<20
			}
			f, n, err := upload(t, c, name, data, sized, at, func() error { return e.awaitLanes(c, name, 4) })
			require.NoError(t, err)
			require.Equal(t, int64(stripeSize), n)
			require.Len(t, c.chans.live(), 5)
			require.Equal(t, 1, e.serverHandles(name), "sibling handles left open")
			closeFile(t, f)
			require.Zero(t, e.serverHandles(name))
			requireSameBytes(t, data, readLocal(t, name))
			e.requireStriped(t, name, 4, stripeSize, true)
		})
	}

	// ReadAt and WriteAt stripe from their first request; nothing in them can wait for
	// the lanes, so only the outcome is checked, at an offset that is no request size.
	t.Run("ReadAtWriteAt", func(t *testing.T) {
		const off = 4097
		name := e.file(t, "at", data)
		c, _ := e.client(t, "", WithChannels(4))
		f, err := c.OpenFile(testCtx(t), name, os.O_RDWR, 0)
		require.NoError(t, err)
		p := make([]byte, stripeSize-off)
		var n int
		within(t, func() { n, err = f.ReadAt(p, off) })
		require.NoError(t, err)
		require.Equal(t, len(p), n)
		requireSameBytes(t, data[off:], p)
		// A sibling whose OPEN was still in flight when the transfer ended is closed
		// when its HANDLE reply arrives, just after.
		require.NoError(t, e.waitServerHandles(name, 1), "sibling handles left open")

		upd := randBytes(stripeSize-off, 2)
		within(t, func() { n, err = f.WriteAt(upd, off) })
		require.NoError(t, err)
		require.Equal(t, len(upd), n)
		require.NoError(t, e.waitServerHandles(name, 1), "sibling handles left open")
		closeFile(t, f)
		require.NoError(t, e.waitServerHandles(name, 0))
		requireSameBytes(t, append(data[:off:off], upd...), readLocal(t, name))
	})
}

func TestStripeTinyFiles(t *testing.T) {
	e := newStripeEnv(t, 0)
	c, _ := e.client(t, "", WithChannels(4))
	ctx := testCtx(t)
	for _, size := range []int{0, 1} {
		data := randBytes(size, 3)
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			down := e.file(t, fmt.Sprintf("down-%d", size), data)
			downloadWhole(t, c, down, data, nil)
			got, err := c.ReadFile(ctx, down)
			require.NoError(t, err)
			requireSameBytes(t, data, got)

			up := e.file(t, fmt.Sprintf("up-%d", size), nil)
			f, n, err := upload(t, c, up, data, false, 0, nil)
			require.NoError(t, err)
			require.Equal(t, int64(size), n)
			closeFile(t, f)
			requireSameBytes(t, data, readLocal(t, up))
			up2 := e.file(t, fmt.Sprintf("up2-%d", size), nil)
			require.NoError(t, c.WriteFile(ctx, up2, data, 0o644))
			requireSameBytes(t, data, readLocal(t, up2))
		})
	}
	require.Len(t, c.chans.live(), 2, "tiny transfers opened channels beyond the first data channel")
	require.Equal(t, 2, e.sessions(t))
}

// elsewhere runs f in another goroutine, as a concurrent caller would, and waits for it
// (bounded): the test then knows f has happened before the transfer goes on.
func elsewhere(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(testTimeout):
		return fmt.Errorf("the other goroutine did not finish within %v", testTimeout)
	}
}

// failLane kills the channel c opened i-th (0: the main one), as a broken channel
// would die.
func failLane(c *Client, i int) error {
	live := c.chans.live()
	if len(live) <= i {
		return fmt.Errorf("%d channels: no channel %d to kill", len(live), i)
	}
	return elsewhere(func() error {
		live[i].fail(errors.New("killed by the test"))
		return nil
	})
}

// channelKiller breaks the k-th channel a Client opens (1: the main one) on the n-th
// READ or WRITE written to it once armed: the Write that carries it fails, as on a
// connection that died, with the channel's other requests in flight. Arming it once
// the lanes are in (from the transfer's trip) makes sure the lane dies mid-transfer,
// not before the test has seen it open. It counts packets, not Writes: the channel's
// writer sends a run of queued small packets (a download's READs) in one Write
// (connwrite.go), so a lane can carry all its READs in fewer Writes than n.
type channelKiller struct {
	k, n   int
	mu     sync.Mutex
	opened int
	armed  atomic.Bool
	killed atomic.Bool
}

func (ck *channelKiller) wrap(r io.Reader, w io.WriteCloser) (io.Reader, io.WriteCloser) {
	ck.mu.Lock()
	ck.opened++
	i := ck.opened
	ck.mu.Unlock()
	if i != ck.k {
		return r, w
	}
	return r, &laneKiller{WriteCloser: w, ck: ck, left: ck.n}
}

type laneKiller struct {
	io.WriteCloser
	ck   *channelKiller
	left int // READs and WRITEs to let through once armed; the conn has one writer
}

func (kw *laneKiller) Write(p []byte) (int, error) {
	if kw.ck.armed.Load() {
		if kw.left -= dataRequests(p); kw.left <= 0 {
			kw.ck.killed.Store(true)
			return 0, errors.New("channel killed by the test")
		}
	}
	return kw.WriteCloser.Write(p)
}

// dataRequests counts the READs and WRITEs among the SFTP packets in p, which holds
// whole packets (a conn writes whole packets, one or a run of them per Write).
func dataRequests(p []byte) int {
	n := 0
	for len(p) >= 5 {
		switch sshfx.PacketType(p[4]) {
		case sshfx.TypeRead, sshfx.TypeWrite:
			n++
		}
		p = p[min(len(p), 4+int(binary.BigEndian.Uint32(p))):]
	}
	return n
}

// A sibling lane that dies mid-transfer costs the transfer nothing: what it owed goes
// out again on the lanes left. Its channel is the third the Client opens (after the main
// one and the first data channel, which the File is on), and dies on
// its fourth READ or WRITE once all lanes are working, with requests in flight.
func TestStripeSiblingDies(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 6)
	ctx := testCtx(t)

	t.Run("download", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		name := e.file(t, "down", data)
		ck := &channelKiller{k: 3, n: 4}
		c, closeClient := e.client(t, "", WithChannels(4), withStreamWrap(ck.wrap))
		f, got, err := download(t, c, name, 1, func() error {
			err := e.awaitLanes(c, name, 4)
			ck.armed.Store(true)
			return err
		})
		require.NoError(t, err)
		require.True(t, ck.killed.Load(), "the sibling was not killed")
		requireSameBytes(t, data, got)
		_, err = c.Stat(ctx, name)
		require.NoError(t, err, "the main channel after a lane died")
		require.Len(t, c.chans.live(), 4)
		// The dead channel's sftp-server goes when sshd notices; the others' siblings
		// were closed by the transfer.
		require.NoError(t, e.waitServerHandles(name, 1))
		closeFile(t, f)

		// The next large transfer replaces the channel.
		downloadWhole(t, c, name, data, func() error { return e.awaitLanes(c, name, 4) })
		require.Len(t, c.chans.live(), 5)
		closeClient()
		goleak.VerifyNone(t, ignore)
	})

	for _, sized := range []bool{true, false} {
		t.Run(fmt.Sprintf("upload/sized=%v", sized), func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			name := e.file(t, fmt.Sprintf("up-%v", sized), nil)
			ck := &channelKiller{k: 3, n: 4}
			c, closeClient := e.client(t, "", WithChannels(4), withStreamWrap(ck.wrap))
			at := int64(1 << 20)
			if !sized {
				at = stripeMin + 1<<20
			}
			f, n, err := upload(t, c, name, data, sized, at, func() error {
				err := e.awaitLanes(c, name, 4)
				ck.armed.Store(true)
				return err
			})
			require.NoError(t, err)
			require.True(t, ck.killed.Load(), "the sibling was not killed")
			require.Equal(t, int64(stripeSize), n)
			_, err = c.Stat(ctx, name)
			require.NoError(t, err, "the main channel after a lane died")
			require.Len(t, c.chans.live(), 4)
			require.NoError(t, e.waitServerHandles(name, 1))
			closeFile(t, f)
			requireSameBytes(t, data, readLocal(t, name))
			closeClient()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// The File's own lane dying fails the transfer, with an error that says the
// connection is gone; the siblings it opened are closed all the same.
func TestStripeOwnLaneDies(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 15)

	t.Run("download", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		name := e.file(t, "down", data)
		c, closeClient := e.client(t, "", WithChannels(4))
		f, got, err := download(t, c, name, 1, func() error {
			if err := e.awaitLanes(c, name, 4); err != nil {
				return err
			}
			return failLane(c, 1)
		})
		require.ErrorIs(t, err, net.ErrClosed)
		requireSameBytes(t, data[:len(got)], got)
		require.NoError(t, e.waitServerHandles(name, 0), "handles left open")
		require.ErrorIs(t, f.Close(), net.ErrClosed)
		closeClient()
		goleak.VerifyNone(t, ignore)
	})

	t.Run("upload", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		name := e.file(t, "up", nil)
		c, closeClient := e.client(t, "", WithChannels(4))
		f, n, err := upload(t, c, name, data, true, 1<<20, func() error {
			if err := e.awaitLanes(c, name, 4); err != nil {
				return err
			}
			return failLane(c, 1)
		})
		require.ErrorIs(t, err, net.ErrClosed)
		require.NoError(t, e.waitServerHandles(name, 0), "handles left open")
		require.ErrorIs(t, f.Close(), net.ErrClosed)
		// Writes the other lanes' servers had queued may still land, but only past n.
		onServer := readLocal(t, name)
		require.GreaterOrEqual(t, int64(len(onServer)), n)
		requireSameBytes(t, data[:n], onServer[:n])
		closeClient()
		goleak.VerifyNone(t, ignore)
	})
}

func TestStripeCloseDuringTransfer(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 7)

	// closeFrom closes f from another goroutine once the lanes are working, and holds
	// the transfer until Close has returned: from then on the transfer must neither
	// move data nor succeed.
	errNotClosed := errors.New("the transfer did not get as far as closing the file")
	closeFrom := func(c *Client, f **File, name string, closeErr *error) func() error {
		*closeErr = errNotClosed
		return func() error {
			if err := e.awaitLanes(c, name, 4); err != nil {
				return err
			}
			return elsewhere(func() error { *closeErr = (*f).Close(); return nil })
		}
	}

	t.Run("download", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		name := e.file(t, "down", data)
		c, closeClient := e.client(t, "", WithChannels(4))
		f, err := c.Open(testCtx(t), name)
		require.NoError(t, err)
		var closeErr error
		var buf bytes.Buffer
		w := &tripWriter{w: &buf, n: 1, trip: closeFrom(c, &f, name, &closeErr)}
		within(t, func() { _, err = f.WriteTo(w) })
		require.ErrorIs(t, err, fs.ErrClosed)
		require.NoError(t, closeErr)
		require.Zero(t, e.serverHandles(name), "handles left open")
		requireSameBytes(t, data[:buf.Len()], buf.Bytes())
		closeClient()
		goleak.VerifyNone(t, ignore)
	})

	t.Run("upload", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		name := e.file(t, "up", nil)
		c, closeClient := e.client(t, "", WithChannels(4))
		f, err := c.Create(testCtx(t), name)
		require.NoError(t, err)
		var closeErr error
		tr := &tripReader{r: bytes.NewReader(data), n: 1 << 20, trip: closeFrom(c, &f, name, &closeErr)}
		var n int64
		within(t, func() { n, err = f.ReadFrom(io.LimitReader(tr, stripeSize)) })
		require.NoError(t, closeErr)
		require.Zero(t, e.serverHandles(name), "handles left open")
		onServer := readLocal(t, name)
		// What the source yielded while Close ran must not be sent: nothing is written
		// after Close has returned.
		require.LessOrEqual(t, int64(len(onServer)), tr.before, "bytes on the server")
		require.ErrorIs(t, err, fs.ErrClosed)
		require.LessOrEqual(t, n, int64(len(onServer)))
		requireSameBytes(t, data[:n], onServer[:n])
		closeClient()
		goleak.VerifyNone(t, ignore)
	})
}

// Once Close has returned, a transfer must not send on the handle any more: sftp-server
// gives a closed handle's id to the next OPEN, so a WRITE sent late lands in whatever
// file was opened next on that channel. Here the source is mid-Read when another
// goroutine closes the file (Close does not wait for a blocked source, as documented)
// and opens another one. Striping plays no part: the stale WRITE goes on the main
// channel.
func TestStripeCloseThenReopenDuringUpload(t *testing.T) {
	e := newStripeEnv(t, 0)
	c, _ := e.client(t, "", WithChannels(4))
	ctx := testCtx(t)
	name, other := e.file(t, "up", nil), e.file(t, "other", nil)
	f, err := c.Create(ctx, name)
	require.NoError(t, err)

	var g *File
	trip := func() error {
		return elsewhere(func() error {
			if err := f.Close(); err != nil {
				return err
			}
			var err error
			g, err = c.Create(ctx, other)
			return err
		})
	}
	src := io.LimitReader(&tripReader{r: bytes.NewReader(randBytes(stripeSize, 14)), n: 1, trip: trip}, stripeSize)
	var n int64
	within(t, func() { n, err = f.ReadFrom(src) })
	require.NotNil(t, g)
	closeFile(t, g)
	require.Zero(t, len(readLocal(t, other)), "bytes the upload wrote into the file opened after Close")
	require.ErrorIs(t, err, fs.ErrClosed)
	require.Zero(t, n)
}

func TestStripeAppendNeverStripes(t *testing.T) {
	e := newStripeEnv(t, 0)
	old := randBytes(1<<20+7, 8)
	more := randBytes(20<<20, 9)
	name := e.file(t, "log", old)
	c, _ := e.client(t, "", WithChannels(4))

	f, err := c.OpenFile(testCtx(t), name, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	var n int64
	// A sized source would stripe from the first byte if anything did.
	within(t, func() { n, err = f.ReadFrom(io.LimitReader(bytes.NewReader(more), int64(len(more)))) })
	require.NoError(t, err)
	require.Equal(t, int64(len(more)), n)
	closeFile(t, f)

	requireSameBytes(t, append(old, more...), readLocal(t, name))
	require.Len(t, c.chans.live(), 2, "the main channel and the first data channel")
	require.Equal(t, 1, e.opened(t, name), "handles opened on the file")
}

func TestStripeConcurrentTransfers(t *testing.T) {
	e := newStripeEnv(t, 0)
	c, _ := e.client(t, "", WithChannels(4))
	ctx := testCtx(t)
	downData, upData := randBytes(stripeSize, 10), randBytes(stripeSize-777, 11)
	down, up := e.file(t, "down", downData), e.file(t, "up", nil)

	var wg sync.WaitGroup
	var got []byte
	var downErr, upErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		got, downErr = c.ReadFile(ctx, down)
	}()
	go func() {
		defer wg.Done()
		upErr = c.WriteFile(ctx, up, upData, 0o644)
	}()
	within(t, wg.Wait)
	require.NoError(t, downErr)
	require.NoError(t, upErr)
	requireSameBytes(t, downData, got)
	requireSameBytes(t, upData, readLocal(t, up))
	// Both transfers share the Client's channels rather than each opening its own
	// (that would keep up to 1+4+4). The sessions the server saw are not counted: a
	// channel open that a transfer gave up when it ended still started one.
	require.LessOrEqual(t, len(c.chans.live()), 5)
	require.NoError(t, e.waitServerHandles(down, 0), "handles left open")
	require.NoError(t, e.waitServerHandles(up, 0), "handles left open")
}

// A transfer can end while its siblings are still being opened (a write error, Close,
// a short range). The handles those OPENs create on the server must still be closed,
// though only once their HANDLE replies come in, after the transfer has returned. A
// delay proxy keeps each OPEN in flight long enough for the transfer to end first.
func TestStripeEndsWhileSiblingsOpen(t *testing.T) {
	e := newStripeEnv(t, 0)
	p, err := delayproxy.New(e.sshd.Addr, 25*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	c, _ := e.client(t, p.Addr(), WithChannels(4))

	// Open the extra channels first, so the next transfer's OPENs go out at once.
	warm := e.file(t, "warm", randBytes(stripeMin+1<<20, 12))
	f, _, err := download(t, c, warm, 1, func() error { return e.awaitLanes(c, warm, 4) })
	require.NoError(t, err)
	closeFile(t, f)
	require.Len(t, c.chans.live(), 5)

	// The writer fails as soon as the server has opened the siblings: their HANDLE
	// replies are then half a round trip away.
	name := e.file(t, "big", randBytes(stripeSize, 13))
	errStop := errors.New("writer gives up")
	f, _, err = download(t, c, name, 1, func() error {
		if err := e.waitServerHandles(name, 4); err != nil {
			return err
		}
		return errStop
	})
	require.ErrorIs(t, err, errStop)
	closeFile(t, f)
	require.NoError(t, e.waitServerHandles(name, 0), "sibling handles left open on the server")
	require.Len(t, e.closedHandles(t, name), 4)
}
