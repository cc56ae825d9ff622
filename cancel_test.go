package sftp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Cancellation and Close: a call whose ctx ends, or a transfer whose File or Client is
// closed from another goroutine, must return promptly with the matching error, leave
// no goroutine and no handle behind, and leave the Client usable where it still can be.
// Every wait here is made certain by the server's Stall hook: the reply the call waits
// for is withheld until the test has cancelled.

const cancelFileSize = 8<<20 + 321

// xferKind is a transfer a test interrupts.
type xferKind struct {
	name  string
	read  bool // a download (READs) rather than an upload (WRITEs)
	start func(f *File, trip func()) (int64, error)
}

var xferKinds = []xferKind{
	{"WriteTo", true, func(f *File, trip func()) (int64, error) {
		return f.WriteTo(&tripAfterWriter{w: io.Discard, after: 1 << 20, trip: trip})
	}},
	{"ReadAt", true, func(f *File, _ func()) (int64, error) {
		n, err := f.ReadAt(make([]byte, cancelFileSize), 0)
		return int64(n), err
	}},
	{"Read", true, func(f *File, trip func()) (int64, error) {
		// bufio.Reader.WriteTo would hand over to File.WriteTo: read in small pieces so
		// the read-ahead of File.Read is what runs.
		br := bufio.NewReaderSize(f, 32<<10)
		p := make([]byte, 4096)
		var total int64
		for {
			n, err := br.Read(p)
			total += int64(n)
			if trip != nil && total >= 1<<20 {
				trip()
				trip = nil
			}
			if err != nil {
				return total, err
			}
		}
	}},
	{"ReadFrom", false, func(f *File, trip func()) (int64, error) {
		return f.ReadFrom(&endlessSource{after: 1 << 20, trip: trip})
	}},
}

// tripAfterWriter calls trip once after bytes have passed. A trip that blocks is a
// slow writer.
type tripAfterWriter struct {
	w     io.Writer
	n     int64
	after int64
	trip  func()
}

func (t *tripAfterWriter) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	if t.trip != nil && t.n >= t.after {
		t.trip()
		t.trip = nil
	}
	return t.w.Write(p)
}

// endlessSource yields pseudo-random bytes for ever (the same stream every time),
// calling trip once after some: an upload from it can end only by failing.
type endlessSource struct {
	rng   *rand.ChaCha8
	n     int64
	after int64
	trip  func()
}

func (e *endlessSource) Read(p []byte) (int, error) {
	if e.rng == nil {
		e.rng = rand.NewChaCha8([32]byte{7})
	}
	e.rng.Read(p)
	e.n += int64(len(p))
	if e.trip != nil && e.n >= e.after {
		e.trip()
		e.trip = nil
	}
	return len(p), nil
}

// xferCloser is how a test ends a transfer from outside.
type xferCloser struct {
	name string
	want error // what the transfer's error must match
	do   func(c *Client, f *File) error
}

var xferClosers = []xferCloser{
	{"File.Close", fs.ErrClosed, func(_ *Client, f *File) error { return f.Close() }},
	{"Client.Close", net.ErrClosed, func(c *Client, _ *File) error { return c.Close() }},
}

// TestCloseDuringTransfer closes the File or the Client while a transfer waits for a
// reply the server withholds. The transfer must return promptly with fs.ErrClosed
// (File.Close) or net.ErrClosed (Client.Close), and no handle may stay open.
func TestCloseDuringTransfer(t *testing.T) {
	for _, k := range xferKinds {
		for _, cl := range xferClosers {
			t.Run(k.name+"/"+cl.name+"/stalled", func(t *testing.T) {
				testCloseDuring(t, k, cl, false)
			})
			if k.name != "ReadAt" {
				t.Run(k.name+"/"+cl.name+"/after 1MiB", func(t *testing.T) {
					testCloseDuring(t, k, cl, true)
				})
			}
		}
	}
}

