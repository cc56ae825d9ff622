package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Harness: a Reconnecting that dials the in-process SSH server (sshserver_env_test.go)
// through a faultproxy, which resets or silences its connections on a plan or on
// command. Every dial is counted; a test may make the next dials fail or block.
type rcEnv struct {
	s *sshTestServer
	p *faultproxy.Proxy

	dials   atomic.Int32
	mu      sync.Mutex
	refuse  error                                 // when set, dials fail with it
	blockIn func(ctx context.Context) (err error) // when set, dials run it instead
}

func newRCEnv(t *testing.T, opts testserver.Options, popts ...faultproxy.Option) *rcEnv {
	t.Helper()
	s := newSSHTestServer(t, opts)
	return &rcEnv{s: s, p: blackHoleProxy(t, s, popts...)}
}

func (e *rcEnv) dial(ctx context.Context) (*ssh.Client, error) {
	e.dials.Add(1)
	e.mu.Lock()
	refuse, block := e.refuse, e.blockIn
	e.mu.Unlock()
	if block != nil {
		return nil, block(ctx)
	}
	if refuse != nil {
		return nil, refuse
	}
	return dialSSHContext(ctx, e.p.Addr(), &ssh.ClientConfig{User: "test", HostKeyCallback: ssh.FixedHostKey(e.s.pub)})
}

func (e *rcEnv) set(refuse error, block func(context.Context) error) {
	e.mu.Lock()
	e.refuse, e.blockIn = refuse, block
	e.mu.Unlock()
}

