package sftp

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Harness: the in-process server (internal/testserver).
//
// This file provides a Client on internal/testserver, an SFTP server in this process
// that shares no code with the client and does on demand what a real server will not:
// withhold a reply (Stall), corrupt or reorder one (Corrupt), delay every reply
// (Latency), report its open handles, and serve from memory. Use it for faults,
// cancellation, hostile servers and concurrency, never for behaviour that belongs to a
// real server (use testenv_test.go's sftp-server for that).
//
//   - newTestServerClient(t, opts, clientOpts...): a Client on one session of a fresh
//     server; cleanup closes both and checks, per test, that no goroutine outlived it
//     (tsNoLeaks).
//   - tsGo / tsRecv: run a call on its own goroutine and wait, bounded, for its result.
//   - tsWaitStalled, stallFirst, ofType, atOrPast: withhold chosen replies and wait
//     until they are withheld, rather than sleeping.
//   - closeWatch / waitHandles: wait for the server's handles to drain at each CLOSE.
//
// Where tests go: a fault in one mechanism goes in that mechanism's test file (dir.go:
// dir_test.go) using this harness; faults across the whole client in faults_test.go,
// cancellation in cancel_test.go, hostile servers in hostile_test.go and
// budget_hostile_test.go, concurrency in concurrency_test.go. Every wait is bounded
// by testCtx (testctx_test.go).

// newTestServerClient starts a testserver with opts and a Client on one session of it.
// Cleanup closes the Client, then the server, then checks that the test left no
// goroutine behind (the check is registered first, so it runs last).
func newTestServerClient(t *testing.T, opts testserver.Options, clientOpts ...Option) (*Client, *testserver.Server) {
	t.Helper()
	tsNoLeaks(t)
	srv := testserver.New(opts)
	t.Cleanup(func() { srv.Close() })
	r, w := srv.Conn()
	c, err := NewClientPipe(testCtx(t), r, w, clientOpts...)
	require.NoError(t, err, "NewClientPipe")
	t.Cleanup(func() { c.Close() })
	return c, srv
}

// tsNoLeaks fails t if goroutines started during the test outlive it. TestMain's check
// only says that some test leaked; this says which.
func tsNoLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// tsGo runs f on its own goroutine; its result arrives on the returned channel.
func tsGo[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

// tsRecv waits for one value from ch, failing the test instead of hanging.
func tsRecv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: no result within %v", what, testTimeout)
		var zero T
		return zero
	}
}

// tsWaitStalled waits until n replies are withheld by the server's Stall hook.
func tsWaitStalled(t testing.TB, srv *testserver.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.NoError(t, srv.WaitStalled(ctx, n), "waiting for %d stalled replies", n)
}

// stallFirst returns a Stall hook that withholds the reply to the first request match
// accepts, and no other: a test stalls exactly one request and later ones go through.
func stallFirst(match func(r testserver.Request) bool) func(testserver.Request) bool {
	var used atomic.Bool
	return func(r testserver.Request) bool {
		return match(r) && used.CompareAndSwap(false, true)
	}
}

// ofType matches requests of type typ.
func ofType(typ uint8) func(testserver.Request) bool {
	return func(r testserver.Request) bool { return r.Type == typ }
}

// atOrPast matches READs or WRITEs (typ) at or beyond off.
func atOrPast(typ uint8, off uint64) func(testserver.Request) bool {
	return func(r testserver.Request) bool { return r.Type == typ && r.Offset >= off }
}

// closeWatch reports the CLOSE requests a server has executed. Hooks see a request
// only once it has been executed, so when a CLOSE is reported the handle is already
// gone from OpenHandles: a test waits for handles to drain on these events rather
// than by polling.
type closeWatch struct{ ch chan struct{} }

func newCloseWatch() *closeWatch { return &closeWatch{ch: make(chan struct{}, 1)} }

// observe is called from a Stall or Corrupt hook with every request.
func (w *closeWatch) observe(r testserver.Request) {
	if r.Type == testserver.TypeClose {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// waitHandles waits until srv has no open handle, waking at each CLOSE executed.
func (w *closeWatch) waitHandles(t testing.TB, srv *testserver.Server) {
	t.Helper()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	for srv.OpenHandles() != 0 {
		select {
		case <-w.ch:
		case <-timer.C:
			t.Fatalf("server still has %d open handles after %v", srv.OpenHandles(), testTimeout)
		}
	}
}

// requireClosedConn checks that err is the error of a dead channel: it matches
// net.ErrClosed.
func requireClosedConn(t testing.TB, err error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, net.ErrClosed, "want an error matching net.ErrClosed, got %v", err)
}

// requireProtocolError checks that a *ProtocolError is somewhere in err's chain.
func requireProtocolError(t testing.TB, err error) *ProtocolError {
	t.Helper()
	require.Error(t, err)
	var pe *ProtocolError
	require.True(t, errors.As(err, &pe), "want a *ProtocolError in the chain, got %T: %v", err, err)
	return pe
}

// requireWorks checks that c still answers: the channel is alive and a round trip
// succeeds. Replies are delivered in order, so anything the server sent before the
// STAT's reply (a late reply to an abandoned request) has been read and dealt with
// by the time it returns.
func requireWorks(t testing.TB, c *Client) {
	t.Helper()
	fi, err := c.Stat(testCtx(t), "/")
	require.NoError(t, err, "the client should still work")
	require.True(t, fi.IsDir())
	require.NoError(t, c.main.failed(), "the channel should still be up")
}

// tsResult is what a transfer returned.
type tsResult struct {
	n   int64
	err error
}

func (r tsResult) get() (int64, error) { return r.n, r.err }

// tsClientResult is what NewClientPipe returned.
type tsClientResult struct {
	c   *Client
	err error
}

func (r tsClientResult) get() (*Client, error) { return r.c, r.err }
