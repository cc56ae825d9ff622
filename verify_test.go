package sftp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Verify (verify.go) against OpenSSH's sftp-server over pipes, where the server's hash
// is had by reading the file back, and against faults: a byte flipped in transit one
// way or the other (a fault stream between the Client and a real server), a server
// that lies about its hash, ctx ending while the hash is awaited.

// verifySizes cover the small-file paths (one READ or WRITE), the engine, and a
// transfer of many chunks with a short tail.
var verifySizes = []int{0, 1, 1000, 261120, 3*261120 + 5, 5<<20 + 77}

func TestVerifyGetPut(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	for i, size := range verifySizes {
		data := randBytes(size, uint64(i))
		for _, alg := range []HashAlgorithm{"", SHA512, SHA1, MD5} {
			opt := Verify()
			if alg != "" {
				opt = VerifyWith(alg)
			}
			local := filepath.Join(t.TempDir(), "f")
			writeLocal(t, local, data, 0o644)
			require.NoError(t, c.Put(ctx, local, "up", opt), "put %d %s", size, alg)
			require.Equal(t, data, readLocal(t, filepath.Join(dir, "up")))
			back := filepath.Join(t.TempDir(), "back")
			require.NoError(t, c.Get(ctx, "up", back, opt), "get %d %s", size, alg)
			require.Equal(t, data, readLocal(t, back))
			requireNoParts(t, dir, filepath.Dir(back))
		}
	}
	require.ErrorIs(t, c.Get(ctx, "up", filepath.Join(t.TempDir(), "x"), VerifyWith("crc32")), ErrUnknownHashAlgorithm)
}

// requireNoParts checks that no part file is left in dirs.
func requireNoParts(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		matches, err := filepath.Glob(filepath.Join(d, "*"+partSuffix))
		require.NoError(t, err)
		hidden, err := filepath.Glob(filepath.Join(d, ".*"+partSuffix))
		require.NoError(t, err)
		require.Empty(t, append(matches, hidden...), "part files left in %s", d)
	}
}

// flipStream stands between a Client and its server and changes one byte of the
// payload of the first packet of type typ that holds more than skip bytes, in either
// direction: corruption in transit that SSH would not let through, which Verify must
// catch whatever lets it through.
type flipStream struct {
	typ  sshfx.PacketType
	skip int // header bytes of the packet not to touch (length, type, id, ...)
	done atomic.Bool
}

// flipClient is a Client on OpenSSH's sftp-server serving dir over pipes, with flip
// between them: on the replies, or on the requests.
func flipClient(t *testing.T, dir string, flip *flipStream, replies bool) *Client {
	t.Helper()
	return startPipeServer(t, sftpServerCmd(t, dir), func(r io.ReadCloser, w io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
		if replies {
			return &flipReader{ReadCloser: r, fs: flip}, w
		}
		return r, &flipWriter{w: w, fs: flip}
	})
}

// flip changes the packet's byte in the middle of its payload, once.
func (fs *flipStream) flip(pkt []byte) {
	if len(pkt) > 4 && sshfx.PacketType(pkt[4]) == fs.typ && len(pkt) > fs.skip && fs.done.CompareAndSwap(false, true) {
		pkt[fs.skip+(len(pkt)-fs.skip)/2] ^= 0x55
	}
}

type flipReader struct {
	io.ReadCloser
	fs  *flipStream
	buf []byte // the rest of the packet read, not yet returned
}

