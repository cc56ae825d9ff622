//go:build linux

package sftp

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The main channel rule (filechannel.go), against OpenSSH's sshd and sftp-server on
// loopback with the striping threshold lifted, as in lanes_test.go: which channel
// carries what is watched per channel (channelTaps) and from the server's side.

// TestFileChannelPlacement: on a long link the first Open goes on the main channel
// (no Open waits for a channel to be set up) and starts the first data channel; once
// it is open, files go on data channels, taking turns among idle ones. On a short link
// everything stays on the main channel and no channel is opened.
func TestFileChannelPlacement(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 31)
	name := e.file(t, "f", data)
	ctx := testCtx(t)

	t.Run("long", func(t *testing.T) {
		c, _ := e.newClient(t, "", WithChannels(4))
		first, err := c.Open(ctx, name)
		require.NoError(t, err)
		require.Same(t, c.main, first.cn, "the first file, before any data channel was open")
		awaitDataChannel(t, c)
		require.Len(t, c.dataChannels(), 1, "data channels")
		second, err := c.Open(ctx, name)
		require.NoError(t, err)
		require.Same(t, c.dataChannels()[0], second.cn, "the file opened once the data channel was")
		closeFile(t, first)
		closeFile(t, second)

		// A striped transfer opens the other data channels; idle files then spread
		// over all four.
		downloadWhole(t, c, name, data, func() error { return e.awaitLanes(c, name, 4) })
		require.Len(t, c.dataChannels(), 4, "data channels")
		on := map[*conn]bool{}
		for range 4 {
			f, err := c.Open(ctx, name)
			require.NoError(t, err)
			require.NotSame(t, c.main, f.cn)
			on[f.cn] = true
			closeFile(t, f)
		}
		require.Len(t, on, 4, "data channels four idle files went on")
	})

	t.Run("short", func(t *testing.T) {
		c, _ := e.newClient(t, "", WithChannels(4), withStripeMinRTT(time.Hour))
		got, err := c.ReadFile(ctx, name)
		require.NoError(t, err)
		requireSameBytes(t, data, got)
		f, err := c.Open(ctx, name)
		require.NoError(t, err)
		require.Same(t, c.main, f.cn)
		closeFile(t, f)
		awaitDataChannel(t, c)
		require.Len(t, c.chans.live(), 1, "channels on a link too short to stripe")
	})
}

// TestFileChannelKeepsBulkOffMain: once the first data channel is open, no transfer's
// OPEN, READ or WRITE crosses the main channel, striped or not, whichever call moves
// it, while the metadata calls do; and the striped ones still use several channels.
func TestFileChannelKeepsBulkOffMain(t *testing.T) {
	e := newStripeEnv(t, 0)
	taps := &channelTaps{}
	c, _ := e.client(t, "", WithChannels(4), withStreamWrap(taps.wrap))
	ctx := testCtx(t)
	big, small := randBytes(stripeSize, 32), randBytes(100<<10+3, 33)
	bigName, smallName := e.file(t, "big", big), e.file(t, "small", small)
	local := t.TempDir()
	writeLocal(t, filepath.Join(local, "up-small"), small, 0o644)
	writeLocal(t, filepath.Join(local, "up-big"), big, 0o644)

	// Striped both ways, over four data channels (the helpers hold the transfer
	// until its lanes are open, so it cannot end on fewer).
	downloadWhole(t, c, bigName, big, func() error { return e.awaitLanes(c, bigName, 4) })
	upName := e.file(t, "up-big", nil)
	uploadWhole(t, c, upName, big, func() error { return e.awaitLanes(c, upName, 4) })
	// And the calls that open files for the caller, striped or not.
	got, err := c.ReadFile(ctx, bigName)
	require.NoError(t, err)
	requireSameBytes(t, big, got)
	require.NoError(t, c.WriteFile(ctx, e.file(t, "wf-big", nil), big, 0o644))
	require.NoError(t, c.Get(ctx, smallName, filepath.Join(local, "got-small")))
	require.NoError(t, c.Get(ctx, bigName, filepath.Join(local, "got-big")))
	require.NoError(t, c.Put(ctx, filepath.Join(local, "up-small"), e.file(t, "put-small", nil)))
	require.NoError(t, c.Put(ctx, filepath.Join(local, "up-big"), e.file(t, "put-big", nil)))
	f, err := c.OpenFile(ctx, smallName, os.O_RDWR, 0)
	require.NoError(t, err)
	p := make([]byte, len(small))
	var n int
	within(t, func() { n, err = f.ReadAt(p, 0) })
	require.NoError(t, err)
	require.Equal(t, len(small), n)
	within(t, func() { _, err = f.WriteAt(small[:10], 0) })
	require.NoError(t, err)
	closeFile(t, f)
	_, err = c.Stat(ctx, bigName)
	require.NoError(t, err)
	require.NoError(t, c.Rename(ctx, e.file(t, "put-small", nil), e.file(t, "renamed", nil)))
	_, err = c.ReadDir(ctx, e.dir)
	require.NoError(t, err)

	requireSameBytes(t, small, readLocal(t, filepath.Join(local, "got-small")))
	requireSameBytes(t, big, readLocal(t, filepath.Join(local, "got-big")))
	requireSameBytes(t, big, readLocal(t, e.file(t, "put-big", nil)))
	requireSameBytes(t, small, readLocal(t, e.file(t, "renamed", nil)))

	taps.mu.Lock()
	all := slices.Clone(taps.taps)
	taps.mu.Unlock()
	// Channel opens a transfer gave up when it ended are tapped too: the main channel
	// is the first tapped all the same.
	require.Same(t, c.main, c.chans.live()[0])
	onMain := all[0].requests()
	for _, typ := range []sshfx.PacketType{sshfx.TypeOpen, sshfx.TypeRead, sshfx.TypeWrite, sshfx.TypeFstat} {
		require.NotContains(t, onMain, typ, "a file's request on the main channel")
	}
	for _, typ := range []sshfx.PacketType{sshfx.TypeStat, sshfx.TypeOpendir, sshfx.TypeReaddir} {
		require.Contains(t, onMain, typ, "metadata calls go on the main channel")
	}
	writes, datas := all[0].seen()
	require.Empty(t, writes, "WRITE payload on the main channel")
	require.Empty(t, datas, "DATA payload on the main channel")
	busyDown, down := taps.busy(false)
	busyUp, up := taps.busy(true)
	require.GreaterOrEqual(t, busyDown, 2, "channels that carried DATA")
	require.GreaterOrEqual(t, busyUp, 2, "channels that carried WRITEs")
	// Beyond the files: the nonces striped uploads write, and read back through their
	// siblings (reopen.go).
	requireProofBytes(t, down-(3*len(big)+2*len(small)), "DATA bytes over the data channels")
	requireNonces(t, int64(up-(3*len(big)+len(small)+10)), -1)
}

