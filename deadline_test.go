package sftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// requireDeadline checks err is a deadline error, not a "closed" one.
func requireDeadline(t testing.TB, err error) {
	t.Helper()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.Is(err, fs.ErrClosed), "a deadline is not a close: %v", err)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
}

// A deadline ends a read waiting on a server that stopped answering (OpenSSH's
// sftp-server, frozen with SIGSTOP), and a later deadline makes the File usable again.
func TestFileDeadlineEndsAStalledReadOnSFTPServer(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(3<<20, 11)
	writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
	c, p := startServer(t, dir, nil)
	ctx := testCtx(t)
	f, err := c.Open(ctx, "f")
	require.NoError(t, err)
	defer f.Close()

	head := make([]byte, 1000)
	_, err = io.ReadFull(f, head)
	require.NoError(t, err)

	p.stop(t)
	p.drainWrites()
	var sink bytes.Buffer
	res := tsGo(func() error { _, err := f.WriteTo(&sink); return err }) // io.Copy's path
	await(t, p.writeStarted, 1, "a READ on its way to the stopped server")
	require.NoError(t, f.SetDeadline(time.Now()))
	requireDeadline(t, tsRecv(t, res, "WriteTo after the deadline"))

	// Past the deadline every call fails at once, without a request.
	_, err = f.Read(make([]byte, 1))
	requireDeadline(t, err)
	_, err = f.Stat()
	requireDeadline(t, err)

	// A later deadline (none at all here) makes the File usable again, from the
	// offset the acknowledged data reached.
	require.NoError(t, p.resume())
	require.NoError(t, f.SetDeadline(time.Time{}))
	off, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(1000+sink.Len()), off)
	rest, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, data[off:], rest)
	require.NoError(t, f.Close())
	require.ErrorIs(t, f.SetDeadline(time.Now()), fs.ErrClosed)
}

// The deadline's own timer ends a stalled write (the fault server withholds a WRITE's
// reply); a deadline far off changes nothing.
func TestFileDeadlineTimerEndsAStalledWrite(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallFirst(ofType(testserver.TypeWrite))})
	ctx := testCtx(t)
	f, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	defer f.Close()

	// The WRITE is on the server, stalled, before the deadline is brought in: a
	// deadline that passed before the call started would fail it without sending, and
	// that is another test's case.
	require.NoError(t, f.SetDeadline(time.Now().Add(time.Hour)))
	wrote := make(chan error, 1)
	go func() {
		_, err := f.Write(make([]byte, 100))
		wrote <- err
	}()
	require.NoError(t, srv.WaitStalled(ctx, 1))
	require.NoError(t, f.SetDeadline(time.Now().Add(time.Millisecond)))
	requireDeadline(t, <-wrote)
	require.Equal(t, 1, srv.Stalled())

	require.NoError(t, f.SetDeadline(time.Now().Add(time.Hour)))
	n, err := io.Copy(f, bytes.NewReader([]byte("after")))
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	require.NoError(t, f.Close())
	requireWorks(t, c)
}

// A deadline already passed fails every File call at once; Close closes the File but
// does not wait for the server's verdict (the deadline bounds that wait too), and a
// "closed" error stays one.
func TestFileDeadlineInThePast(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{})
	ctx := testCtx(t)
	f, err := c.Create(ctx, "/f")
	require.NoError(t, err)
	require.NoError(t, f.SetDeadline(time.Unix(1, 0)))
	for name, call := range map[string]func() error{
		"write":    func() error { _, err := f.Write([]byte("x")); return err },
		"writeat":  func() error { _, err := f.WriteAt([]byte("x"), 3); return err },
		"readfrom": func() error { _, err := f.ReadFrom(bytes.NewReader([]byte("x"))); return err },
		"readat":   func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err },
		"stat":     func() error { _, err := f.Stat(); return err },
		"truncate": func() error { return f.Truncate(0) },
		"chmod":    func() error { return f.Chmod(0o600) },
	} {
		requireDeadline(t, call())
		_ = name
	}
	requireDeadline(t, f.Close())
	_, err = f.Write([]byte("x"))
	require.ErrorIs(t, err, fs.ErrClosed)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded))
	requireWorks(t, c) // on the File's channel, behind its CLOSE
	require.Zero(t, srv.OpenHandles(), "the CLOSE went out")
}

// The File's context reports the deadline SetDeadline set (it used to report none),
// so a context derived from it keeps it.
func TestFileDeadlineReported(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{})
	require.NoError(t, srv.WriteFile("/f", []byte("data"), 0o644))
	f, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	defer f.Close()

	_, ok := f.life.Deadline()
	require.False(t, ok, "no deadline until one is set")
	when := time.Now().Add(time.Hour)
	require.NoError(t, f.SetDeadline(when))
	got, ok := f.life.Deadline()
	require.True(t, ok)
	require.True(t, when.Equal(got))
	derived, cancel := context.WithDeadline(f.life, when.Add(time.Hour))
	defer cancel()
	got, ok = derived.Deadline()
	require.True(t, ok)
	require.True(t, when.Equal(got), "a derived context keeps the earlier deadline")

	require.NoError(t, f.SetDeadline(time.Time{}))
	_, ok = f.life.Deadline()
	require.False(t, ok, "a zero time clears it")
}
