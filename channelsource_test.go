package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
)

// channelSourceFunc is a channelSource made of a function that owns nothing: tests
// give a Client data channels to an in-process server with it.
type channelSourceFunc func(ctx context.Context) (*conn, error)

func (f channelSourceFunc) open(ctx context.Context) (*conn, error) { return f(ctx) }
func (channelSourceFunc) close()                                    {}

// testDialer is a WithDialer function to a stripeEnv's sshd that keeps every
// connection it made, so a test can kill one or check that the Client closed them.
type testDialer struct {
	e    *stripeEnv
	addr string // "" means the sshd itself

	// started, when set, gets a token as each dial starts, and finished as each
	// ends; gate, when set, holds each dial until it is closed (or, with honourCtx,
	// until the dial's ctx ends).
	started   chan struct{}
	finished  chan struct{}
	gate      chan struct{}
	honourCtx bool

	mu    sync.Mutex
	conns []*ssh.Client
}

func (d *testDialer) dial(ctx context.Context) (*ssh.Client, error) {
	if d.started != nil {
		d.started <- struct{}{}
	}
	if d.finished != nil {
		defer func() { d.finished <- struct{}{} }()
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
	pinLanes(c, c.opts.channels) // these tests are about where lanes come from, not how many
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
	// The first file opens on the main channel (the first data channel is only being
	// opened), and stripes over the four data channels: five handles.
	downloadWhole(t, c, down, data, func() error { return e.awaitLanes(c, down, 5) })
	e.requireStriped(t, down, 5, stripeSize, false)
	require.Len(t, d.dialled(), 4, "connections dialled: one for each data channel")

	up := e.file(t, "up", nil)
	uploadWhole(t, c, up, data, func() error { return e.awaitLanes(c, up, 4) })
	e.requireStriped(t, up, 4, stripeSize, true)
	require.Len(t, d.dialled(), 4, "the upload reused the dialled connections")
	require.Equal(t, 5, e.sessions(t))

	require.NoError(t, c.Close())
	for _, sc := range d.dialled() {
		requireSSHClosed(t, sc)
	}
	requireSSHOpen(t, base)
	base.Close()
	goleak.VerifyNone(t, ignore)
}

// Lanes are spread over connections: withChannelsPerConn(2) and six lanes make three
// connections, the caller's and two dialled, though the server would take more
// sessions on one.
func TestDialerSpreadsLanes(t *testing.T) {
	e := newStripeEnv(t, 0)
	d := &testDialer{e: e}
	c, _ := e.dialerClient(t, d, WithChannels(6), withChannelsPerConn(2))
	data := randBytes(stripeSize, 34)
	down := e.file(t, "down", data)
	// The file opens on the main channel and stripes over six data channels: seven
	// sessions, two on the caller's connection and the rest on three dialled ones.
	downloadWhole(t, c, down, data, func() error { return e.awaitLanes(c, down, 7) })
	e.requireStriped(t, down, 7, stripeSize, false)
	require.Len(t, d.dialled(), 3, "connections dialled for seven channels at two each")
	require.Equal(t, 7, e.sessions(t))
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
				if err := e.awaitLanes(c, name, 5); err != nil {
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
			_ = roundTripLanes(c) // the lane on the dead connection fails, and is dropped
			require.Len(t, c.chans.live(), 4, "the main channel and three data channels")

			writeLocal(t, name, data, 0o644)
			downloadWhole(t, c, name, data, func() error { return e.awaitLanes(c, name, 4) })
			require.Len(t, d.dialled(), 5, "connections dialled: the dead one again")
			require.Len(t, c.chans.live(), 5)
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
			d := &testDialer{e: e, started: make(chan struct{}, 8), finished: make(chan struct{}, 8),
				gate: make(chan struct{}), honourCtx: honourCtx}
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
			// The transfer has ended, and with it the lane opener that dials: every
			// dial that will ever start has. The Client does not wait for a dial it
			// gave up on (waitWithin): wait for each here, so that what it made is
			// in dialled and its goroutines have ended.
			await(t, d.finished, 1+len(d.started), "the dials to end")
			for _, sc := range d.dialled() {
				requireSSHClosed(t, sc)
			}
			requireSSHOpen(t, base)
			base.Close()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// pipeServers starts sftp-server processes over pipes for a pipe Client and its
// WithPipeOpener, each logging the handles it closes, and reaps them at cleanup.
type pipeServers struct {
	t    *testing.T
	dir  string
	logs string // where their logs go

	mu      sync.Mutex
	started int // servers being started or running: names their logs
	procs   []*pipeServer
}

type pipeServer struct {
	cmd    *exec.Cmd
	log    string // its stderr: a file, which it writes before it replies
	exited chan struct{}
}

func newPipeServers(t *testing.T, dir string, logs string) *pipeServers {
	sftpServerCmd(t, dir) // skips when it is not installed
	ps := &pipeServers{t: t, dir: dir, logs: logs}
	// Registered before any Client's Close, so it runs after it: each server exits
	// once the Client has closed its input.
	t.Cleanup(func() {
		for _, p := range ps.all() {
			select {
			case <-p.exited:
			case <-time.After(testTimeout):
				_ = p.cmd.Process.Kill()
				<-p.exited
				t.Errorf("sftp-server %d did not exit after the Client closed its input", p.cmd.Process.Pid)
			}
		}
	})
	return ps
}

// open is a WithPipeOpener function.
func (ps *pipeServers) open(context.Context) (io.Reader, io.WriteCloser, error) {
	ps.mu.Lock()
	ps.started++
	p := &pipeServer{log: filepath.Join(ps.logs, fmt.Sprintf("server-%d.log", ps.started)), exited: make(chan struct{})}
	ps.mu.Unlock()
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close() // the child has its own copy
	p.cmd = sftpServerCmd(ps.t, ps.dir, "-l", "INFO")
	p.cmd.Stderr = logf
	w, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	r, err := p.cmd.StdoutPipe()
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	ps.mu.Lock()
	ps.procs = append(ps.procs, p)
	ps.mu.Unlock()
	return r, w, nil
}

func (ps *pipeServers) all() []*pipeServer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.procs)
}

// handles counts the handles the servers hold on name.
func (ps *pipeServers) handles(name string) int {
	var pids []int
	for _, p := range ps.all() {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return openFDs(pids, name)
}

func (ps *pipeServers) waitHandles(name string, want int) error {
	return pollHandles(ps.handles, name, want)
}

// awaitLanes is stripeEnv.awaitLanes for pipe servers.
func (ps *pipeServers) awaitLanes(c *Client, name string, want int) error {
	if err := ps.waitHandles(name, want); err != nil {
		return err
	}
	return roundTripLanes(c)
}

// moved sums what each server logged moving for name, as read (download) or written.
func (ps *pipeServers) moved(t *testing.T, name string, upload bool) []int64 {
	t.Helper()
	var out []int64
	for _, p := range ps.all() {
		var sum int64
		b, err := os.ReadFile(p.log)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			m := closeLine.FindStringSubmatch(line)
			if m == nil || m[1] != name {
				continue
			}
			k := m[2]
			if upload {
				k = m[3]
			}
			v, err := strconv.ParseInt(k, 10, 64)
			require.NoError(t, err, line)
			sum += v
		}
		out = append(out, sum)
	}
	return out
}

// requireSpread checks that the servers moved total bytes for name between them, and
// that at least two of them moved some.
func (ps *pipeServers) requireSpread(t *testing.T, name string, total int64, upload bool) {
	t.Helper()
	var sum int64
	busy := 0
	moved := ps.moved(t, name, upload)
	for _, n := range moved {
		sum += n
		if n > 0 {
			busy++
		}
	}
	if upload {
		sum -= requireNonces(t, sum-total, -1)
	}
	require.Equal(t, total, sum, "bytes the servers moved for %s: %v", name, moved)
	require.GreaterOrEqual(t, busy, 2, "servers that moved data for %s: %v", name, moved)
}

// A pipe Client with a pipe opener stripes: each lane is another sftp-server process,
// and the transfers come out whole. Close closes every pipe (the servers exit).
func TestPipeOpenerStripes(t *testing.T) {
	skipUnlessFDsReadable(t)
	dir := shmDir(t)
	ps := newPipeServers(t, dir, t.TempDir())
	ctx := testCtx(t)
	r, w, err := ps.open(ctx)
	require.NoError(t, err)
	c, err := NewClientPipe(ctx, r, w, WithPipeOpener(ps.open), WithChannels(4), withStripeMinRTT(0))
	require.NoError(t, err)
	pinLanes(c, 4)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	data := randBytes(stripeSize, 37)

	down := filepath.Join(dir, "down")
	writeLocal(t, down, data, 0o644)
	// The first file opens on the main pipe (the first data pipe is only being opened)
	// and stripes over four data pipes: five handles, five servers.
	downloadWhole(t, c, down, data, func() error { return ps.awaitLanes(c, down, 5) })
	require.NoError(t, ps.waitHandles(down, 0))
	require.Len(t, ps.all(), 5, "server processes: the main one and one per data lane")
	ps.requireSpread(t, down, stripeSize, false)

	up := filepath.Join(dir, "up")
	uploadWhole(t, c, up, data, func() error { return ps.awaitLanes(c, up, 4) })
	require.NoError(t, ps.waitHandles(up, 0))
	ps.requireSpread(t, up, stripeSize, true)
	require.Len(t, ps.all(), 5, "the upload reused the lanes")

	require.NoError(t, c.Close())
	for _, p := range ps.all() {
		select {
		case <-p.exited:
		case <-time.After(testTimeout):
			t.Fatalf("sftp-server %d still runs after Close", p.cmd.Process.Pid)
		}
	}
}

// Without a pipe opener a pipe Client never opens another lane, however large the
// transfer.
func TestPipeWithoutOpenerDoesNotStripe(t *testing.T) {
	dir := shmDir(t)
	c := newServerClient(t, dir)
	c.opts.stripeMinRTT = 0
	require.False(t, c.stripes())
	data := randBytes(stripeSize, 38)
	name := filepath.Join(dir, "down")
	writeLocal(t, name, data, 0o644)
	got, err := c.ReadFile(testCtx(t), name)
	require.NoError(t, err)
	requireSameBytes(t, data, got)
	require.Len(t, c.chans.live(), 1)
}

// sshd allowing two sessions per connection: the Client learns the limit from the
// refusals and puts the other lanes on dialled connections, all six lanes working.
func TestDialerMaxSessionsTwo(t *testing.T) {
	e := newStripeEnv(t, 2)
	d := &testDialer{e: e}
	c, _ := e.dialerClient(t, d, WithChannels(6))
	data := randBytes(stripeSize, 39)
	down := e.file(t, "down", data)
	// The file opens on the main channel and stripes over six data channels.
	downloadWhole(t, c, down, data, func() error { return e.awaitLanes(c, down, 7) })
	e.requireStriped(t, down, 7, stripeSize, false)
	require.GreaterOrEqual(t, len(d.dialled()), 3, "connections dialled for five channels at two a connection")
	require.False(t, c.chans.isRefused(), "refused sessions ended striping, though a dialer was given")
}

// Close while a pipe opener is still starting lanes: Close cancels the opener's ctx and
// returns, whether the opener honours its ctx or not (a pair it delivers later is
// closed); the transfer ends with an error, and nothing is left running.
func TestCloseDuringPipeRampUp(t *testing.T) {
	for _, honourCtx := range []bool{true, false} {
		t.Run(fmt.Sprintf("honourCtx=%v", honourCtx), func(t *testing.T) {
			dir := shmDir(t)
			ps := newPipeServers(t, dir, t.TempDir())
			ctx := testCtx(t)
			r, w, err := ps.open(ctx)
			require.NoError(t, err)
			started := make(chan struct{}, 8)
			gate := make(chan struct{})
			// What an opener that ignores its ctx delivers late: the Client must close
			// it, which the test sees as EOF at the far end of the pipe.
			farEnd, late := io.Pipe()
			blocked := func(ctx context.Context) (io.Reader, io.WriteCloser, error) {
				started <- struct{}{}
				if honourCtx {
					<-ctx.Done()
					return nil, nil, ctx.Err()
				}
				<-gate
				return strings.NewReader(""), late, nil
			}
			ignore := goleak.IgnoreCurrent()
			c, err := NewClientPipe(ctx, r, w, WithPipeOpener(blocked), WithChannels(4), withStripeMinRTT(0))
			require.NoError(t, err)
			pinLanes(c, 4)
			name := filepath.Join(dir, "down")
			writeLocal(t, name, randBytes(stripeSize, 40), 0o644)
			f, err := c.Open(ctx, name)
			require.NoError(t, err)
			res := make(chan error, 1)
			go func() {
				_, err := f.WriteTo(io.Discard)
				res <- err
			}()
			await(t, started, 1, "the first pipe opening")
			within(t, func() { require.NoError(t, c.Close()) })
			_, err = c.Stat(ctx, "/")
			require.ErrorIs(t, err, net.ErrClosed)
			select {
			case err := <-res:
				require.Error(t, err)
			case <-time.After(testTimeout):
				t.Fatal("the transfer did not end after Close")
			}
			_ = f.Close()
			if !honourCtx {
				close(gate)
				within(t, func() {
					_, err := farEnd.Read(make([]byte, 1))
					require.ErrorIs(t, err, io.EOF, "the pair delivered after Close is closed")
				})
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// A dialer that returns a connection together with an error: the lane fails with the
// error, and the Client closes the connection it will not use.
func TestDialerErrorWithConnection(t *testing.T) {
	e := newStripeEnv(t, 1)
	refused := errors.New("the dialer's own failure")
	var (
		mu     sync.Mutex
		dialed []*ssh.Client
	)
	dial := func(context.Context) (*ssh.Client, error) {
		sc, err := e.sshd.DialVia(e.sshd.Addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dialed = append(dialed, sc)
		mu.Unlock()
		return sc, refused
	}
	base, err := e.sshd.DialVia(e.sshd.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { base.Close() })
	c, err := NewClient(testCtx(t), base, WithDialer(dial), WithChannels(2))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })

	// sshd allows one session, the main channel's: the lane needs a dialled connection.
	_, err = c.source.open(testCtx(t))
	require.ErrorIs(t, err, refused)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, dialed, 1)
	requireSSHClosed(t, dialed[0])
}
