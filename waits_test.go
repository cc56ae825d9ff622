package sftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Every wait of every call inside the call's ctx or deadline (issue 26, items 4 and
// 7; issue 27, item 2): a server that answers everything but CLOSE must not hold a
// whole-file call past its ctx, a File's io past its deadline, nor Close or a Dir's
// CloseContext past theirs. Each CLOSE still goes out (the server sees it).

// stripedStallingCloses returns a Client that stripes over three channels of a server
// that never answers a CLOSE, and the server.
func stripedStallingCloses(t *testing.T) (*Client, *testserver.Server) {
	t.Helper()
	c, srv := newTestServerClient(t, testserver.Options{Stall: ofType(testserver.TypeClose)},
		withStripeMinRTT(0))
	c.opts.channels = 3
	c.source = channelSourceFunc(func(ctx context.Context) (*conn, error) {
		r, w := srv.Conn()
		return newConn(ctx, r, w, func() error { r.Close(); return w.Close() }, true, &c.dataPool)
	})
	return c, srv
}

const waitsSize = 12<<20 + 77

// TestReadFileSiblingCloseNeverAnswered: ReadFile returns once its ctx ends, though a
// sibling's CLOSE is never answered.
func TestReadFileSiblingCloseNeverAnswered(t *testing.T) {
	c, srv := stripedStallingCloses(t)
	data := randBytes(waitsSize, 26)
	require.NoError(t, srv.WriteFile("/big", data, 0o644))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	type result struct {
		b   []byte
		err error
	}
	res := tsGo(func() result { b, err := c.ReadFile(ctx, "/big"); return result{b, err} })
	tsWaitStalled(t, srv, 1) // a sibling's CLOSE: the data has all arrived
	require.Greater(t, len(c.chans.live()), 1, "the read striped")
	cancel()
	got := tsRecv(t, res, "ReadFile")
	if got.err != nil {
		require.ErrorIs(t, got.err, context.Canceled)
	} else {
		requireSameBytes(t, data, got.b)
	}
	srv.ReleaseStalled()
}

// TestWriteFileSiblingCloseNeverAnswered: WriteFile returns once its ctx ends, though
// a sibling's CLOSE is never answered; its error says the ctx ended (the File's own
// CLOSE, which reports a write the server failed late, was not answered either).
func TestWriteFileSiblingCloseNeverAnswered(t *testing.T) {
	c, srv := stripedStallingCloses(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	res := tsGo(func() error { return c.WriteFile(ctx, "/up", randBytes(waitsSize, 27), 0o644) })
	tsWaitStalled(t, srv, 1)
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "WriteFile"), context.Canceled)
	srv.ReleaseStalled()
}

// TestFileWriteToSiblingCloseDeadline: io.Copy from a File returns once the File's
// deadline passes, though a sibling's CLOSE is never answered; Close, the deadline
// having passed, sends its CLOSE and returns at once with the deadline's error.
func TestFileWriteToSiblingCloseDeadline(t *testing.T) {
	c, srv := stripedStallingCloses(t)
	data := randBytes(waitsSize, 28)
	require.NoError(t, srv.WriteFile("/big", data, 0o644))
	f, err := c.Open(testCtx(t), "/big")
	require.NoError(t, err)
	var buf bytes.Buffer
	type result struct {
		n   int64
		err error
	}
	res := tsGo(func() result { n, err := io.Copy(&buf, f); return result{n, err} })
	tsWaitStalled(t, srv, 1)
	require.Greater(t, len(c.chans.live()), 1, "the read striped")
	require.NoError(t, f.SetDeadline(time.Now()))
	got := tsRecv(t, res, "io.Copy")
	// Every byte had arrived before the CLOSEs: a read handle's CLOSE changes nothing.
	require.NoError(t, got.err)
	require.Equal(t, int64(len(data)), got.n)
	requireSameBytes(t, data, buf.Bytes())

	stalled := srv.Stalled()
	err = tsRecv(t, tsGo(f.Close), "Close")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	tsWaitStalled(t, srv, stalled+1) // the File's own CLOSE went out
	require.ErrorIs(t, f.Close(), fs.ErrClosed)
	srv.ReleaseStalled()
}