// testCloseDuring interrupts transfer k with cl. With trip the close starts from a
// goroutine the transfer's own reader or writer spawns after 1 MiB has passed;
// without, once the server holds the reply to a READ or WRITE at 4 MiB. Downloads
// always have such a READ withheld, so they cannot finish on their own; uploads read
// an endless source.
func testCloseDuring(t *testing.T, k xferKind, cl xferCloser, trip bool) {
	typ := uint8(testserver.TypeWrite)
	if k.read {
		typ = testserver.TypeRead
	}
	stallAt := uint64(4 << 20)
	if trip {
		stallAt = 6 << 20
	}
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallFirst(atOrPast(typ, stallAt))})
	data := randBytes(cancelFileSize, 11)
	var f *File
	var err error
	if k.read {
		require.NoError(t, srv.WriteFile("/f", data, 0o644))
		f, err = c.Open(testCtx(t), "/f")
	} else {
		f, err = c.Create(testCtx(t), "/f")
	}
	require.NoError(t, err)

	closed := make(chan error, 1)
	var tripFn func()
	if trip {
		tripFn = func() { go func() { closed <- cl.do(c, f) }() }
	}
	res := tsGo(func() tsResult { n, err := k.start(f, tripFn); return tsResult{n, err} })
	if !trip {
		tsWaitStalled(t, srv, 1)
		closed <- cl.do(c, f)
	}
	require.NoError(t, tsRecv(t, closed, cl.name))

	n, err := tsRecv(t, res, k.name).get()
	t.Logf("%s: n=%d err=%v", k.name, n, err)
	require.Error(t, err)
	require.ErrorIs(t, err, cl.want)
	require.Less(t, n, int64(stallAt)+int64(c.Limits().MaxRead), "nothing past the withheld reply can have been delivered")

	if cl.name == "File.Close" {
		// The CLOSE was answered, so the server has let go of the handle; the late
		// reply is dropped and the Client carries on.
		require.Zero(t, srv.OpenHandles())
		require.ErrorIs(t, f.Close(), fs.ErrClosed, "second Close")
		srv.ReleaseStalled()
		requireWorks(t, c)
	} else {
		requireClosedConn(t, f.Close())
		_, err := c.Stat(testCtx(t), "/")
		requireClosedConn(t, err)
		srv.Close() // waits for the session to end: its handles are closed by then
		require.Zero(t, srv.OpenHandles())
	}
	if !k.read {
		got, err := srv.ReadFile("/f")
		require.NoError(t, err)
		want := make([]byte, n)
		(&endlessSource{}).Read(want)
		require.GreaterOrEqual(t, int64(len(got)), n)
		require.True(t, bytes.Equal(want, got[:n]), "the bytes reported written must be on the server")
	}
}

// cancelCase is a Client method whose wait a test interrupts.
type cancelCase struct {
	name  string
	stall func(testserver.Request) bool // the request whose reply is withheld
	call  func(ctx context.Context, c *Client, local string) error
	// closes says the call has sent the CLOSE of its remote handle by the time it
	// returns (Get and Put promise it; others may leave it to be sent later).
	closes bool
}

func extNamed(name string) func(testserver.Request) bool {
	return func(r testserver.Request) bool { return r.Type == testserver.TypeExtended && r.ExtName == name }
}