// holdReader stands between a channel and the Client's reader: once hold is called,
// the next Read waits until release, as a client too busy to drain the channel would.
// The server's replies then fill the channel's window and stop there.
type holdReader struct {
	r       io.Reader
	gate    atomic.Pointer[chan struct{}]
	passed  atomic.Int64  // bytes handed to the Client
	waiting chan struct{} // closed when a Read first waits at the gate
	once    sync.Once
	waitOne sync.Once
}

func (h *holdReader) Read(p []byte) (int, error) {
	if g := h.gate.Load(); g != nil {
		h.waitOne.Do(func() { close(h.waiting) })
		<-*g
	}
	n, err := h.r.Read(p)
	h.passed.Add(int64(n))
	return n, err
}

func (h *holdReader) hold() {
	g := make(chan struct{})
	h.gate.Store(&g)
}

func (h *holdReader) release() {
	h.once.Do(func() {
		if g := h.gate.Load(); g != nil {
			close(*g)
		}
	})
}

// holdReaders gives each channel of a Client a holdReader, in the order they open.
type holdReaders struct {
	mu  sync.Mutex
	all []*holdReader
}

func (hs *holdReaders) wrap(r io.Reader, w io.WriteCloser) (io.Reader, io.WriteCloser) {
	h := &holdReader{r: r, waiting: make(chan struct{})}
	hs.mu.Lock()
	hs.all = append(hs.all, h)
	hs.mu.Unlock()
	return h, w
}

func (hs *holdReaders) get(i int) *holdReader {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.all[i]
}

