package sftp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/sluicehq/sftp/internal/sshfx"
)

// Harness: a private sshd (internal/sshdtest) on 127.0.0.1.
//
// Striping needs several SFTP channels on one SSH connection, so these tests run
// against a private sshd on loopback. Its sftp-servers log every handle they close
// (INFO), and /proc shows which files they hold open: the tests check from the
// server's side that a transfer really used several channels and left no handle open.
//
// This file provides stripeEnv (newStripeEnv: one sshd per test, MaxSessions chosen),
// its clients (client, newClient; through delayproxy for a long link), the server-side
// checks (serverHandles, waitServerHandles, closedHandles, opened, sessions,
// requireStriped) and transfers that can trip mid-way (download, upload, tripReader,
// tripWriter). sshd needs root: these tests skip with the reason as a plain user.
//
// Where tests go: the channel pool and channel source (how channels are opened,
// reused and given up) in stripe_test.go and lanesource_test.go; lanes and striped
// transfers in stripe_test.go; the main channel's policy in controllane_test.go; SSH
// session options (env, subsystem, exec) in session_options_test.go. A test that needs
// several channels but not SSH uses lanesource_test.go's pipeServers (WithPipeOpener
// over several sftp-servers) instead.

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
	// its first data channel is open (see filechannel.go).
	readyDataChannel(t, c)
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

// readyDataChannel opens c's first data channel, as the first Open on a long link
// does in the background, and waits for it.
func readyDataChannel(t *testing.T, c *Client) {
	t.Helper()
	require.True(t, c.stripes(), "the link is not one the main channel rule is for")
	require.Equal(t, c.main, c.fileChannel(), "a file went on a data channel before one was open")
	awaitDataChannel(t, c)
	require.Len(t, c.dataChannels(), 1, "data channels")
}

// awaitDataChannel waits for the data channel the main channel rule is opening, if any.
func awaitDataChannel(t *testing.T, c *Client) {
	t.Helper()
	c.dataOpener.mu.Lock()
	opening := c.dataOpener.opening
	c.dataOpener.mu.Unlock()
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

// skipUnlessFDsReadable skips a test that counts sftp-server's handles where it cannot:
// sftp-server makes itself non-dumpable (prctl PR_SET_DUMPABLE, 0), which leaves its
// /proc/PID/fd to root alone, even for the user who started it.
func skipUnlessFDsReadable(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("skipping: counting sftp-server's open handles reads its /proc/PID/fd, which only root may (sftp-server is non-dumpable); euid %d", os.Geteuid())
	}
}

// openFDs counts the descriptors the processes pids hold on name: one per handle an
// sftp-server has open on it. It is -1 when a live process's descriptors cannot be
// read (see skipUnlessFDsReadable), so that no count can pass by accident.
func openFDs(pids []int, name string) int {
	n := 0
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return -1
		}
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
		if got < 0 {
			return fmt.Errorf("cannot read the servers' /proc/PID/fd to count handles on %s", name)
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
		err := cn.do(ctx, func(dst []byte, id uint32) []byte {
			return appendString1(dst, sshfx.TypeStat, id, "/")
		}, func(response) error { return nil })
		first = cmp.Or(first, err)
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
	busy, proven := 0, 0
	for _, h := range hs {
		moved, other := h.read, h.written
		if upload {
			moved, other = other, moved
		}
		if upload && other == nonceLen {
			proven++ // a sibling read the round's nonce (reopen.go)
		} else {
			require.Zero(t, other)
		}
		sum += moved
		if moved > 0 {
			busy++
		}
	}
	if upload {
		sum -= requireNonces(t, sum-total, proven)
	}
	require.Equal(t, total, sum, "bytes the server moved for %s", name)
	require.GreaterOrEqual(t, busy, 2, "handles that moved data: %+v", hs)
}

// requireNonces checks the bytes an upload wrote beyond its data: one nonce per stripe
// round that proved siblings (reopen.go), at least one and at most one per proven
// sibling. It returns them.
func requireNonces(t *testing.T, extra int64, proven int) int64 {
	t.Helper()
	require.Zero(t, extra%nonceLen, "bytes written beyond the data: %d", extra)
	require.GreaterOrEqual(t, extra/nonceLen, int64(1), "no nonce written")
	if proven >= 0 {
		require.LessOrEqual(t, extra/nonceLen, int64(proven), "nonces written for %d proven siblings", proven)
	}
	return extra
}

// requireProofBytes checks that extra, the DATA bytes beyond what a test read, are
// nonces read back by striped uploads' siblings.
func requireProofBytes(t *testing.T, extra int, what string) {
	t.Helper()
	require.GreaterOrEqual(t, extra, 0, what)
	require.Zero(t, extra%nonceLen, "%s: %d bytes beyond the data", what, extra)
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
