package sftp

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The write side of a channel (connwrite.go): a call whose ctx ends returns at once
// whatever the transport's Write is doing, and a Write still blocked a grace period
// after a call gave up on it gives the channel up.

// gateWriter stands between a Client and its transport's writer. Once held, every
// Write longer than min bytes waits inside Write until release: a server that stopped
// taking data, as x/crypto's channel Write waits on an exhausted window. Like closing
// an SSH channel whose server never answers, closing it does not end a held Write;
// release does.
type gateWriter struct {
	w       io.WriteCloser
	min     int
	mu      sync.Mutex
	held    bool
	entered chan int      // the length of each Write as it starts waiting
	open    chan struct{} // closed by release
	once    sync.Once
}

func newGateWriter(w io.WriteCloser, min int) *gateWriter {
	return &gateWriter{w: w, min: min, entered: make(chan int, 16), open: make(chan struct{})}
}

func (g *gateWriter) hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	held := g.held && len(p) > g.min
	g.mu.Unlock()
	if held {
		select {
		case g.entered <- len(p):
		default:
		}
		<-g.open
	}
	return g.w.Write(p)
}

func (g *gateWriter) Close() error { return g.w.Close() }

func (g *gateWriter) release() { g.once.Do(func() { close(g.open) }) }

// gatedClient is a Client on the in-process server whose writes go through a gate
// holding WRITE-sized packets. The grace is an hour: these tests move the watch's
// clock by hand (conn.checkStall), so nothing depends on timing.
func gatedClient(t *testing.T) (*Client, *testserver.Server, *gateWriter) {
	t.Helper()
	tsNoLeaks(t)
	srv := testserver.New(testserver.Options{})
	t.Cleanup(func() { srv.Close() })
	r, w := srv.Conn()
	gate := newGateWriter(w, copyMax)
	t.Cleanup(gate.release) // as closing the SSH connection would: last of all
	c, err := NewClientPipe(testCtx(t), r, gate, withStallGrace(time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, srv, gate
}

// putUntilHeld runs a Put of a 4 MiB file to /dst whose ctx is cancelled once one of
// its WRITEs is held in the gate, and returns the Put's error.
func putUntilHeld(t *testing.T, c *Client, gate *gateWriter) error {
	t.Helper()
	local := filepath.Join(t.TempDir(), "src")
	writeLocal(t, local, randBytes(4<<20, 7), 0o644)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	gate.hold()
	res := tsGo(func() error { return c.Put(ctx, local, "/dst") })
	tsRecv(t, gate.entered, "a WRITE held in the gate")
	cancel()
	return tsRecv(t, res, "Put after its ctx ended")
}

// A Put whose WRITE is stuck in the transport returns with its ctx; a call queued
// behind the stuck Write is withdrawn when its ctx ends; once the Write has stayed
// blocked past the grace, the main channel is given up and the Client says why.
func TestWriteStallGivesUpTheChannel(t *testing.T) {
	c, _, gate := gatedClient(t)
	err := putUntilHeld(t, c, gate)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, c.Err(), "the grace has not passed")

	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { _, err := c.Stat(ctx, "/"); return err })
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "Stat behind the stuck Write"), context.Canceled)

	c.main.checkStall(time.Now().Add(2 * time.Hour))
	tsRecv(t, c.Done(), "the Client's Done")
	err = c.Err()
	requireClosedConn(t, err)
	require.True(t, isStalled(err), "%v", err)
	require.ErrorContains(t, err, "the server stopped taking data")
	_, err = c.Stat(testCtx(t), "/")
	require.True(t, isStalled(err), "a later call: %v", err)
	// Close returns though the writer is still held (until the cleanup releases it).
	tsRecv(t, tsGo(func() error { return c.Close() }), "Close")
}

// A user who cancels an upload on a healthy server keeps a working Client: the WRITE
// left in the middle of a Write completes, so the watch finds nothing stuck once the
// grace is over; the request queued behind it never reached the server.
func TestCancelledUploadKeepsAHealthyChannel(t *testing.T) {
	c, srv, gate := gatedClient(t)
	err := putUntilHeld(t, c, gate)
	require.ErrorIs(t, err, context.Canceled)

	// A READLINK, which nothing else here sends (the Put's clean-up sends LSTATs).
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { _, err := c.Readlink(ctx, "/never"); return err })
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "Readlink behind the held Write"), context.Canceled)

	gate.release() // the server takes the data after all
	requireWorks(t, c)
	c.main.checkStall(time.Now().Add(2 * time.Hour))
	requireWorks(t, c)
	require.NoError(t, c.Err())
	require.Zero(t, srv.Requests(testserver.TypeReadlink), "a withdrawn request reached the server")

	// The Client goes on: the next upload completes.
	local := filepath.Join(t.TempDir(), "again")
	data := randBytes(3<<20+5, 8)
	writeLocal(t, local, data, 0o644)
	require.NoError(t, c.Put(testCtx(t), local, "/again"))
	got, err := srv.ReadFile("/again")
	require.NoError(t, err)
	requireSameBytes(t, data, got)
}