var cancelCases = []cancelCase{
	// Only the STAT of /f is withheld: one of "/" (requireWorks) must be answered even
	// when the call's deadline passed before its own STAT went out, and so the first
	// STAT the server sees is requireWorks'.
	{"Stat", func(r testserver.Request) bool { return r.Type == testserver.TypeStat && r.Path == "/f" }, func(ctx context.Context, c *Client, _ string) error {
		_, err := c.Stat(ctx, "/f")
		return err
	}, false},
	{"Open", ofType(testserver.TypeOpen), func(ctx context.Context, c *Client, _ string) error {
		f, err := c.Open(ctx, "/f")
		if err == nil {
			f.Close()
		}
		return err
	}, false},
	{"ReadDir/OPENDIR", ofType(testserver.TypeOpendir), func(ctx context.Context, c *Client, _ string) error {
		_, err := c.ReadDir(ctx, "/dir")
		return err
	}, false},
	{"ReadDir/READDIR", ofType(testserver.TypeReaddir), func(ctx context.Context, c *Client, _ string) error {
		_, err := c.ReadDir(ctx, "/dir")
		return err
	}, false},
	{"Rename", extNamed("posix-rename@openssh.com"), func(ctx context.Context, c *Client, _ string) error {
		return c.Rename(ctx, "/dir/a", "/dir/renamed")
	}, false},
	{"Mkdir", ofType(testserver.TypeMkdir), func(ctx context.Context, c *Client, _ string) error {
		return c.Mkdir(ctx, "/newdir", 0o755)
	}, false},
	{"RemoveAll/REMOVE", ofType(testserver.TypeRemove), func(ctx context.Context, c *Client, _ string) error {
		return c.RemoveAll(ctx, "/dir")
	}, false},
	{"RemoveAll/RMDIR", ofType(testserver.TypeRmdir), func(ctx context.Context, c *Client, _ string) error {
		return c.RemoveAll(ctx, "/dir")
	}, false},
	{"Get/READ", atOrPast(testserver.TypeRead, 1<<20), func(ctx context.Context, c *Client, local string) error {
		return c.Get(ctx, "/f", filepath.Join(local, "got"))
	}, true},
	{"Get/OPEN", ofType(testserver.TypeOpen), func(ctx context.Context, c *Client, local string) error {
		return c.Get(ctx, "/f", filepath.Join(local, "got"))
	}, false},
	{"Put/WRITE", atOrPast(testserver.TypeWrite, 1<<20), func(ctx context.Context, c *Client, local string) error {
		return c.Put(ctx, filepath.Join(local, "src"), "/put")
	}, true},
	{"Put/OPEN", ofType(testserver.TypeOpen), func(ctx context.Context, c *Client, local string) error {
		return c.Put(ctx, filepath.Join(local, "src"), "/put")
	}, false},
	{"ReadFile/READ", atOrPast(testserver.TypeRead, 1<<20), func(ctx context.Context, c *Client, _ string) error {
		_, err := c.ReadFile(ctx, "/f")
		return err
	}, false},
	{"ReadFile/OPEN", ofType(testserver.TypeOpen), func(ctx context.Context, c *Client, _ string) error {
		_, err := c.ReadFile(ctx, "/f")
		return err
	}, false},
	{"WriteFile/WRITE", atOrPast(testserver.TypeWrite, 1<<20), func(ctx context.Context, c *Client, _ string) error {
		return c.WriteFile(ctx, "/wf", randBytes(4<<20, 12), 0o644)
	}, false},
	{"WriteFile/OPEN", ofType(testserver.TypeOpen), func(ctx context.Context, c *Client, _ string) error {
		return c.WriteFile(ctx, "/wf", randBytes(4<<20, 12), 0o644)
	}, false},
}

// cancelEnv is a server with a file, a directory and a local source file, whose Stall
// hook withholds the first reply stall matches and reports every CLOSE.
func cancelEnv(t *testing.T, stall func(testserver.Request) bool) (*Client, *testserver.Server, *closeWatch, string) {
	w := newCloseWatch()
	first := stallFirst(stall)
	c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
		w.observe(r)
		return first(r)
	}})
	require.NoError(t, srv.WriteFile("/f", randBytes(4<<20, 13), 0o644))
	require.NoError(t, srv.Mkdir("/dir", 0o755))
	for _, name := range []string{"a", "b", "c"} {
		require.NoError(t, srv.WriteFile("/dir/"+name, []byte(name), 0o644))
	}
	local := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(local, "src"), randBytes(4<<20, 14), 0o644))
	return c, srv, w, local
}

// TestCancelWhileWaiting cancels ctx while each Client method waits for a withheld
// reply. The call must return promptly with context.Canceled; the late reply, once
// released, must be dropped without harm (a HANDLE nobody waits for is closed), and
// the Client must keep working.
func TestCancelWhileWaiting(t *testing.T) {
	for _, tc := range cancelCases {
		t.Run(tc.name, func(t *testing.T) {
			c, srv, w, local := cancelEnv(t, tc.stall)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := tsGo(func() error { return tc.call(ctx, c, local) })
			tsWaitStalled(t, srv, 1)
			cancel()
			err := tsRecv(t, res, tc.name)
			t.Logf("%s: %v", tc.name, err)
			require.ErrorIs(t, err, context.Canceled)
			if tc.closes {
				// The call returns without waiting for the server once ctx ended,
				// but the CLOSE it sent closes the handle.
				settle(t, c)
				require.Zero(t, srv.OpenHandles(), "the handle should be closed by the CLOSE the call sent")
			}

			require.Equal(t, 1, srv.ReleaseStalled())
			requireWorks(t, c)
			w.waitHandles(t, srv)
		})
	}
}

