package sftp

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// laneFunc is a laneSource made of a function that owns nothing: tests give a Client
// lanes to an in-process server with it.
type laneFunc func(ctx context.Context) (*conn, error)

func (f laneFunc) open(ctx context.Context) (*conn, error) { return f(ctx) }
func (laneFunc) close()                                    {}

// testDialer is a WithDialer function to a stripeEnv's sshd that keeps every
// connection it made, so a test can kill one or check that the Client closed them.
type testDialer struct {
	e    *stripeEnv
	addr string // "" means the sshd itself

	// started, when set, gets a token as each dial starts; gate, when set, holds
	// each dial until it is closed (or, with honourCtx, until the dial's ctx ends).
	started   chan struct{}
	gate      chan struct{}
	honourCtx bool

	mu    sync.Mutex
	conns []*ssh.Client
}

func (d *testDialer) dial(ctx context.Context) (*ssh.Client, error) {
	if d.started != nil {
		d.started <- struct{}{}
	}
	if d.gate != nil {
		if d.honourCtx {
			select {
			case <-d.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			<-d.gate
		}
	}
	addr := d.addr
	if addr == "" {
		addr = d.e.sshd.Addr
	}
	sc, err := d.e.sshd.DialVia(addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, sc)
		d.mu.Unlock()
	}
	return sc, err
}

func (d *testDialer) dialled() []*ssh.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.conns)
}