// open makes the Reconnecting; cleanup closes it.
func (e *rcEnv) open(t *testing.T, policy ReconnectPolicy, opts ...Option) *Reconnecting {
	t.Helper()
	r, err := NewReconnecting(testCtx(t), e.dial, policy, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// dialSSHContext dials an SSH connection within ctx, the handshake included.
func dialSSHContext(ctx context.Context, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	conn, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	if !stop() && err == nil {
		conn.Close()
		err = ctx.Err()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return ssh.NewClient(conn, chans, reqs), nil
}

// current is the Reconnecting's Client now.
func current(t *testing.T, r *Reconnecting) *Client {
	t.Helper()
	c, err := r.Client(testCtx(t))
	require.NoError(t, err)
	return c
}

// resetEvery is a plan that resets each connection after about n bytes (both ways),
// drawn from seed, between n and 2n.
func resetEvery(n int64, seed uint64) faultproxy.Option {
	return faultproxy.WithPlan(faultproxy.Seeded(seed, n, 2*n, faultproxy.Reset))
}

// A Put and a Get through a proxy that resets every connection after a few MiB finish
// byte-identical, for a single file and a tree, each on several connections: every
// try after the first continues from what the one before proved (Resume, the
// Journal), and a tree's retries leave out the files in place.
func TestReconnectingTransfersThroughResets(t *testing.T) {
	tsNoLeaks(t)
	e := newRCEnv(t, testserver.Options{}, resetEvery(3<<20, 1))
	r := e.open(t, ReconnectPolicy{})
	ctx := testCtx(t)
	dir := t.TempDir()

	data := randBytes(12<<20, 1)
	src := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(src, data, 0o644))
	require.NoError(t, r.Put(ctx, src, "/big"))
	got, err := e.s.srv.ReadFile("/big")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the uploaded file differs from its source")
	afterPut := r.Reconnects()
	require.Positive(t, afterPut, "the upload went on over more than one connection")

	back := filepath.Join(dir, "back")
	require.NoError(t, r.Get(ctx, "/big", back))
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the downloaded file differs from the remote one")
	require.Greater(t, r.Reconnects(), afterPut, "the download went on over more than one connection")

	tree := filepath.Join(dir, "tree")
	want := map[string][]byte{}
	for i := range 24 {
		name := filepath.Join(fmt.Sprintf("d%d", i%3), fmt.Sprintf("f%02d", i))
		want[name] = randBytes(256<<10+i*4096, uint64(i)+10)
		require.NoError(t, os.MkdirAll(filepath.Join(tree, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(tree, name), want[name], 0o644))
	}
	before := r.Reconnects()
	require.NoError(t, r.Put(ctx, tree, "/tree", Recursive()))
	require.NoError(t, r.Get(ctx, "/tree", filepath.Join(dir, "tree-back"), Recursive()))
	require.Greater(t, r.Reconnects(), before, "the trees went on over more than one connection")
	for name, data := range want {
		up, err := e.s.srv.ReadFile("/tree/" + filepath.ToSlash(name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, up), "%s differs on the server", name)
		down, err := os.ReadFile(filepath.Join(dir, "tree-back", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, down), "%s differs back here", name)
	}
}

// A connection that goes silent (a black hole) in the middle of a download is found
// by the keepalive, and the download goes on over a new connection to the end.
func TestReconnectingThroughABlackHole(t *testing.T) {
	tsNoLeaks(t)
	stalls := &stallSwitch{}
	e := newRCEnv(t, testserver.Options{Stall: stalls.hook})
	data := randBytes(6<<20, 3)
	require.NoError(t, e.s.srv.WriteFile("/big", data, 0o644))
	r := e.open(t, ReconnectPolicy{}, WithKeepalive(testKeepalive, testKeepaliveCount))
	ctx := testCtx(t)

	// The first READ at 4 MiB has its reply withheld: the download waits there when
	// the link goes silent.
	stalls.add(stallFirst(atOrPast(testserver.TypeRead, 4<<20)))
	back := filepath.Join(t.TempDir(), "back")
	done := tsGo(func() error { return r.Get(ctx, "/big", back) })
	tsWaitStalled(t, e.s.srv, 1)
	require.Positive(t, e.p.Break(faultproxy.BlackHole))
	require.NoError(t, tsRecv(t, done, "Get"))

	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the downloaded file differs")
	require.Equal(t, int64(1), r.Reconnects())
}

// A Rename whose connection is lost after it went out is not repeated: its error
// says the outcome is unknown (and matches net.ErrClosed), and looking shows what the
// server did. One made when the connection is known dead never went out: it goes on
// the next connection and succeeds.
func TestReconnectingRenameOutcomeUnknown(t *testing.T) {
	tsNoLeaks(t)
	renames := func(r testserver.Request) bool {
		return r.Type == testserver.TypeRename || r.Type == testserver.TypeExtended && r.ExtName == extPosixRename
	}
	e := newRCEnv(t, testserver.Options{Stall: stallFirst(renames)})
	require.NoError(t, e.s.srv.WriteFile("/a", []byte("a"), 0o644))
	require.NoError(t, e.s.srv.WriteFile("/c", []byte("c"), 0o644))
	r := e.open(t, ReconnectPolicy{})
	ctx := testCtx(t)

	done := tsGo(func() error { return r.Rename(ctx, "/a", "/b") })
	tsWaitStalled(t, e.s.srv, 1) // carried out, its reply withheld
	require.Positive(t, e.p.Break(faultproxy.Reset))
	err := tsRecv(t, done, "Rename")
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorContains(t, err, "outcome unknown")
	_, err = r.Stat(ctx, "/b") // retried on a new connection
	require.NoError(t, err, "the server carried out the Rename")
	require.Equal(t, int64(1), r.Reconnects())

	c := current(t, r)
	require.Positive(t, e.p.Break(faultproxy.Reset))
	requireDone(t, c)
	require.NoError(t, r.Rename(ctx, "/c", "/d"), "a Rename made on a dead connection goes on the next")
	_, err = r.Stat(ctx, "/d")
	require.NoError(t, err)
	require.Equal(t, int64(2), r.Reconnects())
	st := current(t, r).Stats()
	require.Equal(t, uint64(2), st.Reconnects, "the current Client's Stats carry the reconnects")
	require.GreaterOrEqual(t, st.Requests, uint64(4), "and the requests of the Clients before it")
}

// Stat, ReadDir and Open whose connection dies while they wait are retried on the
// next; a File opened before the drop fails with an error matching net.ErrClosed.
func TestReconnectingRetriesIdempotentCalls(t *testing.T) {
	calls := []struct {
		name string
		typ  uint8
		do   func(ctx context.Context, r *Reconnecting) error
	}{
		{"Stat", testserver.TypeStat, func(ctx context.Context, r *Reconnecting) error {
			_, err := r.Stat(ctx, "/f")
			return err
		}},
		{"ReadDir", testserver.TypeOpendir, func(ctx context.Context, r *Reconnecting) error {
			_, err := r.ReadDir(ctx, "/")
			return err
		}},
		{"Open", testserver.TypeOpen, func(ctx context.Context, r *Reconnecting) error {
			f, err := r.Open(ctx, "/f")
			if err == nil {
				err = f.Close()
			}
			return err
		}},
	}
	for _, cl := range calls {
		t.Run(cl.name, func(t *testing.T) {
			tsNoLeaks(t)
			stalls := &stallSwitch{}
			e := newRCEnv(t, testserver.Options{Stall: stalls.hook})
			require.NoError(t, e.s.srv.WriteFile("/f", []byte("hello"), 0o644))
			r := e.open(t, ReconnectPolicy{})
			ctx := testCtx(t)
			old, err := r.Open(ctx, "/f")
			require.NoError(t, err)

			stalls.add(stallFirst(ofType(cl.typ)))
			done := tsGo(func() error { return cl.do(ctx, r) })
			tsWaitStalled(t, e.s.srv, 1)
			require.Positive(t, e.p.Break(faultproxy.Reset))
			require.NoError(t, tsRecv(t, done, cl.name))
			require.Equal(t, int64(1), r.Reconnects())

			_, err = old.Stat()
			require.ErrorIs(t, err, net.ErrClosed, "a File opened before the drop")
			require.ErrorIs(t, old.Close(), net.ErrClosed)
		})
	}
}

// A call whose connection died and whose redials keep failing gives up after
// MaxFailures failures in a row, with the dial's error; one whose ctx ends during the
// pause before a retry returns at once, with an error matching ctx's and the failure.
func TestReconnectingGivesUp(t *testing.T) {
	tsNoLeaks(t)
	e := newRCEnv(t, testserver.Options{})
	var retries []int
	r := e.open(t, ReconnectPolicy{MaxFailures: 3, Backoff: time.Nanosecond,
		OnRetry: func(_ error, _ time.Duration, n int) { retries = append(retries, n) }})
	ctx := testCtx(t)
	cctx, cancel := context.WithCancel(ctx)
	slow := e.open(t, ReconnectPolicy{Backoff: time.Hour, OnRetry: func(error, time.Duration, int) { cancel() }})
	refused := errors.New("refused by the test")
	e.set(refused, nil)
	c, cs := current(t, r), current(t, slow)
	require.Positive(t, e.p.Break(faultproxy.Reset))
	requireDone(t, c)
	requireDone(t, cs)
	dials := e.dials.Load()

	_, err := r.Stat(ctx, "/")
	require.ErrorIs(t, err, refused)
	require.Equal(t, []int{1, 2, 3}, retries, "failures in a row, each told before its pause")
	require.Equal(t, int32(4), e.dials.Load()-dials, "a dial, and one after each pause")

	_, err = slow.Stat(cctx, "/")
	require.ErrorIs(t, err, refused, "the dial's failure")
	require.ErrorIs(t, err, context.Canceled, "the pause ended by ctx")
}

// Close during a redial abandons it: the dial's ctx ends, the call waiting on it fails
// with an error matching net.ErrClosed, Close returns once the dial has, and nothing
// is left running.
func TestReconnectingCloseDuringRedial(t *testing.T) {
	tsNoLeaks(t)
	e := newRCEnv(t, testserver.Options{})
	r, err := NewReconnecting(testCtx(t), e.dial, ReconnectPolicy{})
	require.NoError(t, err)
	entered := make(chan struct{})
	var ended atomic.Bool
	e.set(nil, func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		ended.Store(true)
		return ctx.Err()
	})
	c := current(t, r)
	require.Positive(t, e.p.Break(faultproxy.Reset))
	requireDone(t, c)

	done := tsGo(func() error { _, err := r.Stat(testCtx(t), "/"); return err })
	tsRecv(t, entered, "the redial")
	require.NoError(t, r.Close())
	require.True(t, ended.Load(), "Close returned before the dial it abandoned")
	err = tsRecv(t, done, "Stat")
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = r.Stat(testCtx(t), "/")
	require.ErrorIs(t, err, net.ErrClosed, "a call after Close")
	require.NoError(t, r.Close(), "Close again")
}

// Concurrent calls that find the connection dead share one redial.
func TestReconnectingSharesARedial(t *testing.T) {
	tsNoLeaks(t)
	e := newRCEnv(t, testserver.Options{})
	r := e.open(t, ReconnectPolicy{})
	ctx := testCtx(t)
	c := current(t, r)
	require.Positive(t, e.p.Break(faultproxy.Reset))
	requireDone(t, c)
	dials := e.dials.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := r.Stat(ctx, "/")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(1), e.dials.Load()-dials)
	require.Equal(t, int64(1), r.Reconnects())
}

// NewReconnecting checks its arguments, and a failed first dial is returned as it is.
func TestNewReconnectingArguments(t *testing.T) {
	ctx := testCtx(t)
	_, err := NewReconnecting(ctx, nil, ReconnectPolicy{})
	require.Error(t, err)
	dial := func(context.Context) (*ssh.Client, error) { return nil, fs.ErrPermission }
	_, err = NewReconnecting(ctx, dial, ReconnectPolicy{MaxFailures: -1})
	require.Error(t, err)
	_, err = NewReconnecting(ctx, dial, ReconnectPolicy{}, WithMaxInflight(-1))
	require.Error(t, err)
	_, err = NewReconnecting(ctx, dial, ReconnectPolicy{})
	require.ErrorIs(t, err, fs.ErrPermission)
}

// Against OpenSSH: the private sshd's sessions (its connection processes and the
// sftp-servers) are killed once a Put, then a Get, is a third of the way; each goes
// on over a new connection from its part file and ends byte-identical, and the
// Reconnecting's Journal spares the upload its rewind.
func TestReconnectingSSHDKilledMidTransfer(t *testing.T) {
	if err := sshdtest.SSHDUsable(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	tsNoLeaks(t)
	sshd := sshdtest.NewSSHD(t, benchSSHDOptions(sshdtest.SSHDOptions{MaxSessions: 64}))
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711)) // the account reaches dir
	require.NoError(t, os.Chmod(dir, 0o777))
	dial := func(ctx context.Context) (*ssh.Client, error) {
		return dialSSHContext(ctx, sshd.Addr, sshd.ClientConfig())
	}
	r, err := NewReconnecting(testCtx(t), dial, ReconnectPolicy{})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	ctx := testCtx(t)

	const size = 24 << 20
	data := randBytes(size, 7)
	src, up, back := filepath.Join(dir, "src"), filepath.Join(dir, "up"), filepath.Join(dir, "back")
	require.NoError(t, os.WriteFile(src, data, 0o644))
	// killer kills every session once, when the file is a third of the way, and
	// records where each try started.
	var killed atomic.Int32
	killer := func() (TransferOption, *[]int64) {
		var once sync.Once
		var starts []int64
		fresh := true // the next report is a try's first
		return OnProgress(func(p Progress) {
			switch {
			case p.Err != nil:
				fresh = true
			case fresh:
				fresh = false
				starts = append(starts, p.Bytes)
			}
			if p.Bytes >= size/3 {
				once.Do(func() { killed.Add(int32(min(sshd.KillSessions(), 1))) })
			}
		}), &starts
	}

	opt, starts := killer()
	require.NoError(t, r.Put(ctx, src, up, opt))
	got, err := os.ReadFile(up)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the uploaded file differs from its source")
	require.Equal(t, int32(1), killed.Load(), "sessions were killed")
	require.Equal(t, int64(1), r.Reconnects())
	require.Len(t, *starts, 2, "two tries")
	require.GreaterOrEqual(t, (*starts)[1], int64(size/3), "the retry continued from what the server acknowledged")

	opt, starts = killer()
	require.NoError(t, r.Get(ctx, up, back, opt))
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the downloaded file differs")
	require.Equal(t, int32(2), killed.Load(), "sessions were killed")
	require.Equal(t, int64(2), r.Reconnects())
	require.Len(t, *starts, 2, "two tries")
	require.Positive(t, (*starts)[1], "the retry continued from the part file")
}