// A File's deadline bounds a WriteAt whose packet is held in the transport, and a
// Write of the same File that is queued behind it does not go out.
func TestDeadlineEndsAWriteHeldInTheTransport(t *testing.T) {
	c, srv, gate := gatedClient(t)
	f, err := c.Create(testCtx(t), "/f")
	require.NoError(t, err)
	gate.hold()
	res := tsGo(func() error { _, err := f.WriteAt(make([]byte, 64<<10), 0); return err })
	tsRecv(t, gate.entered, "the WRITE held in the gate")
	require.NoError(t, f.SetDeadline(time.Now()))
	requireDeadline(t, tsRecv(t, res, "WriteAt after the deadline"))
	gate.release()
	require.NoError(t, f.SetDeadline(time.Time{}))
	require.NoError(t, f.Close())
	requireWorks(t, c)
	st, err := srv.Stat("/f")
	require.NoError(t, err)
	require.EqualValues(t, 64<<10, st.Size, "the held WRITE completed once released")
}

// NewClientPipe's handshake is bounded by its ctx even while INIT cannot be written
// (a peer that never reads).
func TestNewClientPipeCtxBoundsINIT(t *testing.T) {
	tsNoLeaks(t)
	r, peerW := io.Pipe()
	peerR, w := io.Pipe() // nobody reads peerR: the INIT write blocks
	defer peerW.Close()
	defer peerR.Close()
	gate := newGateWriter(w, 0)
	gate.hold()
	defer gate.release()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	res := tsGo(func() tsClientResult {
		c, err := NewClientPipe(ctx, r, gate)
		return tsClientResult{c, err}
	})
	require.Equal(t, 9, tsRecv(t, gate.entered, "INIT on its way")) // INIT is 9 bytes
	cancel()
	c, err := tsRecv(t, res, "NewClientPipe after its ctx ended").get()
	require.Nil(t, c)
	require.ErrorIs(t, err, context.Canceled)
}

// The same against a pipe that blocks in the kernel: an io.Pipe whose reader never
// reads. NewClientPipe closes it on the way out, which ends the blocked Write.
func TestNewClientPipeCtxBoundsINITOnAPipe(t *testing.T) {
	tsNoLeaks(t)
	r, peerW := io.Pipe()
	peerR, w := io.Pipe()
	defer peerW.Close()
	defer peerR.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	c, err := NewClientPipe(ctx, r, w)
	require.Nil(t, c)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = w.Write([]byte("x"))
	require.ErrorIs(t, err, io.ErrClosedPipe, "NewClientPipe closes what it was given")
}

// The watch is on the Write under way: a call that gave up on a packet already
// written leaves nothing to watch, and a later Write that blocks is watched only once
// a call gives up on it.
func TestStallWatchFollowsTheWriteUnderWay(t *testing.T) {
	c, _, gate := gatedClient(t)
	f, err := c.Create(testCtx(t), "/f")
	require.NoError(t, err)
	// A call that gave up after its request went out: nothing is in a Write.
	c.main.mu.Lock()
	c.main.giveUpLocked(c.main.ws.written)
	armed := c.main.ws.watchSeq > c.main.ws.written
	c.main.mu.Unlock()
	require.False(t, armed, "a watch with no Write under way")

	gate.hold()
	res := tsGo(func() error { _, err := f.WriteAt(make([]byte, 64<<10), 0); return err })
	tsRecv(t, gate.entered, "the WRITE held in the gate")
	// No call has given up on it yet: the clock passing changes nothing.
	c.main.checkStall(time.Now().Add(2 * time.Hour))
	require.NoError(t, c.Err())
	require.NoError(t, f.SetDeadline(time.Now()))
	requireDeadline(t, tsRecv(t, res, "WriteAt after the deadline"))
	c.main.checkStall(time.Now().Add(30 * time.Minute)) // within the grace
	require.NoError(t, c.Err())
	c.main.checkStall(time.Now().Add(2 * time.Hour))
	tsRecv(t, c.Done(), "Done")
	require.True(t, isStalled(c.Err()))
	require.ErrorIs(t, c.Err(), net.ErrClosed)
}

// Client.Close ends everything it can and never waits for a writer held in the
// transport, given up on or not.
func TestCloseDoesNotWaitForAHeldWrite(t *testing.T) {
	c, _, gate := gatedClient(t)
	c.main.stallGraceSet.Store(int64(50 * time.Millisecond)) // Close's wait
	f, err := c.Create(testCtx(t), "/f")
	require.NoError(t, err)
	gate.hold()
	res := tsGo(func() error { _, err := f.WriteAt(make([]byte, 64<<10), 0); return err })
	tsRecv(t, gate.entered, "the WRITE held in the gate")
	tsRecv(t, tsGo(func() error { return c.Close() }), "Close")
	err = tsRecv(t, res, "WriteAt after Close")
	require.True(t, errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed), "%v", err)
}
