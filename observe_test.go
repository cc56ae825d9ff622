package sftp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/testserver"
)

// dialRecorder is a WithDialer dial function to addr on s that keeps the connections
// it made, and closes them when the test ends.
type dialRecorder struct {
	s    *sshTestServer
	addr string

	mu    sync.Mutex
	conns []*ssh.Client
}

func recordDials(t *testing.T, s *sshTestServer, addr string) *dialRecorder {
	d := &dialRecorder{s: s, addr: addr}
	t.Cleanup(func() {
		for _, sc := range d.dialled() {
			sc.Close()
		}
	})
	return d
}

func (d *dialRecorder) dial(context.Context) (*ssh.Client, error) {
	sc, err := d.s.dialErr(d.addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, sc)
		d.mu.Unlock()
	}
	return sc, err
}

// dialled returns the connections made so far.
func (d *dialRecorder) dialled() []*ssh.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.conns)
}

// logBuffer is where a test's logger writes: slog's JSON handler on a buffer, one
// record a line, with a signal on each write so that a test can wait for a record
// logged on another goroutine.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // capacity 1: something was written
}

func newLogBuffer() (*logBuffer, *slog.Logger) {
	b := &logBuffer{wrote: make(chan struct{}, 1)}
	return b, slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

// logRecord is one record as the JSON handler wrote it.
type logRecord map[string]any

func (r logRecord) msg() string { return r["msg"].(string) }

// records returns every record logged so far.
func (b *logBuffer) records(t testing.TB) []logRecord {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []logRecord
	for line := range strings.Lines(b.buf.String()) {
		var r logRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), "a record that is not JSON: %q", line)
		out = append(out, r)
	}
	return out
}

// withMsg returns the records with message msg.
func withMsg(rs []logRecord, msg string) []logRecord {
	var out []logRecord
	for _, r := range rs {
		if r.msg() == msg {
			out = append(out, r)
		}
	}
	return out
}

// await waits, bounded, until n records with message msg have been logged, and
// returns every record so far.
func (b *logBuffer) await(t testing.TB, msg string, n int) []logRecord {
	t.Helper()
	ctx := testCtx(t)
	for {
		rs := b.records(t)
		if len(withMsg(rs, msg)) >= n {
			return rs
		}
		select {
		case <-b.wrote:
		case <-ctx.Done():
			t.Fatalf("waiting for %d records %q; logged:\n%s", n, msg, b.buf.String())
		}
	}
}

// requireRecord checks that r has level and each attribute of want (JSON's values:
// numbers are float64; an error is its message, which must contain want's string).
func requireRecord(t testing.TB, r logRecord, level string, want map[string]any) {
	t.Helper()
	require.Equal(t, level, r["level"], "level of %v", r)
	for k, v := range want {
		got, ok := r[k]
		require.True(t, ok, "no attribute %q in %v", k, r)
		if s, isString := v.(string); isString && k == "err" {
			require.Contains(t, got, s, "attribute %q of %v", k, r)
			continue
		}
		require.Equal(t, v, got, "attribute %q of %v", k, r)
	}
}

// indexOf returns where the first record with message msg is in rs, or -1.
func indexOf(rs []logRecord, msg string) int {
	for i, r := range rs {
		if r.msg() == msg {
			return i
		}
	}
	return -1
}

