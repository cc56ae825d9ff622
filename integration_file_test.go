package sftp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// File methods against OpenSSH's sftp-server, checked on the local file system.

func TestIntegrationFileReadWriteSeek(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := filepath.Join(dir, "f")

	f, err := c.OpenFile(ctx, "f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()

	n, err := f.Write([]byte("hello "))
	require.NoError(t, err)
	require.Equal(t, 6, n)
	n, err = f.WriteString("world")
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Equal(t, []byte("hello world"), readLocal(t, local))

	pos, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(11), pos)
	pos, err = f.Seek(-5, io.SeekEnd)
	require.NoError(t, err)
	require.Equal(t, int64(6), pos)
	b := make([]byte, 5)
	_, err = io.ReadFull(f, b)
	require.NoError(t, err)
	require.Equal(t, []byte("world"), b)
	n, err = f.Read(b)
	require.Equal(t, 0, n)
	require.Equal(t, io.EOF, err, "io.EOF bare at the end")

	pos, err = f.Seek(2, io.SeekStart)
	require.NoError(t, err)
	require.Equal(t, int64(2), pos)
	pos, err = f.Seek(2, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(4), pos)
	b = make([]byte, 3)
	_, err = io.ReadFull(f, b)
	require.NoError(t, err)
	require.Equal(t, []byte("o w"), b)

	// A negative result or an unknown whence is refused and leaves the offset alone.
	_, err = f.Seek(-100, io.SeekCurrent)
	require.ErrorIs(t, err, syscall.EINVAL)
	requirePathErr(t, err, "seek", "f")
	_, err = f.Seek(-1, io.SeekStart)
	require.ErrorIs(t, err, syscall.EINVAL)
	_, err = f.Seek(-12, io.SeekEnd)
	require.ErrorIs(t, err, syscall.EINVAL)
	_, err = f.Seek(0, 7)
	require.ErrorIs(t, err, syscall.EINVAL)
	pos, err = f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(7), pos)

	// Writing past the end leaves a hole of zeros.
	pos, err = f.Seek(3, io.SeekEnd)
	require.NoError(t, err)
	require.Equal(t, int64(14), pos)
	_, err = f.Write([]byte("!"))
	require.NoError(t, err)
	require.Equal(t, []byte("hello world\x00\x00\x00!"), readLocal(t, local))

	// A Read after a Write sees the new data, not an old read-ahead.
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	b = make([]byte, 5)
	_, err = io.ReadFull(f, b)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("WORLD"), 6)
	require.NoError(t, err)
	_, err = f.Seek(6, io.SeekStart)
	require.NoError(t, err)
	_, err = io.ReadFull(f, b)
	require.NoError(t, err)
	require.Equal(t, []byte("WORLD"), b)

	n, err = f.Read(nil)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestIntegrationFileReadAtWriteAt(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := filepath.Join(dir, "f")

	f, err := c.OpenFile(ctx, "f", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	defer f.Close()

	n, err := f.WriteAt([]byte("world"), 6)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	n, err = f.WriteAt([]byte("hello "), 0)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	require.Equal(t, []byte("hello world"), readLocal(t, local))
	pos, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Zero(t, pos, "WriteAt leaves the offset alone")

	b := make([]byte, 5)
	n, err = f.ReadAt(b, 6)
	require.Equal(t, 5, n)
	if err != nil { // ending exactly at EOF may or may not say so
		require.Equal(t, io.EOF, err)
	}
	require.Equal(t, []byte("world"), b)

	// Across EOF: what there is, with io.EOF.
	b = make([]byte, 10)
	n, err = f.ReadAt(b, 8)
	require.Equal(t, 3, n)
	require.Equal(t, io.EOF, err)
	require.Equal(t, []byte("rld"), b[:n])
	// At or past EOF: nothing, io.EOF.
	n, err = f.ReadAt(b, 11)
	require.Zero(t, n)
	require.Equal(t, io.EOF, err)
	n, err = f.ReadAt(b, 1<<40)
	require.Zero(t, n)
	require.Equal(t, io.EOF, err)

	_, err = f.ReadAt(b, -1)
	require.ErrorIs(t, err, syscall.EINVAL)
	_, err = f.WriteAt(b, -1)
	require.ErrorIs(t, err, syscall.EINVAL)
	n, err = f.ReadAt(nil, 0)
	require.NoError(t, err)
	require.Zero(t, n)

	// Many packets each way, at an odd offset.
	big := randBytes(3*maxDataSize+12345, 4)
	n, err = f.WriteAt(big, 1001)
	require.NoError(t, err)
	require.Equal(t, len(big), n)
	got := readLocal(t, local)
	require.Len(t, got, 1001+len(big))
	require.Equal(t, big, got[1001:])
	back := make([]byte, len(big))
	n, err = f.ReadAt(back, 1001)
	require.Equal(t, len(big), n)
	if err != nil {
		require.Equal(t, io.EOF, err)
	}
	require.Equal(t, big, back)
	// Across EOF after many packets.
	back = make([]byte, len(big)+500)
	n, err = f.ReadAt(back, 1001)
	require.Equal(t, len(big), n)
	require.Equal(t, io.EOF, err)
	require.Equal(t, big, back[:n])
}

// transferSizes straddle the 261120-byte packet size OpenSSH publishes.
var transferSizes = []int{0, 1, maxDataSize - 1, maxDataSize, maxDataSize + 1, 5<<20 + 7}

func TestIntegrationFileReadFrom(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	for _, size := range transferSizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			name := fmt.Sprintf("up%d", size)
			data := randBytes(size, 5)
			f, err := c.Create(ctx, name)
			require.NoError(t, err)
			n, err := f.ReadFrom(onlyReader{bytes.NewReader(data)})
			require.NoError(t, err)
			require.Equal(t, int64(size), n)
			pos, err := f.Seek(0, io.SeekCurrent)
			require.NoError(t, err)
			require.Equal(t, int64(size), pos, "ReadFrom advances the offset")
			require.NoError(t, f.Close())
			got := readLocal(t, filepath.Join(dir, name))
			require.Len(t, got, size)
			require.True(t, bytes.Equal(data, got), "content differs")
		})
	}

	// From a nonzero offset, after a Write.
	f, err := c.Create(ctx, "mid")
	require.NoError(t, err)
	_, err = f.Write([]byte("head:"))
	require.NoError(t, err)
	data := randBytes(maxDataSize+3, 6)
	n, err := f.ReadFrom(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.NoError(t, f.Close())
	require.Equal(t, append([]byte("head:"), data...), readLocal(t, filepath.Join(dir, "mid")))

	// A failing source: what was read before the error is written, and the source's
	// error comes back as it is.
	errSource := errors.New("source broke")
	f, err = c.Create(ctx, "srcerr")
	require.NoError(t, err)
	defer f.Close()
	n, err = f.ReadFrom(io.MultiReader(bytes.NewReader(data[:1000]), errReader{errSource}))
	require.ErrorIs(t, err, errSource)
	require.Equal(t, int64(1000), n)
	require.Equal(t, data[:1000], readLocal(t, filepath.Join(dir, "srcerr")))
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestIntegrationFileWriteTo(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	for _, size := range transferSizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			name := fmt.Sprintf("down%d", size)
			data := randBytes(size, 7)
			writeLocal(t, filepath.Join(dir, name), data, 0o644)
			f, err := c.Open(ctx, name)
			require.NoError(t, err)
			defer f.Close()
			var buf bytes.Buffer
			n, err := f.WriteTo(onlyWriter{&buf})
			require.NoError(t, err)
			require.Equal(t, int64(size), n)
			require.Equal(t, size, buf.Len())
			require.True(t, bytes.Equal(data, buf.Bytes()), "content differs")
			pos, err := f.Seek(0, io.SeekCurrent)
			require.NoError(t, err)
			require.Equal(t, int64(size), pos, "WriteTo advances the offset")
			// At EOF there is nothing more.
			n, err = f.WriteTo(&buf)
			require.NoError(t, err)
			require.Zero(t, n)
		})
	}

	// From the middle, after a Read.
	data := randBytes(2*maxDataSize+9, 8)
	writeLocal(t, filepath.Join(dir, "mid"), data, 0o644)
	f, err := c.Open(ctx, "mid")
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 777)
	_, err = io.ReadFull(f, head)
	require.NoError(t, err)
	var buf bytes.Buffer
	n, err := f.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)-777), n)
	require.Equal(t, data, append(head, buf.Bytes()...))

	// A failing destination: its error comes back as it is.
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	errSink := errors.New("sink broke")
	n, err = f.WriteTo(failWriter{errSink})
	require.ErrorIs(t, err, errSink)
	require.Zero(t, n)
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestIntegrationFileCopyReadAll(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	data := randBytes(2<<20+333, 9)

	// Up: io.Copy through ReadFrom, and through plain Writes (bytes.Reader's WriteTo).
	for _, src := range []io.Reader{onlyReader{bytes.NewReader(data)}, bytes.NewReader(data)} {
		f, err := c.Create(ctx, "up")
		require.NoError(t, err)
		n, err := io.Copy(f, src)
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), n)
		require.NoError(t, f.Close())
		require.True(t, bytes.Equal(data, readLocal(t, filepath.Join(dir, "up"))))
	}

	// Down: io.Copy through WriteTo, and through small Reads.
	f, err := c.Open(ctx, "up")
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, f)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.True(t, bytes.Equal(data, buf.Bytes()))

	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	buf.Reset()
	n, err = io.CopyBuffer(onlyWriter{&buf}, onlyReader{f}, make([]byte, 1000))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.True(t, bytes.Equal(data, buf.Bytes()))

	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	all, err := io.ReadAll(onlyReader{f})
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, all))

	// bufio with a tiny buffer: thousands of small sequential Reads.
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)
	br := bufio.NewReaderSize(onlyReader{f}, 16)
	got := make([]byte, 0, len(data))
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, b)
	}
	require.True(t, bytes.Equal(data, got))
}