// TestFileReadFromSiblingCloseDeadline: io.Copy onto a File returns once the File's
// deadline passes, though a sibling's CLOSE is never answered.
func TestFileReadFromSiblingCloseDeadline(t *testing.T) {
	c, srv := stripedStallingCloses(t)
	data := randBytes(waitsSize, 29)
	f, err := c.Create(testCtx(t), "/up")
	require.NoError(t, err)
	type result struct {
		n   int64
		err error
	}
	res := tsGo(func() result { n, err := io.Copy(f, bytes.NewReader(data)); return result{n, err} })
	tsWaitStalled(t, srv, 1)
	require.NoError(t, f.SetDeadline(time.Now()))
	got := tsRecv(t, res, "io.Copy")
	if got.err != nil {
		require.ErrorIs(t, got.err, os.ErrDeadlineExceeded)
	} else {
		// Every WRITE was answered: only the siblings' CLOSEs were not.
		require.Equal(t, int64(len(data)), got.n)
	}
	require.ErrorIs(t, tsRecv(t, tsGo(f.Close), "Close"), os.ErrDeadlineExceeded)
	srv.ReleaseStalled()
}

// TestFileCloseHonoursDeadline: Close of a File whose server never answers the CLOSE
// returns at its deadline, with the deadline's error; the CLOSE went out, and the File
// is closed.
func TestFileCloseHonoursDeadline(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: ofType(testserver.TypeClose)})
	require.NoError(t, srv.WriteFile("/f", []byte("x"), 0o644))
	f, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	// A deadline that passes while Close waits, or before it starts: Close ends with
	// it either way.
	require.NoError(t, f.SetDeadline(time.Now().Add(20*time.Millisecond)))
	err = tsRecv(t, tsGo(f.Close), "Close")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	tsWaitStalled(t, srv, 1)
	require.ErrorIs(t, f.Close(), fs.ErrClosed)
	require.Error(t, f.SetDeadline(time.Time{}), "a closed File takes no deadline")
	srv.ReleaseStalled()
}

// TestFileCloseContext: CloseContext returns when its ctx ends though the server never
// answers the CLOSE, which went out; the File is closed. With an answer it returns
// the server's verdict.
func TestFileCloseContext(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallFirst(ofType(testserver.TypeClose))})
	require.NoError(t, srv.WriteFile("/f", []byte("x"), 0o644))
	f, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { return f.CloseContext(ctx) })
	tsWaitStalled(t, srv, 1)
	cancel()
	require.ErrorIs(t, tsRecv(t, res, "CloseContext"), context.Canceled)
	require.ErrorIs(t, f.CloseContext(testCtx(t)), fs.ErrClosed)

	g, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	require.NoError(t, g.CloseContext(testCtx(t)), "an answered CLOSE")
	require.Zero(t, srv.OpenHandles(), "both CLOSEs carried out (one answer withheld)")
	srv.ReleaseStalled()
}

// TestDirCloseContext: a Dir's CloseContext returns when its ctx ends though the
// server never answers the CLOSE (Close alone would wait until the connection dies).
func TestDirCloseContext(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallFirst(ofType(testserver.TypeClose))})
	require.NoError(t, srv.Mkdir("/d", 0o755))
	d, err := c.OpenDir(testCtx(t), "/d")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { return d.CloseContext(ctx) })
	tsWaitStalled(t, srv, 1)
	cancel()
	err = tsRecv(t, res, "Dir.CloseContext")
	require.ErrorIs(t, err, context.Canceled)
	var pe *fs.PathError
	require.True(t, errors.As(err, &pe), "a *fs.PathError: %v", err)
	require.ErrorIs(t, d.CloseContext(testCtx(t)), fs.ErrClosed)
	srv.ReleaseStalled()
}

// TestHashSiblingCloseNeverAnswered: Hash, reading the file through the engine (the
// test server offers no check-file and no command), returns once its ctx ends,
// though a sibling's CLOSE is never answered.
func TestHashSiblingCloseNeverAnswered(t *testing.T) {
	c, srv := stripedStallingCloses(t)
	require.NoError(t, srv.WriteFile("/big", randBytes(waitsSize, 30), 0o644))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	res := tsGo(func() error { _, err := c.Hash(ctx, "/big", SHA256); return err })
	tsWaitStalled(t, srv, 1)
	require.Greater(t, len(c.chans.live()), 1, "the read striped")
	cancel()
	if err := tsRecv(t, res, "Hash"); err != nil {
		require.ErrorIs(t, err, context.Canceled)
	}
	srv.ReleaseStalled()
}