// TestCancelDeadline: a server that stops answering, and a ctx deadline. The call
// returns context.DeadlineExceeded; the reply that comes later changes nothing.
func TestCancelDeadline(t *testing.T) {
	for _, tc := range cancelCasesNamed(t, "Stat", "Open", "ReadFile/READ") {
		t.Run(tc.name, func(t *testing.T) {
			c, srv, w, local := cancelEnv(t, tc.stall)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			err := tsRecv(t, tsGo(func() error { return tc.call(ctx, c, local) }), tc.name)
			t.Logf("%s: %v", tc.name, err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.False(t, errors.Is(err, context.Canceled))

			// Normally the deadline passes while the reply is withheld; on a slow
			// machine it may pass before the request goes out. Either way nothing
			// may be left behind.
			t.Logf("replies withheld: %d", srv.ReleaseStalled())
			requireWorks(t, c)
			w.waitHandles(t, srv)
		})
	}
}

func cancelCasesNamed(t *testing.T, names ...string) []cancelCase {
	var out []cancelCase
	for _, name := range names {
		i := slices.IndexFunc(cancelCases, func(tc cancelCase) bool { return tc.name == name })
		require.GreaterOrEqual(t, i, 0, "no cancel case %q", name)
		out = append(out, cancelCases[i])
	}
	return out
}

// TestCloseWhileCloseStalls: File.Close waits for the server's answer and takes no
// context, so closing the Client is what must release it.
func TestCloseWhileCloseStalls(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallFirst(ofType(testserver.TypeClose))})
	require.NoError(t, srv.WriteFile("/f", []byte("data"), 0o644))
	f, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	res := tsGo(f.Close)
	tsWaitStalled(t, srv, 1)
	require.NoError(t, c.Close())
	requireClosedConn(t, tsRecv(t, res, "File.Close"))
	require.NoError(t, c.Close(), "a second Client.Close")
}

// TestWriteFileCloseStalls: WriteFile waits for its CLOSE only while ctx lasts, and
// reports the deadline, since a failure the server reports only on close would be
// lost. The data is all there; the late answer changes nothing.
func TestWriteFileCloseStalls(t *testing.T) {
	w := newCloseWatch()
	first := stallFirst(ofType(testserver.TypeClose))
	c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
		w.observe(r)
		return first(r)
	}})
	data := randBytes(1<<20+3, 15)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := tsGo(func() error { return c.WriteFile(ctx, "/f", data, 0o644) })
	tsWaitStalled(t, srv, 1)
	cancel()
	err := tsRecv(t, res, "WriteFile")
	t.Logf("WriteFile: %v", err)
	require.ErrorIs(t, err, context.Canceled)
	stored, err := srv.ReadFile("/f")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, stored))

	require.Equal(t, 1, srv.ReleaseStalled())
	requireWorks(t, c)
	w.waitHandles(t, srv)
}

// handleAudit records requests that use a handle after the server executed its CLOSE.
// OpenSSH's sftp-server reuses handle numbers, so such a request can act on whatever
// file the Client opened next.
type handleAudit struct {
	mu     sync.Mutex
	closed map[string]bool
	late   []string
}

func (a *handleAudit) observe(r testserver.Request) {
	if r.Handle == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed[r.Handle]:
		a.late = append(a.late, fmt.Sprintf("type %d at offset %d", r.Type, r.Offset))
	case r.Type == testserver.TypeClose:
		if a.closed == nil {
			a.closed = make(map[string]bool)
		}
		a.closed[r.Handle] = true
	}
}

func (a *handleAudit) lateRequests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.late)
}

// TestCloseWhileTransferBusy closes a File from another goroutine while its transfer
// is busy with the caller's writer or source, and lets the CLOSE complete before the
// transfer resumes. The transfer must then stop with fs.ErrClosed and send nothing
// more on the closed handle.
func TestCloseWhileTransferBusy(t *testing.T) {
	const size = 32 << 20 // more than a window, so a download has READs still to send
	for _, k := range []string{"WriteTo", "ReadFrom"} {
		t.Run(k, func(t *testing.T) {
			audit := &handleAudit{}
			c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
				audit.observe(r)
				return false
			}})
			var f *File
			var err error
			// busy is the caller's writer or source taking its time: meanwhile another
			// goroutine closes f, to the end. (A Close that hangs holds the transfer,
			// which the wait for its result catches.)
			closed := make(chan error, 1)
			busy := func() { closed <- <-tsGo(f.Close) }
			var res <-chan tsResult
			if k == "WriteTo" {
				require.NoError(t, srv.WriteFile("/f", randBytes(size, 16), 0o644))
				f, err = c.Open(testCtx(t), "/f")
				require.NoError(t, err)
				res = tsGo(func() tsResult {
					n, err := f.WriteTo(&tripAfterWriter{w: io.Discard, after: 1 << 20, trip: busy})
					return tsResult{n, err}
				})
			} else {
				f, err = c.Create(testCtx(t), "/f")
				require.NoError(t, err)
				res = tsGo(func() tsResult {
					n, err := f.ReadFrom(&endlessSource{after: 1 << 20, trip: busy})
					return tsResult{n, err}
				})
			}
			n, err := tsRecv(t, res, k).get()
			t.Logf("%s: n=%d err=%v", k, n, err)
			require.ErrorIs(t, err, fs.ErrClosed)
			require.NoError(t, tsRecv(t, closed, "File.Close"))
			require.Empty(t, audit.lateRequests(), "requests sent on the handle after its CLOSE")
			requireWorks(t, c)
			require.Zero(t, srv.OpenHandles())
		})
	}
}