// TestFileChannelStatWhileDataChannelStuck: a transfer's channel whose window is full
// (the client is not draining it) holds up nothing on the main channel: Stat, Rename
// and a new file's open are answered, and the busy channel makes the next file's open
// ask for another data channel, where a file is read while the first one is stuck.
func TestFileChannelStatWhileDataChannelStuck(t *testing.T) {
	e := newStripeEnv(t, 0)
	holds := &holdReaders{}
	c, _ := e.client(t, "", WithChannels(4), withStreamWrap(holds.wrap))
	ctx := testCtx(t)
	// Under stripeMin, so one lane, which asks for 12 READs (readLaneCap), 3 MiB: more
	// than the window holds.
	data := randBytes(6<<20+5, 34)
	name := e.file(t, "stuck", data)
	other := randBytes(300<<10, 35)
	otherName := e.file(t, "other", other)

	f, err := c.Open(ctx, name)
	require.NoError(t, err)
	stuck := f.cn
	require.Same(t, c.dataChannels()[0], stuck)
	// The channels open in order: main, then the first data channel.
	held := holds.get(1)
	held.hold()
	t.Cleanup(held.release) // before the Client's Close, which waits for its reader
	buf := make([]byte, len(data))
	res := make(chan error, 1)
	go func() {
		n, err := f.ReadAt(buf, 0)
		if err == nil && n != len(buf) {
			err = fmt.Errorf("ReadAt read %d bytes of %d", n, len(buf))
		}
		res <- err
	}()
	within(t, func() { <-held.waiting })
	// The server has written a window's worth more than the client took, less what
	// x/crypto has yet to grant back (it sends a window adjust once 96 KiB are owed):
	// the channel is full, the READs answered on the server's side but not the
	// client's.
	require.NoError(t, e.awaitServerWrote(name, held.passed.Load()+channelWindow-128<<10))

	_, err = c.Stat(ctx, name)
	require.NoError(t, err, "Stat while a data channel is full")
	require.NoError(t, c.Rename(ctx, otherName, otherName+".moved"))
	otherName += ".moved"
	select {
	case err := <-res:
		t.Fatalf("the held transfer ended (%v) while its channel was held", err)
	default:
	}
	require.GreaterOrEqual(t, inFlight(stuck), busyChannel, "READs the held channel owes")

	// The full channel is the only data channel: a new file still goes there (it
	// never waits for a channel), and another data channel opens for the next one.
	require.Same(t, stuck, c.fileChannel())
	awaitDataChannel(t, c)
	require.Len(t, c.dataChannels(), 2, "data channels")
	g, err := c.Open(ctx, otherName)
	require.NoError(t, err)
	require.NotSame(t, stuck, g.cn)
	require.NotSame(t, c.main, g.cn)
	var got bytes.Buffer
	within(t, func() { _, err = g.WriteTo(&got) })
	require.NoError(t, err)
	requireSameBytes(t, other, got.Bytes())
	closeFile(t, g)

	held.release()
	within(t, func() { err = <-res })
	require.NoError(t, err)
	requireSameBytes(t, data, buf)
	closeFile(t, f)
}

// awaitServerWrote waits until the server process holding name open has written at
// least n bytes (its wchar, which counts its log lines too). The server is another
// process: its state is polled, within a deadline.
func (e *stripeEnv) awaitServerWrote(name string, n int64) error {
	deadline := time.Now().Add(testTimeout)
	for {
		wrote, err := e.serverWrote(name)
		if err == nil && wrote >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server wrote %d bytes (%v) within %v, want %d", wrote, err, testTimeout, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// serverWrote returns the bytes written so far by the one process that holds name open.
func (e *stripeEnv) serverWrote(name string) (int64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var pids []string
	for _, ent := range entries {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", ent.Name(), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == name {
				pids = append(pids, ent.Name())
				break
			}
		}
	}
	if len(pids) != 1 {
		return 0, fmt.Errorf("%d processes hold %s open, want 1", len(pids), name)
	}
	b, err := os.ReadFile(filepath.Join("/proc", pids[0], "io"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no wchar in /proc/%s/io", pids[0])
}

// TestFileChannelClientClose: Client.Close closes the data channels with the main one,
// ends files open on them, and leaves no goroutine and no server handle behind; also
// when it comes while the first data channel is still being opened.
func TestFileChannelClientClose(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 36)
	name := e.file(t, "f", data)
	ctx := testCtx(t)

	t.Run("data channels open", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		c, closeClient := e.client(t, "", WithChannels(4))
		got, err := c.ReadFile(ctx, name)
		require.NoError(t, err)
		requireSameBytes(t, data, got)
		live := c.chans.live()
		require.GreaterOrEqual(t, len(live), 2, "the main channel and data channels")
		f, err := c.Open(ctx, name)
		require.NoError(t, err)
		require.NotSame(t, c.main, f.cn)
		require.NoError(t, e.waitServerHandles(name, 1))

		require.NoError(t, c.Close())
		for _, cn := range live {
			require.ErrorIs(t, cn.failed(), net.ErrClosed, "a channel left open")
		}
		within(t, func() { _, err = f.Read(make([]byte, 10)) })
		require.ErrorIs(t, err, net.ErrClosed, "Read on a data channel's file after Client.Close")
		_, err = c.Open(ctx, name)
		require.ErrorIs(t, err, net.ErrClosed, "Open after Client.Close")
		require.Empty(t, c.dataChannels())
		require.NoError(t, e.waitServerHandles(name, 0), "handles left open on the server")
		closeClient()
		goleak.VerifyNone(t, ignore)
	})

	t.Run("while the first data channel opens", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		c, closeClient := e.newClient(t, "", WithChannels(4))
		f, err := c.Open(ctx, name) // on the main channel; starts the data channel
		require.NoError(t, err)
		require.Same(t, c.main, f.cn)
		require.NoError(t, c.Close())
		awaitDataChannel(t, c)
		require.Empty(t, c.dataChannels(), "a data channel kept after Close")
		require.Same(t, c.main, c.fileChannel())
		c.dataOpener.mu.Lock()
		opening := c.dataOpener.opening
		c.dataOpener.mu.Unlock()
		require.Nil(t, opening, "an open started after Close")
		closeClient()
		require.NoError(t, e.waitServerHandles(name, 0), "handles left open on the server")
		goleak.VerifyNone(t, ignore)
	})
}