func TestIntegrationFileStatSyncName(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := filepath.Join(dir, "sub", "f")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	writeLocal(t, local, []byte("12345"), 0o640)
	mtime := time.Date(2003, 4, 5, 6, 7, 8, 0, time.UTC)
	require.NoError(t, os.Chtimes(local, mtime, mtime))

	f, err := c.OpenFile(ctx, "sub/f", os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, "sub/f", f.Name())

	fi, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, "f", fi.Name())
	require.Equal(t, int64(5), fi.Size())
	require.Equal(t, fs.FileMode(0o640), fi.Mode())
	require.True(t, mtime.Equal(fi.ModTime()))
	fa, ok := fi.Sys().(*FileAttrs)
	require.True(t, ok)
	st := localStat(t, local)
	require.Equal(t, st.Uid, fa.UID)
	require.Equal(t, st.Gid, fa.GID)

	_, err = f.WriteAt([]byte("678"), 5)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	fi, err = f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(8), fi.Size())

	// Without fsync@openssh.com Sync says it is unsupported rather than pretending.
	delete(c.exts, extFsync)
	err = f.Sync()
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requirePathErr(t, err, "sync", "sub/f")
}

func TestIntegrationFileSetstat(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	local := filepath.Join(dir, "f")
	writeLocal(t, local, []byte("hello world"), 0o644)

	f, err := c.OpenFile(ctx, "f", os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()

	_, err = f.Seek(8, io.SeekStart)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(5))
	require.Equal(t, []byte("hello"), readLocal(t, local))
	pos, err := f.Seek(0, io.SeekCurrent)
	require.NoError(t, err)
	require.Equal(t, int64(8), pos, "Truncate leaves the offset alone")
	require.NoError(t, f.Truncate(7))
	require.Equal(t, []byte("hello\x00\x00"), readLocal(t, local))
	require.ErrorIs(t, f.Truncate(-1), syscall.EINVAL)

	require.NoError(t, f.Chmod(0o604))
	fi, err := os.Lstat(local)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o604), fi.Mode())

	require.NoError(t, f.Chown(os.Getuid(), os.Getgid()))
	if os.Getuid() == 0 {
		require.NoError(t, f.Chown(65534, 65534))
		st := localStat(t, local)
		require.Equal(t, uint32(65534), st.Uid)
		require.Equal(t, uint32(65534), st.Gid)
	}
	require.ErrorIs(t, f.Chown(0, -1), syscall.EINVAL)

	atime := time.Date(2011, 1, 2, 3, 4, 5, 0, time.UTC)
	mtime := time.Date(2012, 6, 7, 8, 9, 10, 0, time.UTC)
	require.NoError(t, f.Chtimes(atime, mtime))
	st := localStat(t, local)
	require.Equal(t, atime.Unix(), st.Atim.Sec)
	require.Equal(t, mtime.Unix(), st.Mtim.Sec)
	err = f.Chtimes(time.Unix(-10, 0), mtime)
	requirePathErr(t, err, "chtimes", "f")
	var se *StatusError
	require.False(t, errors.As(err, &se), "refused by the client: %v", err)
}

func TestIntegrationFileClose(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	writeLocal(t, filepath.Join(dir, "f"), []byte("hello"), 0o644)

	f, err := c.OpenFile(ctx, "f", os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, 2)
	_, err = f.Read(b) // leave a read-ahead behind
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = f.Close()
	require.ErrorIs(t, err, fs.ErrClosed)
	requirePathErr(t, err, "close", "f")

	// Every call that would reach the server, and those that would not.
	calls := fileCalls(f)
	calls["WriteString"] = func() error { _, err := f.WriteString("x"); return err }
	calls["Seek"] = func() error { _, err := f.Seek(0, io.SeekStart); return err }
	for name, call := range calls {
		err := call()
		require.ErrorIs(t, err, fs.ErrClosed, name)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe, name)
	}
	require.Equal(t, []byte("hello"), readLocal(t, filepath.Join(dir, "f")), "nothing reached the file")

	// The handle really is closed on the server: the client can still work.
	_, err = c.Stat(ctx, "f")
	require.NoError(t, err)
}