func (f *flipReader) Read(p []byte) (int, error) {
	if len(f.buf) == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(f.ReadCloser, hdr[:]); err != nil {
			return 0, err
		}
		pkt := make([]byte, 4+binary.BigEndian.Uint32(hdr[:]))
		copy(pkt, hdr[:])
		if _, err := io.ReadFull(f.ReadCloser, pkt[4:]); err != nil {
			return 0, err
		}
		f.fs.flip(pkt)
		f.buf = pkt
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

type flipWriter struct {
	w   io.WriteCloser
	fs  *flipStream
	mu  sync.Mutex
	acc []byte // bytes of a packet not yet whole
}

func (f *flipWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acc = append(f.acc, p...)
	for len(f.acc) >= 4 {
		n := 4 + int(binary.BigEndian.Uint32(f.acc))
		if len(f.acc) < n {
			break
		}
		pkt := append([]byte(nil), f.acc[:n]...)
		f.acc = f.acc[n:]
		f.fs.flip(pkt)
		if _, err := f.w.Write(pkt); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (f *flipWriter) Close() error { return f.w.Close() }

// requireVerifyError checks err is a *VerifyError for path whose hash here is that of
// local and the server's that of remote, and returns it.
func requireVerifyError(t *testing.T, err error, op, path string, local, remote []byte) *VerifyError {
	t.Helper()
	var ve *VerifyError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, op, ve.Op)
	require.Equal(t, path, ve.Path)
	require.Equal(t, SHA256, ve.Algorithm)
	l, r := sha256.Sum256(local), sha256.Sum256(remote)
	require.Equal(t, l[:], ve.Local)
	require.Equal(t, r[:], ve.Remote)
	require.ErrorContains(t, err, "sha256")
	return ve
}

// TestVerifyCatchesCorruption flips a byte in transit: of a DATA the Client receives
// (Get) or of a WRITE it sends (Put). The copy fails with a *VerifyError that names
// the file and both hashes, the destination is not made, and the part file is kept,
// holding the bytes that did not match.
func TestVerifyCatchesCorruption(t *testing.T) {
	for _, size := range []int{1000, 3*261120 + 5} {
		data := randBytes(size, 5)
		t.Run("get", func(t *testing.T) {
			dir := serverDir(t)
			writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
			flip := &flipStream{typ: sshfx.TypeData, skip: 13}
			c := flipClient(t, dir, flip, true)
			dst := filepath.Join(t.TempDir(), "g")
			err := c.Get(testCtx(t), "f", dst, Verify())
			require.True(t, flip.done.Load())
			got := readLocal(t, dst+partSuffix)
			require.NotEqual(t, data, got)
			ve := requireVerifyError(t, err, "get", "f", got, data)
			require.Equal(t, dst+partSuffix, ve.Part)
			_, err = os.Stat(dst)
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
		t.Run("put", func(t *testing.T) {
			dir := serverDir(t)
			src := filepath.Join(t.TempDir(), "f")
			writeLocal(t, src, data, 0o644)
			flip := &flipStream{typ: sshfx.TypeWrite, skip: 40}
			c := flipClient(t, dir, flip, false)
			err := c.Put(testCtx(t), src, "g", Verify())
			require.True(t, flip.done.Load())
			got := readLocal(t, filepath.Join(dir, ".g"+partSuffix))
			require.NotEqual(t, data, got)
			ve := requireVerifyError(t, err, "put", "g", data, got)
			require.Equal(t, ".g"+partSuffix, ve.Part)
			_, err = os.Stat(filepath.Join(dir, "g"))
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

// TestVerifyResumed checks a resumed file whole: the prefix an earlier run left (the
// local part for Get, checked by nothing else; the remote part for Put, whose last
// bytes only Resume compares) is hashed before the rest moves. A byte wrong in it is
// caught. The part is long, and the bad byte far below its end, so that where Resume
// takes up the transfer (W, lowered here to 1 MiB, before the part's end) the prefix
// holds the byte.
func TestVerifyResumed(t *testing.T) {
	const size, partLen, bad = 24 << 20, 20 << 20, 100
	data := randBytes(size, 6)
	for _, good := range []bool{true, false} {
		prefix := append([]byte(nil), data[:partLen]...)
		if !good {
			prefix[bad] ^= 1
		}
		whole := append(append([]byte(nil), prefix...), data[partLen:]...)
		t.Run("get", func(t *testing.T) {
			dir := serverDir(t)
			writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
			c, _ := sftpServerClient(t, dir, []Option{withSpan(1 << 20)})
			dst := filepath.Join(t.TempDir(), "g")
			writeLocal(t, dst+partSuffix, prefix, 0o644)
			err := c.Get(testCtx(t), "f", dst, Resume(), Verify())
			if good {
				require.NoError(t, err)
				requireSameBytes(t, data, readLocal(t, dst))
				return
			}
			got := readLocal(t, dst+partSuffix)
			require.True(t, bytes.Equal(whole, got), "resumed after the part's end: %d bytes, first difference at %d", len(got), firstDiff(whole, got))
			requireVerifyError(t, err, "get", "f", got, data)
		})
		t.Run("put", func(t *testing.T) {
			dir := serverDir(t)
			src := filepath.Join(t.TempDir(), "f")
			writeLocal(t, src, data, 0o644)
			writeLocal(t, filepath.Join(dir, ".g"+partSuffix), prefix, 0o644)
			c, _ := sftpServerClient(t, dir, []Option{withSpan(1 << 20)})
			err := c.Put(testCtx(t), src, "g", Resume(), Verify())
			if good {
				require.NoError(t, err)
				requireSameBytes(t, data, readLocal(t, filepath.Join(dir, "g")))
				return
			}
			got := readLocal(t, filepath.Join(dir, ".g"+partSuffix))
			require.True(t, bytes.Equal(whole, got), "resumed after the part's end: %d bytes, first difference at %d", len(got), firstDiff(whole, got))
			requireVerifyError(t, err, "put", "g", data, got)
		})
	}
}

// TestVerifyTree copies trees both ways with Verify; one file corrupted in transit
// fails alone, listed in the TreeError as a *VerifyError, and the others are copied.
func TestVerifyTree(t *testing.T) {
	local := filepath.Join(t.TempDir(), "tree")
	files := map[string][]byte{}
	for i, size := range []int{0, 10, 5000, 300 << 10, 2<<20 + 1} {
		for _, sub := range []string{"", "a", "a/b"} {
			name := filepath.Join(sub, "f"+string(rune('0'+i)))
			files[name] = randBytes(size, uint64(i*7+len(sub)))
			require.NoError(t, os.MkdirAll(filepath.Join(local, sub), 0o755))
			writeLocal(t, filepath.Join(local, name), files[name], 0o644)
		}
	}
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	require.NoError(t, c.Put(ctx, local, "tree", Recursive(), Verify()))
	back := filepath.Join(t.TempDir(), "back")
	require.NoError(t, c.Get(ctx, "tree", back, Recursive(), Verify()))
	for name, data := range files {
		require.Equal(t, data, readLocal(t, filepath.Join(dir, "tree", name)), name)
		require.Equal(t, data, readLocal(t, filepath.Join(back, name)), name)
	}

	flip := &flipStream{typ: sshfx.TypeData, skip: 13 + 100<<10} // only a DATA of a large file
	fc := flipClient(t, dir, flip, true)
	again := filepath.Join(t.TempDir(), "again")
	err := fc.Get(ctx, "tree", again, Recursive(), Verify(), Parallel(1))
	require.True(t, flip.done.Load())
	var te *TreeError
	require.ErrorAs(t, err, &te)
	require.Len(t, te.Failed, 1, "%v", err)
	var ve *VerifyError
	require.ErrorAs(t, te.Failed[0], &ve)
	copied := 0
	for name, data := range files {
		if got, err := os.ReadFile(filepath.Join(again, name)); err == nil {
			require.Equal(t, data, got, name)
			copied++
		}
	}
	require.Equal(t, len(files)-1, copied)
}

// TestVerifyLyingServer: a server whose check-file answers a digest that is not the
// file's fails the Verify, and the part is kept; it cannot make a Get pass with bytes
// it did not send.
func TestVerifyLyingServer(t *testing.T) {
	data := randBytes(100<<10, 8)
	lie := make([]byte, 32)
	c, srv := newTestServerClient(t, testserver.Options{Corrupt: answerCheckFile(func(id uint32) []byte {
		return extendedReply(id, append(sftpString("sha256"), lie...))
	})})
	require.NoError(t, srv.WriteFile("f", data, 0o644))
	dst := filepath.Join(t.TempDir(), "g")
	err := c.Get(testCtx(t), "f", dst, Verify())
	var ve *VerifyError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, lie, ve.Remote)
	require.Equal(t, data, readLocal(t, dst+partSuffix), "the part keeps the bytes received")
}

// TestVerifyCtx: ctx ending while the server's hash is read back ends the Get at once;
// the part stays, nothing is renamed, and no goroutine outlives the call.
func TestVerifyCtx(t *testing.T) {
	var reads atomic.Int32
	c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
		// The download's READs come first; the read-back starts at 0 again.
		return r.Type == testserver.TypeRead && r.Offset == 0 && reads.Add(1) == 2
	}})
	data := randBytes(2<<20, 9)
	require.NoError(t, srv.WriteFile("f", data, 0o644))
	dst := filepath.Join(t.TempDir(), "g")
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { return c.Get(ctx, "f", dst, Verify()) })
	tsWaitStalled(t, srv, 1)
	cancel()
	err := tsRecv(t, res, "Get to return")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, data, readLocal(t, dst+partSuffix))
	_, err = os.Stat(dst)
	require.ErrorIs(t, err, fs.ErrNotExist)
	srv.ReleaseStalled()
	requireWorks(t, c)
}

// TestVerifyWaitsInOrder: pieces that arrive early wait for their turn to be hashed,
// in the window; against a server that answers in shuffled order and cuts every READ
// short, whose rests the window must still let out (read.go's exception counts the
// pieces parked for hashing as stuck), the Get completes and verifies.
func TestVerifyWaitsInOrder(t *testing.T) {
	for seed := range uint64(4) {
		c, srv := newTestServerClient(t, testserver.Options{Reorder: 16, Seed: seed, ReadCap: 1000 + int(seed)*777},
			WithMaxInflight(4+int(seed)))
		data := randBytes(1<<20+int(seed), seed)
		require.NoError(t, srv.WriteFile("f", data, 0o644))
		dst := filepath.Join(t.TempDir(), "g")
		require.NoError(t, c.Get(testCtx(t), "f", dst, Verify()), "seed %d", seed)
		require.Equal(t, data, readLocal(t, dst))
	}
}

// TestVerifyInPlace: a download written in place (here /dev/null) is checked after it
// is written: a bad byte is reported, with no part to keep.
func TestVerifyInPlace(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Skipf("no %s: %v", os.DevNull, err)
	}
	data := randBytes(600<<10, 10)
	c, srv := newTestServerClient(t, testserver.Options{Corrupt: flipFirstData()})
	require.NoError(t, srv.WriteFile("f", data, 0o644))
	err := c.Get(testCtx(t), "f", os.DevNull, Verify())
	var ve *VerifyError
	require.ErrorAs(t, err, &ve)
	require.Empty(t, ve.Part)
	require.NoError(t, c.Get(testCtx(t), "f", os.DevNull, Verify()), "once the server sends the bytes right")
}

// flipFirstData changes a byte of the first DATA reply's payload.
func flipFirstData() func(testserver.Request, []byte) [][]byte {
	var used atomic.Bool
	return func(_ testserver.Request, reply []byte) [][]byte {
		if len(reply) < 14 || reply[4] != testserver.TypeData || !used.CompareAndSwap(false, true) {
			return nil
		}
		p := append([]byte(nil), reply...)
		p[len(p)-1] ^= 1
		return [][]byte{p}
	}
}

// TestVerifyPutReader: PutReader with Verify, from a plain stream (the engine's
// in-order producer) and from a reader read at offsets, small and large, and a stream
// corrupted in transit, caught with the part kept.
func TestVerifyPutReader(t *testing.T) {
	dir := serverDir(t)
	c := newServerClient(t, dir)
	ctx := testCtx(t)
	for i, size := range []int{0, 1000, 3*261120 + 5} {
		data := randBytes(size, uint64(40+i))
		for _, r := range []io.Reader{struct{ io.Reader }{bytes.NewReader(data)}, bytes.NewReader(data)} {
			n, err := c.PutReader(ctx, r, "up", Verify())
			require.NoError(t, err, "%d bytes from %T", size, r)
			require.Equal(t, int64(size), n)
			requireSameBytes(t, data, readLocal(t, filepath.Join(dir, "up")))
		}
	}
	data := randBytes(3*261120+5, 45)
	flip := &flipStream{typ: sshfx.TypeWrite, skip: 40}
	fc := flipClient(t, dir, flip, false)
	_, err := fc.PutReader(ctx, struct{ io.Reader }{bytes.NewReader(data)}, "bad", Verify())
	require.True(t, flip.done.Load())
	got := readLocal(t, filepath.Join(dir, ".bad"+partSuffix))
	requireVerifyError(t, err, "put", "bad", data, got)
}
