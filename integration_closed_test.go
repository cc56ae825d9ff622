package sftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Client whose channel is gone, closed by the client or by the death of the server:
// every call must fail with an error matching net.ErrClosed, and none may hang.

// clientCalls is one call of every Client method that talks to the server.
func clientCalls(ctx context.Context, c *Client) map[string]func() error {
	when := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	return map[string]func() error{
		"Open":      func() error { _, err := c.Open(ctx, "f"); return err },
		"Create":    func() error { _, err := c.Create(ctx, "new"); return err },
		"OpenFile":  func() error { _, err := c.OpenFile(ctx, "f", os.O_RDWR, 0); return err },
		"Stat":      func() error { _, err := c.Stat(ctx, "f"); return err },
		"Lstat":     func() error { _, err := c.Lstat(ctx, "f"); return err },
		"ReadDir":   func() error { _, err := c.ReadDir(ctx, "."); return err },
		"Mkdir":     func() error { return c.Mkdir(ctx, "d", 0o755) },
		"MkdirAll":  func() error { return c.MkdirAll(ctx, "d/e", 0o755) },
		"Remove":    func() error { return c.Remove(ctx, "f") },
		"RemoveAll": func() error { return c.RemoveAll(ctx, "f") },
		"Rename":    func() error { return c.Rename(ctx, "f", "g") },
		"Chmod":     func() error { return c.Chmod(ctx, "f", 0o600) },
		"Chown":     func() error { return c.Chown(ctx, "f", 0, 0) },
		"Chtimes":   func() error { return c.Chtimes(ctx, "f", when, when) },
		"Lchtimes":  func() error { return c.Lchtimes(ctx, "f", when, when) },
		"Truncate":  func() error { return c.Truncate(ctx, "f", 0) },
		"Readlink":  func() error { _, err := c.Readlink(ctx, "f"); return err },
		"Symlink":   func() error { return c.Symlink(ctx, "f", "l") },
		"Link":      func() error { return c.Link(ctx, "f", "h") },
		"RealPath":  func() error { _, err := c.RealPath(ctx, "f"); return err },
		"Getwd":     func() error { _, err := c.Getwd(ctx); return err },
		"HomeDir":   func() error { _, err := c.HomeDir(ctx); return err },
		"StatVFS":   func() error { _, err := c.StatVFS(ctx, "."); return err },
		"ReadFile":  func() error { _, err := c.ReadFile(ctx, "f"); return err },
		"WriteFile": func() error { return c.WriteFile(ctx, "f", []byte("x"), 0o644) },
	}
}

// fileCalls is one call of every File method that talks to the server, but Close,
// after which the others would fail for another reason.
func fileCalls(f *File) map[string]func() error {
	b := make([]byte, 4)
	return map[string]func() error{
		"Read":     func() error { _, err := f.Read(b); return err },
		"Write":    func() error { _, err := f.Write(b); return err },
		"ReadAt":   func() error { _, err := f.ReadAt(b, 0); return err },
		"WriteAt":  func() error { _, err := f.WriteAt(b, 0); return err },
		"SeekEnd":  func() error { _, err := f.Seek(0, io.SeekEnd); return err },
		"ReadFrom": func() error { _, err := f.ReadFrom(bytes.NewReader(b)); return err },
		"WriteTo":  func() error { _, err := f.WriteTo(io.Discard); return err },
		"Stat":     func() error { _, err := f.Stat(); return err },
		"Sync":     f.Sync,
		"Truncate": func() error { return f.Truncate(0) },
		"Chmod":    func() error { return f.Chmod(0o600) },
		"Chown":    func() error { return f.Chown(0, 0) },
		"Chtimes":  func() error { return f.Chtimes(time.Now(), time.Now()) },
	}
}

// requireAllClosed runs every call, each bounded, and requires net.ErrClosed from all.
func requireAllClosed(t *testing.T, calls map[string]func() error) {
	t.Helper()
	for name, call := range calls {
		var err error
		within(t, func() { err = call() })
		require.ErrorIs(t, err, net.ErrClosed, name)
	}
}

