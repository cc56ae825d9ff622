package sftp

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A File remembers what it was opened for, as an *os.File does: a read of a File opened
// write-only (Create) and a write of one opened read-only (Open) fail at once with
// EBADF, naming the mode, without a request to the server. Against OpenSSH's
// sftp-server, which would answer a READ on a write-only handle with NO_SUCH_FILE.

// accessCall is one of File's reading or writing entry points.
type accessCall struct {
	name  string
	write bool // a write (needs write access) rather than a read
	do    func(f *File) error
}

// plainReader hides every interface but io.Reader, so that io.Copy goes through
// File.ReadFrom.
type plainReader struct{ io.Reader }

var accessCalls = []accessCall{
	{"Read", false, func(f *File) error { _, err := f.Read(make([]byte, 4)); return err }},
	{"ReadAt", false, func(f *File) error { _, err := f.ReadAt(make([]byte, 4), 0); return err }},
	{"WriteTo", false, func(f *File) error { _, err := f.WriteTo(io.Discard); return err }},
	{"io.Copy from", false, func(f *File) error { _, err := io.Copy(io.Discard, f); return err }},
	{"io.ReadAll", false, func(f *File) error { _, err := io.ReadAll(f); return err }},
	{"Write", true, func(f *File) error { _, err := f.Write([]byte("new!")); return err }},
	{"WriteAt", true, func(f *File) error { _, err := f.WriteAt([]byte("new!"), 0); return err }},
	{"WriteString", true, func(f *File) error { _, err := f.WriteString("new!"); return err }},
	{"ReadFrom", true, func(f *File) error { _, err := f.ReadFrom(strings.NewReader("new!")); return err }},
	{"io.Copy to", true, func(f *File) error {
		_, err := io.Copy(f, plainReader{strings.NewReader("new!")})
		return err
	}},
}

// The operation names the File's errors carry, per entry point.
var accessCallOps = map[string]string{
	"Read": "read", "ReadAt": "readat", "WriteTo": "writeto", "io.Copy from": "writeto",
	"io.ReadAll": "read", "Write": "write", "WriteAt": "writeat", "WriteString": "write",
	"ReadFrom": "readfrom", "io.Copy to": "readfrom",
}

func TestFileRefusesWhatItWasNotOpenedFor(t *testing.T) {
	modes := []struct {
		name        string
		flag        int
		read, write bool
		word        string // how the error names the mode
	}{
		{"O_RDONLY", os.O_RDONLY, true, false, "read-only"},
		{"O_WRONLY", os.O_WRONLY, false, true, "write-only"},
		{"O_RDWR", os.O_RDWR, true, true, ""},
	}
	for _, m := range modes {
		for _, call := range accessCalls {
			t.Run(m.name+"/"+call.name, func(t *testing.T) {
				dir := serverDir(t)
				writeLocal(t, filepath.Join(dir, "f"), []byte("content"), 0o644)
				c, srv := startServer(t, dir, nil)
				f, err := c.OpenFile(testCtx(t), "f", m.flag, 0)
				require.NoError(t, err)
				defer f.Close()

				srv.drainWrites()
				err = call.do(f)
				if (call.write && m.write) || (!call.write && m.read) {
					require.NoError(t, err, "%s on a file opened %s", call.name, m.name)
					require.NotZero(t, len(srv.writeDone), "the call went to the server")
					return
				}
				require.ErrorIs(t, err, syscall.EBADF, "what os.File gives")
				require.NotErrorIs(t, err, fs.ErrNotExist)
				requirePathErr(t, err, accessCallOps[call.name], "f")
				require.Contains(t, err.Error(), "bad file descriptor")
				require.Contains(t, err.Error(), m.word)
				require.Zero(t, len(srv.writeStarted)+len(srv.writeDone), "no request reached the server")
				require.Equal(t, []byte("content"), readLocal(t, filepath.Join(dir, "f")))

				// The File is still good for what it was opened for, and closes cleanly.
				if m.write {
					_, err = f.WriteAt([]byte("C"), 0)
				} else {
					_, err = f.ReadAt(make([]byte, 7), 0)
				}
				require.NoError(t, err)
				require.NoError(t, f.Close())
			})
		}
	}
}

// The refusals are os.File's: the same syscall.EBADF for a read of a write-only file
// and a write of a read-only one, so code checking errors.Is(err, syscall.EBADF) works
// on both.
func TestFileAccessErrorsMatchOS(t *testing.T) {
	dir := serverDir(t)
	local := filepath.Join(dir, "f")
	writeLocal(t, local, []byte("content"), 0o644)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	osW, err := os.OpenFile(local, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer osW.Close()
	_, osErr := osW.Read(make([]byte, 1))
	w, err := c.Create(ctx, "g")
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Read(make([]byte, 1))
	require.ErrorIs(t, osErr, syscall.EBADF)
	require.ErrorIs(t, err, syscall.EBADF)

	osR, err := os.Open(local)
	require.NoError(t, err)
	defer osR.Close()
	_, osErr = osR.Write([]byte("x"))
	r, err := c.Open(ctx, "f")
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Write([]byte("x"))
	require.ErrorIs(t, osErr, syscall.EBADF)
	require.ErrorIs(t, err, syscall.EBADF)

	// A closed File says closed, whatever its mode, as os.File does.
	require.NoError(t, w.Close())
	_, err = w.Read(make([]byte, 1))
	require.ErrorIs(t, err, fs.ErrClosed)
	require.NotErrorIs(t, err, syscall.EBADF)
}

// Create writes, and what it wrote is read back through a File opened for reading, or
// through one opened os.O_RDWR, as Create's documentation advises.
func TestCreateWriteOnlyAndReadBackWithRDWR(t *testing.T) {
	dir := serverDir(t)
	c, srv := startServer(t, dir, nil)
	ctx := testCtx(t)

	f, err := c.Create(ctx, "f")
	require.NoError(t, err)
	_, err = f.WriteString("hello")
	require.NoError(t, err)
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	srv.drainWrites()
	_, err = io.ReadAll(f)
	require.ErrorIs(t, err, syscall.EBADF)
	require.Zero(t, len(srv.writeStarted)+len(srv.writeDone), "no request reached the server")
	require.NoError(t, f.Close())

	rw, err := c.OpenFile(ctx, "f", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	require.NoError(t, err)
	_, err = rw.WriteString("hello, again")
	require.NoError(t, err)
	_, err = rw.Seek(0, io.SeekStart)
	require.NoError(t, err)
	got, err := io.ReadAll(rw)
	require.NoError(t, err)
	require.Equal(t, "hello, again", string(got))
	require.NoError(t, rw.Close())
	require.Equal(t, []byte("hello, again"), readLocal(t, filepath.Join(dir, "f")))
}

// Attribute changes are the server's to refuse: Truncate of a File opened read-only
// is sent, and OpenSSH's server refuses it (ftruncate(2) on a read-only descriptor),
// rather than the client guessing.
func TestTruncateOfReadOnlyFileGoesToTheServer(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("content"), 0o644)
	c, srv := startServer(t, dir, nil)
	f, err := c.Open(testCtx(t), "f")
	require.NoError(t, err)
	defer f.Close()
	srv.drainWrites()
	err = f.Truncate(1)
	require.Equal(t, 1, len(srv.writeDone), "one FSETSTAT sent")
	require.Error(t, err)
	require.NotErrorIs(t, err, syscall.EBADF)
	var se *StatusError
	require.True(t, errors.As(err, &se), "the server's answer: %v", err)
	require.True(t, bytes.Equal([]byte("content"), readLocal(t, filepath.Join(dir, "f"))))
}
