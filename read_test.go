package sftp

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The end of WriteTo for a caller that stops once it has the bytes it expected (an HTTP
// client with Content-Length, whose going away closes the File): read.go's awaitEnd.

// closingWriter takes what WriteTo hands it, and closes f once it has want bytes, as
// a handler does when its reader hangs up. It is not an io.WriterAt: the data comes in
// order, as to an http.ResponseWriter.
type closingWriter struct {
	f    *File
	want int
	buf  bytes.Buffer
}

func (w *closingWriter) Write(p []byte) (int, error) {
	n, _ := w.buf.Write(p)
	if w.buf.Len() >= w.want {
		w.f.Close()
	}
	return n, nil
}

// Once every byte of a file whose size the server proved (its FSTAT size, then EOF
// right there) is handed over, WriteTo has nothing left to wait for: closing the
// File in the last Write does not fail it. Against OpenSSH's sftp-server, and the
// in-process server with latency and with replies reordered (the EOF before the DATA).
func TestWriteToReturnsOnceTheSizeIsDelivered(t *testing.T) {
	const size = 3<<20 + 7
	data := randBytes(size, 3)
	clients := map[string]func(t *testing.T) *Client{
		"sftp-server": func(t *testing.T) *Client {
			dir := serverDir(t)
			writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
			c, _ := sftpServerClient(t, dir, nil)
			return c
		},
		"latency": func(t *testing.T) *Client {
			c, srv := newTestServerClient(t, testserver.Options{Latency: time.Millisecond})
			require.NoError(t, srv.WriteFile("f", data, 0o644))
			return c
		},
		"reordered": func(t *testing.T) *Client {
			c, srv := newTestServerClient(t, testserver.Options{Reorder: 8})
			require.NoError(t, srv.WriteFile("f", data, 0o644))
			return c
		},
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			for range 5 {
				f, err := c.Open(testCtx(t), "f")
				require.NoError(t, err)
				w := &closingWriter{f: f, want: size}
				n, err := f.WriteTo(w)
				require.NoError(t, err)
				require.EqualValues(t, size, n)
				require.True(t, bytes.Equal(data, w.buf.Bytes()))
			}
		})
	}
}

// The FSTAT's size is a hint, not proof: when the file goes on past it, nothing is
// taken as the end before EOF is seen. A File closed once the expected bytes are in
// then fails WriteTo, with every byte handed over, rather than return nil for an end
// the server never reported.
func TestWriteToHintIsNoProof(t *testing.T) {
	const size = 3<<20 + 7
	data := randBytes(size, 4)
	c, srv := newTestServerClient(t, testserver.Options{Corrupt: fstatSize(size / 2)})
	require.NoError(t, srv.WriteFile("f", data, 0o644))
	f, err := c.Open(testCtx(t), "f")
	require.NoError(t, err)
	w := &closingWriter{f: f, want: size}
	n, err := f.WriteTo(w)
	require.ErrorIs(t, err, fs.ErrClosed)
	require.EqualValues(t, size, n)
	require.True(t, bytes.Equal(data, w.buf.Bytes()))

	// Read to the end without the early close, the same file is whole.
	f, err = c.Open(testCtx(t), "f")
	require.NoError(t, err)
	defer f.Close()
	w = &closingWriter{f: f, want: size + 1}
	n, err = f.WriteTo(w)
	require.NoError(t, err)
	require.EqualValues(t, size, n)
	require.True(t, bytes.Equal(data, w.buf.Bytes()))
	require.False(t, errors.Is(err, fs.ErrClosed))
}

// A transfer's errors name the call that made it, whether its deadline had passed
// before (nothing is sent) or passes during it: "writeto" for WriteTo, "readfrom" for
// ReadFrom (write_test.go), as each other File call names itself.
func TestWriteToErrorsNameWriteTo(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: atOrPast(testserver.TypeRead, 1<<20)})
	require.NoError(t, srv.WriteFile("f", randBytes(2<<20, 6), 0o644))
	f, err := c.Open(testCtx(t), "f")
	require.NoError(t, err)
	defer f.Close()
	var sink bytes.Buffer
	res := tsGo(func() error { _, err := f.WriteTo(&sink); return err })
	tsWaitStalled(t, srv, 1)
	require.NoError(t, f.SetDeadline(time.Now()))
	requireOp(t, tsRecv(t, res, "WriteTo"), "writeto")
	_, err = f.WriteTo(&sink)
	requireOp(t, err, "writeto")
	srv.ReleaseStalled()
}

// requireOp checks err is a deadline error of op.
func requireOp(t *testing.T, err error, op string) {
	t.Helper()
	requireDeadline(t, err)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, op, pe.Op, "%v", err)
}

// WriteTo of a directory (OpenSSH's sftp-server opens one as a file) fails as
// os.File's read of one does, rather than with the bare FAILURE its READs get.
func TestWriteToOfADirectory(t *testing.T) {
	dir := serverDir(t)
	c, _ := sftpServerClient(t, dir, nil)
	f, err := c.Open(testCtx(t), ".")
	require.NoError(t, err)
	defer f.Close()
	var sink bytes.Buffer
	n, err := f.WriteTo(&sink)
	require.ErrorIs(t, err, syscall.EISDIR)
	require.Zero(t, n)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "writeto", pe.Op)
}