// A data channel on a connection dialled for it (WithDialer) that is reset is given
// up: logged at Warn with its number and cause, the connection dropped with it, and
// counted, while the Client goes on. The next data channel dials again; Close closes
// both, logged at Info. The counters say the same as the log.
func TestLoggerDataChannelGivenUp(t *testing.T) {
	tsNoLeaks(t)
	s := newSSHTestServer(t, testserver.Options{})
	p := blackHoleProxy(t, s)
	dials := recordDials(t, s, p.Addr())
	logs, logger := newLogBuffer()
	c, err := NewClient(testCtx(t), s.dial(t, s.addr), withStripeMinRTT(0), WithChannels(2), WithDialer(dials.dial),
		withChannelsPerConn(1), WithKeepalive(0, 0), WithLogger(logger))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	readyDataChannel(t, c)
	rs := logs.await(t, "sftp: data channel opened", 1)
	requireRecord(t, withMsg(rs, "sftp: connection dialled")[0], "INFO", map[string]any{"connection": 1.0})
	requireRecord(t, withMsg(rs, "sftp: data channel opened")[0], "INFO", map[string]any{"channel": 1.0, "open": 1.0})
	st := c.Stats()
	require.Equal(t, int64(1), st.DataChannelsOpen)
	require.Equal(t, uint64(1), st.DataChannelsOpened)
	require.Equal(t, uint64(1), st.Dials)
	require.Zero(t, st.DataChannelsGivenUp)

	require.Positive(t, p.Break(faultproxy.Reset))
	rs = logs.await(t, "sftp: data channel given up", 1)
	requireRecord(t, withMsg(rs, "sftp: data channel given up")[0], "WARN",
		map[string]any{"channel": 1.0, "open": 0.0, "err": "connection"})
	rs = logs.await(t, "sftp: connection dropped", 1)
	requireRecord(t, withMsg(rs, "sftp: connection dropped")[0], "WARN", map[string]any{"connection": 1.0})
	st = c.Stats()
	require.Zero(t, st.DataChannelsOpen)
	require.Equal(t, uint64(1), st.DataChannelsGivenUp)
	requireWorks(t, c)
	require.Empty(t, withMsg(logs.records(t), "sftp: client failed"), "the Client lives on")

	readyDataChannel(t, c)
	logs.await(t, "sftp: data channel opened", 2)
	require.NoError(t, c.Close())
	rs = logs.records(t)
	requireRecord(t, withMsg(rs, "sftp: data channel opened")[1], "INFO", map[string]any{"channel": 2.0, "open": 1.0})
	requireRecord(t, withMsg(rs, "sftp: connection dialled")[1], "INFO", map[string]any{"connection": 2.0})
	closed := withMsg(rs, "sftp: data channel closed")
	require.Len(t, closed, 1)
	requireRecord(t, closed[0], "INFO", map[string]any{"channel": 2.0, "open": 0.0})
	require.Len(t, withMsg(rs, "sftp: data channel given up"), 1, "closing is not giving up")
	requireRecord(t, withMsg(rs, "sftp: connection closed")[0], "INFO", map[string]any{"connection": 2.0})
	require.Empty(t, withMsg(rs, "sftp: client failed"), "Close is no failure")
	st = c.Stats()
	require.Zero(t, st.DataChannelsOpen)
	require.Equal(t, uint64(2), st.DataChannelsOpened)
	require.Equal(t, uint64(1), st.DataChannelsGivenUp)
	require.Equal(t, uint64(2), st.Dials)
}

// A connection that goes silent is logged interval by interval ("keepalive
// unanswered", Warn, with how long it has been silent and the limit), then dropped,
// and the Client's failure is logged at Error with the silence as its cause. The
// misses are counted.
func TestLoggerKeepaliveFailsClient(t *testing.T) {
	tsNoLeaks(t)
	s := newSSHTestServer(t, testserver.Options{})
	p := blackHoleProxy(t, s)
	logs, logger := newLogBuffer()
	c, err := NewClient(testCtx(t), s.dial(t, p.Addr()), WithKeepalive(testKeepalive, testKeepaliveCount), WithLogger(logger))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	requireWorks(t, c)

	require.Positive(t, p.Break(faultproxy.BlackHole))
	requireDone(t, c)
	rs := logs.await(t, "sftp: client failed", 1)
	limit := float64(testKeepalive * testKeepaliveCount)
	misses := withMsg(rs, "sftp: keepalive unanswered")
	require.NotEmpty(t, misses, "no interval logged unanswered before the Client failed")
	for _, m := range misses {
		requireRecord(t, m, "WARN", map[string]any{"connection": 0.0, "limit": limit})
		require.GreaterOrEqual(t, m["silent"], float64(testKeepalive), "silent in %v", m)
	}
	requireRecord(t, withMsg(rs, "sftp: connection dropped")[0], "WARN",
		map[string]any{"connection": 0.0, "err": "the server stopped answering"})
	failed := withMsg(rs, "sftp: client failed")
	require.Len(t, failed, 1)
	requireRecord(t, failed[0], "ERROR", map[string]any{"err": "the server stopped answering"})
	require.Less(t, indexOf(rs, "sftp: keepalive unanswered"), indexOf(rs, "sftp: connection dropped"))
	require.Less(t, indexOf(rs, "sftp: connection dropped"), indexOf(rs, "sftp: client failed"))
	require.Equal(t, uint64(len(misses)), c.Stats().KeepaliveMisses)
}