// NewReconnectingFrom over pipes to the in-process server: every session is killed
// once an upload made through Transfer is a third of the way; the upload goes on over
// a new pipe Client and ends byte-identical. The retry after progress waits for
// nothing (Wait is never asked), and each Client made is closed by its function.
func TestReconnectingFromPipes(t *testing.T) {
	tsNoLeaks(t)
	srv := testserver.New(testserver.Options{})
	t.Cleanup(func() { srv.Close() })
	var made, closed atomic.Int32
	connect := func(ctx context.Context) (*Client, func() error, error) {
		r, w := srv.Conn()
		c, err := NewClientPipe(ctx, r, w)
		if err != nil {
			return nil, nil, err
		}
		made.Add(1)
		return c, func() error { closed.Add(1); return c.Close() }, nil
	}
	var waits []time.Duration
	r, err := NewReconnectingFrom(testCtx(t), connect, ReconnectPolicy{
		Wait: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
	require.NoError(t, err)
	ctx := testCtx(t)

	const size = 6 << 20
	data := randBytes(size, 9)
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.WriteFile(src, data, 0o644))
	var once sync.Once
	kill := OnProgress(func(p Progress) {
		if p.Bytes >= size/3 {
			once.Do(srv.KillSessions)
		}
	})
	var clients []*Client
	err = r.Transfer(ctx, func(c *Client, opts ...TransferOption) error {
		clients = append(clients, c)
		return c.Put(ctx, src, "/up", opts...)
	}, kill)
	require.NoError(t, err)
	got, err := srv.ReadFile("/up")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the uploaded file differs from its source")
	require.Len(t, clients, 2, "two tries")
	require.NotSame(t, clients[0], clients[1], "the second on a new Client")
	require.Empty(t, waits, "a retry after progress goes at once")
	require.Equal(t, int32(2), made.Load())
	require.Equal(t, int32(1), closed.Load(), "the dead Client is closed")
	require.NoError(t, r.Close())
	require.Equal(t, int32(2), closed.Load(), "Close closes the current one")

	_, err = NewReconnectingFrom(ctx, nil, ReconnectPolicy{})
	require.Error(t, err)
	_, err = NewReconnectingFrom(ctx, func(context.Context) (*Client, func() error, error) { return nil, nil, nil }, ReconnectPolicy{})
	require.Error(t, err, "a connect that returns no Client")
}

// The pauses double from Backoff up to MaxBackoff, and start again after progress;
// a policy's extremes do not overflow.
func TestReconnectPauses(t *testing.T) {
	n := retryCount{p: &ReconnectPolicy{MaxFailures: 100}}
	var got []time.Duration
	for range 7 {
		d, ok := n.failed(false)
		require.True(t, ok)
		got = append(got, d)
	}
	s := time.Second
	require.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}, got)
	d, ok := n.failed(true)
	require.True(t, ok)
	require.Zero(t, d, "after progress, at once")
	d, _ = n.failed(false)
	require.Equal(t, s, d, "and the doubling starts again")

	huge := retryCount{p: &ReconnectPolicy{MaxFailures: 100, Backoff: 1 << 61, MaxBackoff: 1<<63 - 1}}
	for range 10 {
		d, _ := huge.failed(false)
		require.Positive(t, d)
	}
	few := retryCount{p: &ReconnectPolicy{MaxFailures: 2}}
	_, ok1 := few.failed(false)
	_, ok2 := few.failed(false)
	_, ok3 := few.failed(false)
	require.Equal(t, []bool{true, true, false}, []bool{ok1, ok2, ok3})
}

// The files in place a transfer's log remembers are bounded: past rememberLimit a
// file done is not remembered (a later try copies it again), and the progress that
// counts as moving on is still seen.
func TestTransferLogRemembersWithinItsLimit(t *testing.T) {
	l := newTransferLog(nil, nil)
	l.limit = 3 * rememberCost("dir/f0")
	for i := range 5 {
		l.startTry()
		l.report(Progress{Path: fmt.Sprintf("dir/f%d", i), Done: true})
		require.True(t, l.advanced(), "file %d done is progress", i)
	}
	l.report(Progress{Path: "dir/f0", Done: true}) // reported again: not charged twice
	for i := range 5 {
		require.Equal(t, i < 3, l.skip(fmt.Sprintf("dir/f%d", i), nil), "file %d", i)
	}
	require.Equal(t, l.limit, l.held)
}