func TestIntegrationClosedClient(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("content"), 0o644)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	f, err := c.OpenFile(ctx, "f", os.O_RDWR, 0)
	require.NoError(t, err)

	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	requireAllClosed(t, clientCalls(ctx, c))
	requireAllClosed(t, fileCalls(f))
	require.ErrorIs(t, f.Close(), net.ErrClosed)

	// Nothing reached the server after Close.
	require.Equal(t, []byte("content"), readLocal(t, filepath.Join(dir, "f")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestIntegrationServerKilled(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("content"), 0o644)
	c, srv := startServer(t, dir, nil)
	ctx := testCtx(t)
	f, err := c.OpenFile(ctx, "f", os.O_RDWR, 0)
	require.NoError(t, err)

	srv.kill(t)
	requireAllClosed(t, clientCalls(ctx, c))
	requireAllClosed(t, fileCalls(f))
	require.ErrorIs(t, f.Close(), net.ErrClosed)
	var err2 error
	within(t, func() { err2 = c.Close() })
	require.NoError(t, err2)
}

func TestIntegrationServerKilledWithCallPending(t *testing.T) {
	dir := serverDir(t)
	c, srv := startServer(t, dir, nil)
	ctx := testCtx(t)

	srv.stop(t)
	srv.drainWrites()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, ".")
		errc <- err
	}()
	await(t, srv.writeDone, 1, "the STAT to be sent") // so the server dies with it outstanding
	srv.kill(t)

	select {
	case err := <-errc:
		require.ErrorIs(t, err, net.ErrClosed)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "EOF with a request outstanding")
		requirePathErr(t, err, "stat", ".")
	case <-time.After(testTimeout):
		t.Fatal("the pending call did not return after the server died")
	}
	_, err := c.Lstat(ctx, ".")
	require.ErrorIs(t, err, net.ErrClosed)
}

func TestIntegrationCloseWithCallPending(t *testing.T) {
	dir := serverDir(t)
	c, srv := startServer(t, dir, nil)
	ctx := testCtx(t)
	t.Cleanup(func() { srv.kill(t) }) // a stopped server would not see its stdin close

	srv.stop(t)
	srv.drainWrites()
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReadDir(ctx, ".")
		errc <- err
	}()
	await(t, srv.writeDone, 1, "the OPENDIR to be sent")
	var cerr error
	within(t, func() { cerr = c.Close() })
	require.NoError(t, cerr)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(testTimeout):
		t.Fatal("the pending call did not return after Close")
	}
}

func TestIntegrationCloseDuringTransfer(t *testing.T) {
	dir := serverDir(t)
	c, srv := startServer(t, dir, nil)
	ctx := testCtx(t)
	t.Cleanup(func() { srv.kill(t) })
	f, err := c.Create(ctx, "f")
	require.NoError(t, err)

	// With the server stopped the upload fills the pipe and blocks in a write; Close
	// must still end it.
	srv.stop(t)
	srv.drainWrites()
	type result struct {
		n   int64
		err error
	}
	resc := make(chan result, 1)
	go func() {
		n, err := f.ReadFrom(onlyReader{io.LimitReader(zeroReader{}, 64<<20)})
		resc <- result{n, err}
	}()
	await(t, srv.writeStarted, 1, "a WRITE to be sent")
	var cerr error
	within(t, func() { cerr = c.Close() })
	require.NoError(t, cerr)
	select {
	case r := <-resc:
		require.ErrorIs(t, r.err, net.ErrClosed)
		require.Zero(t, r.n, "nothing was acknowledged")
	case <-time.After(testTimeout):
		t.Fatal("ReadFrom did not return after Close")
	}
}

// killingReader yields data and kills the server once it has yielded killAt bytes, so
// the upload loses its server halfway with WRITEs in flight.
type killingReader struct {
	srv    *serverProc
	data   []byte
	off    int
	killAt int
	killed bool
	sent   int // bytes yielded before the kill
}