// A refusal that makes the Client fall back (Azure Blob refuses to set mode and
// times) is logged once, at Warn, with what was refused and the server's STATUS; a
// server without limits@openssh.com is logged when the Client starts.
func TestLoggerCapabilityFallback(t *testing.T) {
	logs, logger := newLogBuffer()
	c, _ := newTestServerClient(t, testserver.AzureBlob(), WithLogger(logger))
	rs := logs.records(t)
	require.Len(t, rs, 1, "logged at start: %v", rs)
	requireRecord(t, rs[0], "WARN", map[string]any{"msg": "sftp: capability fallback", "capability": extLimits, "size": 32768.0})

	local := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.WriteFile(local, []byte("kept without its times"), 0o644))
	for i := range 2 {
		require.NoError(t, c.Put(testCtx(t), local, fmt.Sprint("dst", i), PreserveWherePossible()))
	}
	rs = withMsg(logs.records(t), "sftp: capability fallback")
	require.Len(t, rs, 2, "one refusal, logged once: %v", rs)
	requireRecord(t, rs[1], "WARN", map[string]any{"capability": RefusedSetstat.String(), "err": "sftp:"})
	require.Contains(t, c.Capabilities().Refused, RefusedSetstat)
}

// The counters match a known workload exactly: each Stat is one request of 13 bytes
// plus its path and one reply; a STATUS other than OK or EOF is an error; an upload
// and a download of K bytes send and receive at least K.
func TestStatsCountWorkload(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{})
	ctx := testCtx(t)
	const n = 7
	before := c.Stats()
	for range n {
		_, err := c.Stat(ctx, "/")
		require.NoError(t, err)
	}
	after := c.Stats()
	require.Equal(t, uint64(n), after.Requests-before.Requests)
	require.Equal(t, uint64(n), after.Replies-before.Replies)
	require.Equal(t, uint64(n*(13+len("/"))), after.BytesSent-before.BytesSent)
	require.Greater(t, after.BytesReceived, before.BytesReceived)
	require.Zero(t, after.Errors-before.Errors)

	_, err := c.Stat(ctx, "/missing")
	require.Error(t, err)
	st := c.Stats()
	require.Equal(t, uint64(1), st.Errors-after.Errors, "NO_SUCH_FILE is an error")
	require.Equal(t, uint64(1), st.Requests-after.Requests)

	const k = 3<<20 + 5
	data := randBytes(k, 9)
	local := filepath.Join(t.TempDir(), "up")
	require.NoError(t, os.WriteFile(local, data, 0o644))
	before = c.Stats()
	require.NoError(t, c.Put(ctx, local, "up"))
	after = c.Stats()
	require.GreaterOrEqual(t, after.BytesSent-before.BytesSent, uint64(k))
	got, err := srv.ReadFile("up")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))

	require.NoError(t, c.Get(ctx, "up", filepath.Join(t.TempDir(), "down")))
	st = c.Stats()
	require.GreaterOrEqual(t, st.BytesReceived-after.BytesReceived, uint64(k))
	require.Zero(t, st.DataChannelsOpened, "a pipe without WithPipeOpener has only its main channel")
	require.Zero(t, st.Reconnects)

	// A Client that replaces this one (a reconnecting wrapper's) goes on from its
	// counters, plus the reconnect.
	next, _ := newTestServerClient(t, testserver.Options{})
	fresh := next.Stats()
	next.noteReconnect(c)
	carried := next.Stats()
	require.Equal(t, uint64(1), carried.Reconnects)
	require.Equal(t, st.Requests+fresh.Requests, carried.Requests)
	require.Equal(t, st.BytesReceived+fresh.BytesReceived, carried.BytesReceived)
	require.Equal(t, st.Errors+fresh.Errors, carried.Errors)
}

// A Client without WithLogger logs nothing and its events cost no allocation.
func TestNoLoggerAllocatesNothing(t *testing.T) {
	var o observer
	l := &sshLink{}
	allocs := testing.AllocsPerRun(100, func() {
		o.linkEnded(l, errServerClosed, false)
		o.missed(0, testKeepalive, testKeepalive)
		o.refused(RefusedSetstat, errServerClosed)
		o.noLimits()
	})
	require.Zero(t, allocs)
}
