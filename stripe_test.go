package sftp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/sluicehq/sftp/internal/sshfx"
)

// Striping needs several SFTP channels on one SSH connection, so these tests run
// against a private sshd on loopback. Its sftp-servers log every handle they close
// (INFO), and /proc shows which files they hold open: the tests check from the
// server's side that a transfer really used several channels and left no handle open.

// stripeSize is large enough to stripe and a multiple of no request size.
const stripeSize = 24<<20 + 12345

type stripeEnv struct {
	sshd *sshdtest.SSHD
	dir  string // the files the tests transfer
	log  string // what every sftp-server of this sshd logs
}

func newStripeEnv(t *testing.T, maxSessions int) *stripeEnv {
	t.Helper()
	// Made before the sshd, so they are removed after it has stopped.
	e := &stripeEnv{dir: shmDir(t), log: filepath.Join(t.TempDir(), "sftp-server.log")}
	e.sshd = sshdtest.NewSSHD(t, sshdtest.SSHDOptions{
		MaxSessions:    maxSessions,
		SFTPServerArgs: []string{"-l", "INFO"},
		SFTPServerLog:  e.log,
	})
	return e
}

// shmDir keeps the test data in memory when the machine has /dev/shm: the tests move
// a few hundred MiB, and a disk would only add noise.
func shmDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return serverDir(t)
	}
	d, err := os.MkdirTemp("/dev/shm", "sluice-stripe-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// client connects a Client to the sshd (through addr when it is set, e.g. a delay
// proxy), with its first data channel open. The returned function closes the Client
// and then its SSH connection; it is idempotent and also runs at cleanup.
func (e *stripeEnv) client(t *testing.T, addr string, opts ...Option) (*Client, func()) {
	t.Helper()
	c, closeAll := e.newClient(t, addr, opts...)
	// Files then go on a data channel from the first, as they do on a long link once
	// its first data channel is open (see controllane.go).
	readyControlLane(t, c)
	return c, closeAll
}

// newClient is client without waiting for the first data channel.
func (e *stripeEnv) newClient(t *testing.T, addr string, opts ...Option) (*Client, func()) {
	t.Helper()
	if addr == "" {
		addr = e.sshd.Addr
	}
	sc, err := e.sshd.DialVia(addr)
	require.NoError(t, err)
	// Loopback has no latency, so the client would (rightly) not stripe: these
	// tests are about how striping behaves, so they lift the latency threshold.
	opts = append([]Option{withStripeMinRTT(0)}, opts...)
	c, err := NewClient(testCtx(t), sc, opts...)
	if err != nil {
		sc.Close()
		t.Fatalf("NewClient: %v", err)
	}
	// The tests below count on the lanes WithChannels allows, as a fixed number: the
	// Client is told its transfers settled there (lanerule_test.go tests the rule).
	pinLanes(c, c.opts.channels)
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Client.Close: %v", err)
			}
			sc.Close()
		})
	}
	t.Cleanup(closeAll)
	return c, closeAll
}

// readyControlLane opens c's first data channel, as the first Open on a long link
// does in the background, and waits for it.
func readyControlLane(t *testing.T, c *Client) {
	t.Helper()
	require.True(t, c.stripes(), "the link is not one the control lane is for")
	require.Equal(t, c.main, c.fileChannel(), "a file went on a data channel before one was open")
	awaitControlLane(t, c)
	require.Len(t, c.laneChannels(), 1, "data channels")
}

// awaitControlLane waits for the data channel the control lane is opening, if any.
func awaitControlLane(t *testing.T, c *Client) {
	t.Helper()
	c.ctl.mu.Lock()
	opening := c.ctl.opening
	c.ctl.mu.Unlock()
	if opening != nil {
		within(t, func() { <-opening })
	}
}

// file returns the path of name in the data directory, written with data unless data
// is nil.
func (e *stripeEnv) file(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(e.dir, name)
	if data != nil {
		writeLocal(t, p, data, 0o644)
	}
	return p
}

// serverHandles counts the descriptors the processes under sshd hold on name: one per
// open handle, whichever channel's sftp-server it belongs to.
func (e *stripeEnv) serverHandles(name string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	children := map[int][]int{}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// The command name is in parentheses and may hold anything: fields follow the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var pids []int
	for queue := children[e.sshd.Pid()]; len(queue) > 0; queue = queue[1:] {
		pids = append(pids, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return openFDs(pids, name)
}

// openFDs counts the descriptors the processes pids hold on name: one per handle an
// sftp-server has open on it.
func openFDs(pids []int, name string) int {
	n := 0
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == name {
				n++
			}
		}
	}
	return n
}