// TestCancelThenMalformedLateReply: the reply to an abandoned OPEN comes late and
// malformed. The client cannot know which handle to close, so it must treat the
// packet like any malformed one and close the channel (the server then drops the
// handle with the session), rather than send a CLOSE for a garbled name and carry on
// with the handle leaked.
func TestCancelThenMalformedLateReply(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{
		Stall:   stallFirst(ofType(testserver.TypeOpen)),
		Corrupt: testserver.CorruptTruncate(testserver.TypeHandle),
	})
	require.NoError(t, srv.WriteFile("/f", []byte("data"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	res := tsGo(func() error { _, err := c.Open(ctx, "/f"); return err })
	tsWaitStalled(t, srv, 1)
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "Open"), context.Canceled)
	require.Equal(t, 1, srv.ReleaseStalled())

	// The in-process server answers each request on its own, so a Stat sent now could be
	// answered before the late HANDLE goes out: wait for the reader to meet the HANDLE
	// (the channel dies) before asking anything more.
	select {
	case <-c.Done():
	case <-time.After(testTimeout):
		t.Fatal("the malformed late HANDLE did not close the channel")
	}
	requireClosedConn(t, c.Err())
	requireProtocolError(t, c.Err())
	_, err := c.Stat(testCtx(t), "/f")
	requireClosedConn(t, err)
	requireProtocolError(t, err)
	srv.Close()
	require.Zero(t, srv.OpenHandles())
}

// TestGetTreeFailureClosesStoppedOpens: when one file of a tree fails, another file's
// OPEN still in flight is not abandoned (its handle would then be closed in the
// background, after Get returned): Get collects its reply and closes the handle
// before returning, so no handle is left open when it does.
func TestGetTreeFailureClosesStoppedOpens(t *testing.T) {
	var readFailed atomic.Bool
	var closes atomic.Int32
	aClosed := make(chan struct{})
	c, srv := newTestServerClient(t, testserver.Options{
		// a's first READ from 1 MiB on fails, while the reply to b's OPEN is withheld
		// until a has closed its handle: by then its failure is stopping the rest.
		Corrupt: func(r testserver.Request, reply []byte) [][]byte {
			if r.Type == testserver.TypeRead && r.Offset >= 1<<20 && readFailed.CompareAndSwap(false, true) {
				return [][]byte{statusReply(r.ID, sshfx.StatusFailure, "injected")}
			}
			return nil
		},
		Stall: func(r testserver.Request) bool {
			// The first CLOSE is the listing's, the second a's.
			if r.Type == testserver.TypeClose && closes.Add(1) == 2 {
				close(aClosed)
			}
			return r.Type == testserver.TypeOpen && r.Path == "/t/b"
		},
	})
	require.NoError(t, srv.MkdirAll("/t", 0o755))
	require.NoError(t, srv.WriteFile("/t/a", randBytes(4<<20, 21), 0o644))
	require.NoError(t, srv.WriteFile("/t/b", randBytes(1000, 22), 0o644))
	res := tsGo(func() error {
		return c.Get(testCtx(t), "/t", filepath.Join(t.TempDir(), "t"), Recursive(), Parallel(2))
	})
	tsWaitStalled(t, srv, 1)
	tsRecv(t, aClosed, "a's CLOSE")
	require.Equal(t, 1, srv.ReleaseStalled())
	err := tsRecv(t, res, "Get")
	require.ErrorContains(t, err, "injected")
	require.Zero(t, srv.OpenHandles(), "a handle the failed Get opened is still open")
}