// dialerClient connects a Client with d as its dialer, striping on loopback. It
// returns the caller's SSH connection too, which cleanup closes after the Client.
func (e *stripeEnv) dialerClient(t *testing.T, d *testDialer, opts ...Option) (*Client, *ssh.Client) {
	t.Helper()
	addr := d.addr
	if addr == "" {
		addr = e.sshd.Addr
	}
	base, err := e.sshd.DialVia(addr)
	require.NoError(t, err)
	t.Cleanup(func() { base.Close() })
	opts = append([]Option{withStripeMinRTT(0), WithDialer(d.dial)}, opts...)
	c, err := NewClient(testCtx(t), base, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, base
}

// requireSSHClosed checks that sc has been closed: its Wait returns.
func requireSSHClosed(t *testing.T, sc *ssh.Client) {
	t.Helper()
	within(t, func() { _ = sc.Wait() })
}

// requireSSHOpen checks that sc still serves: the server answers a global request
// on it (sshd refuses this one, which is an answer).
func requireSSHOpen(t *testing.T, sc *ssh.Client) {
	t.Helper()
	_, _, err := sc.SendRequest("keepalive@openssh.com", true, nil)
	require.NoError(t, err, "the caller's SSH connection")
}

// settleLanes makes a round trip on every extra lane: one whose connection is gone
// fails doing so, so the next transfer does not count on it.
func settleLanes(t *testing.T, c *Client) {
	t.Helper()
	for _, cn := range c.chans.live()[1:] {
		r, err := cn.roundTrip(testCtx(t), func(id uint32) []byte { return appendString1(nil, sshfx.TypeStat, id, "/") })
		if err == nil {
			r.release()
		}
	}
}

// With sshd allowing one session per connection, every lane past the main channel
// needs a connection of its own: the transfers stripe over dialled connections, and
// Close closes those (not the caller's).
func TestDialerMaxSessionsOne(t *testing.T) {
	e := newStripeEnv(t, 1)
	ignore := goleak.IgnoreCurrent() // sshd's watcher stays until cleanup
	d := &testDialer{e: e}
	c, base := e.dialerClient(t, d, WithChannels(4))
	data := randBytes(stripeSize, 31)

	down := e.file(t, "down", data)
	f, got, err := download(t, c, down, 1, func() error { return e.awaitLanes(c, down, 4) })
	require.NoError(t, err)
	requireSameBytes(t, data, got)
	closeFile(t, f)
	e.requireStriped(t, down, 4, stripeSize, false)
	require.Len(t, d.dialled(), 3, "connections dialled: one for each lane past the main channel")

	up := e.file(t, "up", nil)
	f, n, err := upload(t, c, up, data, true, 1<<20, func() error { return e.awaitLanes(c, up, 4) })
	require.NoError(t, err)
	require.Equal(t, int64(stripeSize), n)
	closeFile(t, f)
	requireSameBytes(t, data, readLocal(t, up))
	e.requireStriped(t, up, 4, stripeSize, true)
	require.Len(t, d.dialled(), 3, "the upload reused the dialled connections")
	require.Equal(t, 4, e.sessions(t))

	require.NoError(t, c.Close())
	for _, sc := range d.dialled() {
		requireSSHClosed(t, sc)
	}
	requireSSHOpen(t, base)
	base.Close()
	goleak.VerifyNone(t, ignore)
}

// Lanes are spread over connections: withLanesPerConn(2) and six lanes make three
// connections, the caller's and two dialled, though the server would take more
// sessions on one.
func TestDialerSpreadsLanes(t *testing.T) {
	e := newStripeEnv(t, 0)
	d := &testDialer{e: e}
	c, _ := e.dialerClient(t, d, WithChannels(6), withLanesPerConn(2))
	data := randBytes(stripeSize, 34)
	down := e.file(t, "down", data)
	f, got, err := download(t, c, down, 1, func() error { return e.awaitLanes(c, down, 6) })
	require.NoError(t, err)
	requireSameBytes(t, data, got)
	closeFile(t, f)
	e.requireStriped(t, down, 6, stripeSize, false)
	require.Len(t, d.dialled(), 2, "connections dialled for six lanes at two each")
	require.Equal(t, 6, e.sessions(t))
}

// A dialled connection dies in the middle of a transfer. The transfer must not
// succeed with wrong bytes, and the next one dials a new connection for the lane.
func TestDialedConnectionDies(t *testing.T) {
	for _, dir := range []string{"download", "upload"} {
		t.Run(dir, func(t *testing.T) {
			e := newStripeEnv(t, 1)
			d := &testDialer{e: e}
			c, _ := e.dialerClient(t, d, WithChannels(4))
			data := randBytes(stripeSize, 35)
			name := e.file(t, "f", nil)
			if dir == "download" {
				writeLocal(t, name, data, 0o644)
			}
			kill := func() error {
				if err := e.awaitLanes(c, name, 4); err != nil {
					return err
				}
				return elsewhere(func() error { return d.dialled()[0].Close() })
			}
			if dir == "download" {
				f, got, err := download(t, c, name, 4<<20, kill)
				if err != nil {
					require.ErrorIs(t, err, net.ErrClosed)
					requireSameBytes(t, data[:len(got)], got)
				} else {
					requireSameBytes(t, data, got)
				}
				closeFile(t, f)
			} else {
				f, n, err := upload(t, c, name, data, true, 4<<20, kill)
				closeFile(t, f)
				onServer := readLocal(t, name)
				if err != nil {
					require.ErrorIs(t, err, net.ErrClosed)
					requireSameBytes(t, data[:n], onServer[:n])
				} else {
					require.Equal(t, int64(stripeSize), n)
					requireSameBytes(t, data, onServer)
				}
			}
			// The dead connection's sftp-server has gone with it.
			require.NoError(t, e.waitServerHandles(name, 0))
			settleLanes(t, c)
			require.Len(t, c.chans.live(), 3)

			writeLocal(t, name, data, 0o644)
			f, got, err := download(t, c, name, 1, func() error { return e.awaitLanes(c, name, 4) })
			require.NoError(t, err)
			requireSameBytes(t, data, got)
			closeFile(t, f)
			require.Len(t, d.dialled(), 4, "connections dialled: the dead one again")
			require.Len(t, c.chans.live(), 4)
		})
	}
}

// Close while the lanes are still being dialled: it returns without waiting for the
// dials, calls fail with net.ErrClosed, connections that are dialled after it are
// closed, and nothing is left running.
func TestCloseDuringDialRampUp(t *testing.T) {
	for _, honourCtx := range []bool{false, true} {
		t.Run(fmt.Sprintf("honourCtx=%v", honourCtx), func(t *testing.T) {
			e := newStripeEnv(t, 1)
			ignore := goleak.IgnoreCurrent() // sshd's watcher stays until cleanup
			d := &testDialer{e: e, started: make(chan struct{}, 8), gate: make(chan struct{}), honourCtx: honourCtx}
			c, base := e.dialerClient(t, d, WithChannels(4))
			name := e.file(t, "down", randBytes(stripeSize, 36))
			ctx := testCtx(t)
			f, err := c.Open(ctx, name)
			require.NoError(t, err)
			res := make(chan error, 1)
			go func() {
				_, err := f.WriteTo(io.Discard)
				res <- err
			}()
			await(t, d.started, 1, "the first dial")
			within(t, func() { require.NoError(t, c.Close()) })
			_, err = c.Stat(ctx, "/")
			require.ErrorIs(t, err, net.ErrClosed)
			if !honourCtx {
				close(d.gate) // the dials finish after Close
			}
			select {
			case err := <-res:
				require.Error(t, err)
			case <-time.After(testTimeout):
				t.Fatal("the transfer did not end after Close")
			}
			_ = f.Close()
			for _, sc := range d.dialled() {
				requireSSHClosed(t, sc)
			}
			requireSSHOpen(t, base)
			base.Close()
			goleak.VerifyNone(t, ignore)
		})
	}
}