// waitServerHandles waits until the server holds want handles on name.
func (e *stripeEnv) waitServerHandles(name string, want int) error {
	return pollHandles(e.serverHandles, name, want)
}

// pollHandles waits until handles(name), what sftp-server processes hold on name, is
// want. The servers are other processes, so there is nothing to wait on but their
// state: it is polled, within a deadline.
func pollHandles(handles func(name string) int, name string, want int) error {
	deadline := time.Now().Add(testTimeout)
	for {
		got := handles(name)
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the servers hold %d handles on %s after %v, want %d", got, name, testTimeout, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// awaitLanes holds a transfer (it is called from the transfer's reader or writer) until
// its sibling handles are open on the server, then lets their HANDLE replies arrive
// (roundTripLanes). What follows in the transfer runs over all lanes.
func (e *stripeEnv) awaitLanes(c *Client, name string, want int) error {
	if err := e.waitServerHandles(name, want); err != nil {
		return err
	}
	return roundTripLanes(c)
}

// roundTripLanes makes a round trip on every live channel but the main one, and
// returns the first error. Replies on a channel come in order, so every reply the
// server sent on a lane before has then reached the Client; and a lane whose
// connection is gone fails, so the Client drops it.
func roundTripLanes(c *Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var first error
	for _, cn := range c.chans.live()[1:] {
		r, err := cn.roundTrip(ctx, func(id uint32) []byte { return appendString1(nil, sshfx.TypeStat, id, "/") })
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		r.release()
	}
	return first
}

var closeLine = regexp.MustCompile(`close "(.*)" bytes read (\d+) written (\d+)`)

// handleStat is what sftp-server logs about a handle when it is closed.
type handleStat struct{ read, written int64 }

// closedHandles returns the handles on name the server has closed, from its log.
func (e *stripeEnv) closedHandles(t *testing.T, name string) []handleStat {
	t.Helper()
	var out []handleStat
	for _, line := range strings.Split(e.readLog(t), "\n") {
		m := closeLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		r, err1 := strconv.ParseInt(m[2], 10, 64)
		w, err2 := strconv.ParseInt(m[3], 10, 64)
		require.NoError(t, errors.Join(err1, err2), line)
		out = append(out, handleStat{r, w})
	}
	return out
}

// opened counts the handles the server has opened on name, from its log.
func (e *stripeEnv) opened(t *testing.T, name string) int {
	t.Helper()
	return strings.Count(e.readLog(t), `open "`+name+`" flags`)
}

// sessions counts the SFTP sessions (channels) the server has started.
func (e *stripeEnv) sessions(t *testing.T) int {
	t.Helper()
	return strings.Count(e.readLog(t), "session opened for local user")
}

func (e *stripeEnv) readLog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// requireStriped checks from the server's log that a transfer of total bytes on name
// used handles (all closed by now) and that more than one of them moved data.
func (e *stripeEnv) requireStriped(t *testing.T, name string, handles int, total int64, upload bool) {
	t.Helper()
	hs := e.closedHandles(t, name)
	require.Len(t, hs, handles, "handles closed on %s", name)
	require.Equal(t, handles, e.opened(t, name), "handles opened on %s", name)
	var sum int64
	busy := 0
	for _, h := range hs {
		moved, other := h.read, h.written
		if upload {
			moved, other = other, moved
		}
		require.Zero(t, other)
		sum += moved
		if moved > 0 {
			busy++
		}
	}
	require.Equal(t, total, sum, "bytes the server moved for %s", name)
	require.GreaterOrEqual(t, busy, 2, "handles that moved data: %+v", hs)
}

// tripWriter passes writes to w and calls trip once, when at least n bytes have gone
// through; trip's error fails that Write. It lets a test act at a point of a transfer
// defined by progress rather than by time.
type tripWriter struct {
	w    io.Writer
	n    int64
	done int64
	trip func() error
}

func (tw *tripWriter) Write(p []byte) (int, error) {
	k, err := tw.w.Write(p)
	tw.done += int64(k)
	if err == nil && tw.trip != nil && tw.done >= tw.n {
		trip := tw.trip
		tw.trip = nil
		err = trip()
	}
	return k, err
}

// tripReader is tripWriter for a transfer's source. It has no size that ReadFrom could
// see: wrap it in io.LimitReader to announce one.
type tripReader struct {
	r      io.Reader
	n      int64
	done   int64
	trip   func() error
	before int64 // what the source had yielded before the Read that tripped
}

func (tr *tripReader) Read(p []byte) (int, error) {
	k, err := tr.r.Read(p)
	if err == nil && tr.trip != nil && tr.done+int64(k) >= tr.n {
		trip := tr.trip
		tr.trip, tr.before = nil, tr.done
		err = trip()
	}
	tr.done += int64(k)
	return k, err
}

// download reads name whole with File.WriteTo into a buffer, its writer tripping after n
// bytes.
func download(t *testing.T, c *Client, name string, n int64, trip func() error) (*File, []byte, error) {
	t.Helper()
	f, err := c.Open(testCtx(t), name)
	require.NoError(t, err)
	var buf bytes.Buffer
	var got int64
	within(t, func() { got, err = f.WriteTo(&tripWriter{w: &buf, n: n, trip: trip}) })
	require.Equal(t, int64(buf.Len()), got, "WriteTo's count against the bytes it wrote")
	return f, buf.Bytes(), err
}

// upload writes data to name (created) with File.ReadFrom from a source that trips
// after n bytes; sized says whether ReadFrom can tell the source's size.
func upload(t *testing.T, c *Client, name string, data []byte, sized bool, n int64, trip func() error) (*File, int64, error) {
	t.Helper()
	f, err := c.Create(testCtx(t), name)
	require.NoError(t, err)
	var src io.Reader = &tripReader{r: bytes.NewReader(data), n: n, trip: trip}
	if sized {
		src = io.LimitReader(src, int64(len(data)))
	}
	var got int64
	within(t, func() { got, err = f.ReadFrom(src) })
	return f, got, err
}

// downloadWhole downloads name as download does, its writer tripping after the first
// byte, and checks that the transfer and the File's close succeed and that it
// delivered want.
func downloadWhole(t *testing.T, c *Client, name string, want []byte, trip func() error) {
	t.Helper()
	f, got, err := download(t, c, name, 1, trip)
	require.NoError(t, err)
	requireSameBytes(t, want, got)
	closeFile(t, f)
}

// uploadWhole uploads data to name from a sized source as upload does, tripping after
// the first MiB, and checks that the transfer and the File's close succeed and that
// the server's file then holds data.
func uploadWhole(t *testing.T, c *Client, name string, data []byte, trip func() error) {
	t.Helper()
	f, n, err := upload(t, c, name, data, true, 1<<20, trip)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	closeFile(t, f)
	requireSameBytes(t, data, readLocal(t, name))
}

func requireSameBytes(t *testing.T, want, got []byte) {
	t.Helper()
	require.Equal(t, len(want), len(got), "length")
	if bytes.Equal(want, got) {
		return
	}
	if i := firstDiff(want, got); i >= 0 {
		t.Fatalf("contents differ from byte %d of %d", i, len(want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func closeFile(t *testing.T, f *File) {
	t.Helper()
	var err error
	within(t, func() { err = f.Close() })
	require.NoError(t, err)
}

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

func TestStripeReusesChannels(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 4)
	c, _ := e.client(t, "", WithChannels(4))

	down := e.file(t, "down", data)
	downloadWhole(t, c, down, data, func() error { return e.awaitLanes(c, down, 4) })
	require.Len(t, c.chans.live(), 5)
	require.Equal(t, 5, e.sessions(t))

	up := e.file(t, "up", nil)
	uploadWhole(t, c, up, data, func() error { return e.awaitLanes(c, up, 4) })
	e.requireStriped(t, up, 4, stripeSize, true)
	require.Len(t, c.chans.live(), 5)
	require.Equal(t, 5, e.sessions(t), "the second transfer opened channels")
}

func TestStripeMaxSessions(t *testing.T) {
	e := newStripeEnv(t, 2)
	data := randBytes(stripeSize, 5)
	c, _ := e.client(t, "", WithChannels(8))

	down := e.file(t, "down", data)
	downloadWhole(t, c, down, data, nil)
	require.LessOrEqual(t, len(c.chans.live()), 2)

	up := e.file(t, "up", nil)
	uploadWhole(t, c, up, data, nil)
	require.LessOrEqual(t, len(c.chans.live()), 2)
	require.LessOrEqual(t, e.sessions(t), 2)
	require.True(t, c.chans.isRefused(), "the refused channels were not noted")
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
// packet written to it once armed: that Write fails, as on a connection that died,
// with the channel's other requests in flight. Arming it once the lanes are in (from
// the transfer's trip) makes sure the lane dies mid-transfer, not before the test
// has seen it open.
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
	left int // the conn writes one packet per Write, one at a time
}

func (kw *laneKiller) Write(p []byte) (int, error) {
	if !kw.ck.armed.Load() {
		return kw.WriteCloser.Write(p)
	}
	if kw.left--; kw.left <= 0 {
		kw.ck.killed.Store(true)
		return 0, errors.New("channel killed by the test")
	}
	return kw.WriteCloser.Write(p)
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