func (r *killingReader) Read(p []byte) (int, error) {
	if r.off >= r.killAt && !r.killed {
		r.killed, r.sent = true, r.off
		_ = r.srv.cmd.Process.Kill()
		<-r.srv.exited
	}
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

func TestIntegrationServerKilledDuringUpload(t *testing.T) {
	dir := serverDir(t)
	c, srv := startServer(t, dir, nil)
	ctx := testCtx(t)
	f, err := c.Create(ctx, "f")
	require.NoError(t, err)

	data := randBytes(16<<20, 12)
	r := &killingReader{srv: srv, data: data, killAt: 2 << 20}
	var n int64
	within(t, func() { n, err = f.ReadFrom(onlyReader{r}) })
	require.True(t, r.killed)
	require.ErrorIs(t, err, net.ErrClosed)
	requirePathErr(t, err, "readfrom", "f")
	require.LessOrEqual(t, n, int64(r.sent), "only what the server can have acknowledged")
	// What was reported written is on disk.
	got := readLocal(t, filepath.Join(dir, "f"))
	require.GreaterOrEqual(t, len(got), int(n))
	require.Equal(t, data[:n], got[:n])
}

// killingWriter kills the server at its first Write, so the download loses its server
// with READs in flight.
type killingWriter struct {
	srv    *serverProc
	buf    bytes.Buffer
	killed bool
}

func (w *killingWriter) Write(p []byte) (int, error) {
	if !w.killed {
		w.killed = true
		_ = w.srv.cmd.Process.Kill()
		<-w.srv.exited
	}
	return w.buf.Write(p)
}

func TestIntegrationServerKilledDuringDownload(t *testing.T) {
	dir := serverDir(t)
	// A small window, so most of the file is still to be asked for when the server
	// dies: 4 READs of 261120 bytes in flight against 8 MiB.
	data := randBytes(8<<20, 13)
	writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
	c, srv := startServer(t, dir, []Option{WithMaxInflight(4)})
	ctx := testCtx(t)
	f, err := c.Open(ctx, "f")
	require.NoError(t, err)

	w := &killingWriter{srv: srv}
	var n int64
	within(t, func() { n, err = f.WriteTo(w) })
	require.True(t, w.killed)
	require.ErrorIs(t, err, net.ErrClosed)
	require.Less(t, n, int64(len(data)))
	require.Equal(t, int64(w.buf.Len()), n)
	require.Equal(t, data[:n], w.buf.Bytes(), "what was delivered is right")

	// A sequential Read fails the same way once the data that arrived is used up.
	within(t, func() { _, err = io.Copy(io.Discard, onlyReader{f}) })
	require.ErrorIs(t, err, net.ErrClosed)
	require.False(t, errors.Is(err, io.EOF), "a dead server is not the end of the file")
}

func TestIntegrationReadFileStalledServer(t *testing.T) {
	// The server stalls right after answering the OPEN (and the STAT sent with it):
	// ReadFile must still return when its ctx ends, although neither the READs nor the
	// CLOSE will be answered.
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), randBytes(1<<20, 14), 0o644)
	c, srv := startServer(t, dir, nil)
	t.Cleanup(func() { srv.kill(t) })
	ctx, cancel := context.WithCancel(testCtx(t))

	stopped := srv.stopAfterReplies(2)
	srv.drainWrites()
	errc := make(chan error, 1)
	go func() {
		_, err := c.ReadFile(ctx, "f")
		errc <- err
	}()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(testTimeout):
		t.Fatal("no reply to the OPEN")
	}
	// The STAT, the OPEN and a request after them: the download is under way.
	await(t, srv.writeDone, 3, "STAT, OPEN and a request of the download")
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
		requirePathErr(t, err, "read", "f")
	case <-time.After(testTimeout):
		t.Fatal("ReadFile did not return after its ctx ended")
	}
}
