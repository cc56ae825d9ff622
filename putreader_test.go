package sftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/localfs"
	"github.com/sluicehq/sftp/internal/testserver"
)

// PutReader (issue 30, item 4): an upload from an io.Reader, atomic as Put is, through
// the one part-file creator (issue 26, item 1).

// streamKinds are the readers PutReader is given: a plain stream, and two it can read
// at offsets (and so resume).
var streamKinds = []struct {
	name  string
	sized bool
	make  func(t *testing.T, data []byte) io.Reader
}{
	{"stream", false, func(_ *testing.T, data []byte) io.Reader { return plainReader{bytes.NewReader(data)} }},
	{"bytes.Reader", true, func(_ *testing.T, data []byte) io.Reader { return bytes.NewReader(data) }},
	{"os.File", true, func(t *testing.T, data []byte) io.Reader {
		name := filepath.Join(t.TempDir(), "src")
		gpWrite(t, name, data)
		f, err := os.Open(name)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}},
}

// Every size a stream takes a different way with (empty, one WRITE, one byte more,
// several windows), from each kind of reader, lands whole under its name, replacing
// what was there, with no part file left and progress reported as for Put.
func TestPutReader(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	_, remote := gpDirs(t)
	w := c.limits.MaxWrite
	for _, kind := range streamKinds {
		for _, size := range []int{0, 1, w, w + 1, 3<<20 + 7} {
			data := gpData(size, uint64(size))
			dst := filepath.Join(remote, "f")
			gpWrite(t, dst, []byte("the old file"))
			var last Progress
			var reports int
			n, err := c.PutReader(ctx, kind.make(t, data), dst, OnProgress(func(p Progress) { last = p; reports++ }))
			require.NoError(t, err, "%s, %d bytes", kind.name, size)
			require.Equal(t, int64(size), n)
			require.Equal(t, data, gpRead(t, dst), "%s, %d bytes", kind.name, size)
			require.NoFileExists(t, filepath.Join(remote, ".f"+partSuffix))
			require.True(t, last.Done)
			require.Equal(t, int64(size), last.Bytes)
			require.Empty(t, last.Path, "a reader has no path")
			require.Equal(t, dst, last.Dest)
			if kind.sized {
				require.Equal(t, int64(size), last.Size)
			} else {
				require.Equal(t, int64(-1), last.Size)
			}
			require.GreaterOrEqual(t, reports, 2)
		}
	}
	// A reader already part way through is uploaded from where it is.
	r := strings.NewReader("skip this|keep this")
	_, err := r.Seek(int64(len("skip this|")), io.SeekStart)
	require.NoError(t, err)
	_, err = c.PutReader(ctx, r, filepath.Join(remote, "rest"))
	require.NoError(t, err)
	require.Equal(t, "keep this", string(gpRead(t, filepath.Join(remote, "rest"))))
}

// A link a co-tenant planted at the part name is replaced, never written through,
// for a stream of either way (two round trips, or the engine).
func TestPutReaderNeverWritesThroughAPlantedLink(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	_, remote := gpDirs(t)
	victim, unchanged := victimFile(t)
	for _, size := range []int{100, 2 << 20} {
		data := gpData(size, 7)
		part := filepath.Join(remote, ".f"+partSuffix)
		require.NoError(t, os.Symlink(victim, part))
		_, err := c.PutReader(ctx, plainReader{bytes.NewReader(data)}, filepath.Join(remote, "f"))
		require.NoError(t, err)
		unchanged()
		fi, err := os.Lstat(filepath.Join(remote, "f"))
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "the upload is in place, not the link")
		require.Equal(t, data, gpRead(t, filepath.Join(remote, "f")))
		require.NoFileExists(t, part)
	}
	// A directory at the part name is not removed, and stops the upload.
	require.NoError(t, os.Mkdir(filepath.Join(remote, ".d"+partSuffix), 0o755))
	_, err := c.PutReader(ctx, strings.NewReader("x"), filepath.Join(remote, "d"))
	require.ErrorIs(t, err, fs.ErrExist)
	require.DirExists(t, filepath.Join(remote, ".d"+partSuffix))
	require.NoFileExists(t, filepath.Join(remote, "d"))
}

// errSource is a source's own failure.
var errSource = errors.New("the source broke")

// brokenReaderAt is a source of size bytes read at offsets that fails past failAt.
type brokenReaderAt struct {
	data   []byte
	failAt int64
}

func (b *brokenReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > b.failAt {
		return 0, errSource
	}
	return copy(p, b.data[off:]), nil
}

// A failed stream leaves the destination as it was and no part file: a plain stream
// cannot continue one. A source read at offsets keeps what the server acknowledged,
// and Resume continues it from there, after checking it against the source.
func TestPutReaderFailureAndResume(t *testing.T) {
	c := resumeClient(t, t.TempDir()) // a small W: the kept part has a proven point
	ctx := testCtx(t)
	_, remote := gpDirs(t)
	dst := filepath.Join(remote, "f")
	part := filepath.Join(remote, ".f"+partSuffix)
	gpWrite(t, dst, []byte("before"))
	for _, size := range []int{100, 2 << 20} {
		src := io.MultiReader(bytes.NewReader(gpData(size, 1)), iotestErrReader{errSource})
		_, err := c.PutReader(ctx, src, dst)
		require.ErrorIs(t, err, errSource)
		require.Equal(t, []byte("before"), gpRead(t, dst))
		require.NoFileExists(t, part, "size %d", size)
	}
	_, err := c.PutReader(ctx, plainReader{strings.NewReader("x")}, dst, Resume())
	require.ErrorIs(t, err, errStreamResume)
	require.NoFileExists(t, part)

	data := gpData(6<<20, 3)
	broken := &brokenReaderAt{data: data, failAt: 4 << 20}
	_, err = c.PutReader(ctx, io.NewSectionReader(broken, 0, int64(len(data))), dst)
	require.ErrorIs(t, err, errSource)
	require.Equal(t, []byte("before"), gpRead(t, dst))
	kept := gpRead(t, part)
	require.NotEmpty(t, kept, "what the server acknowledged is kept for Resume")
	require.Equal(t, data[:len(kept)], kept)

	var first Progress
	n, err := c.PutReader(ctx, bytes.NewReader(data), dst, Resume(), OnProgress(func(p Progress) {
		if first.Dest == "" {
			first = p
		}
	}))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.Greater(t, len(kept), resumeSpan, "the part holds no proven point: the test proves nothing")
	// The source failed: a clean stop, so the part was cut and marked, and is continued
	// from its end (resumemark.go).
	require.Equal(t, int64(len(kept)), first.Bytes, "not continued from the marked part's end")
	require.Equal(t, data, gpRead(t, dst))
	require.NoFileExists(t, part)
}

// iotestErrReader returns err from every Read.
type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// Options that describe a local file fail the call before anything is sent, and so
// does Fsync where the server cannot sync; an existing directory is not replaced.
func TestPutReaderRefuses(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Extensions: map[string]string{}})
	ctx := testCtx(t)
	require.NoError(t, srv.Mkdir("/d", 0o755))
	before := srv.Requests(testserver.TypeLstat)
	for _, opt := range []TransferOption{Recursive(), Preserve(), SkipUnchanged(), Fsync()} {
		_, err := c.PutReader(ctx, strings.NewReader("x"), "/f", opt)
		require.Error(t, err)
		requirePathErr(t, err, "put", "/f")
	}
	_, err := c.PutReader(ctx, strings.NewReader("x"), "/f", Fsync())
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = c.PutReader(ctx, nil, "/f")
	requirePathErr(t, err, "put", "/f")
	require.Equal(t, before, srv.Requests(testserver.TypeLstat), "nothing was asked")
	require.Zero(t, srv.Requests(testserver.TypeOpen))

	_, err = c.PutReader(ctx, strings.NewReader("x"), "/d")
	require.ErrorIs(t, err, localfs.ErrIsDirectory)
	_, err = srv.Lstat("/.d" + partSuffix)
	require.ErrorIs(t, err, fs.ErrNotExist)
	requireWorks(t, c)
}

// The ctx ending stops the upload: the destination stays as it was and the part of a
// plain stream is removed.
func TestPutReaderCancelled(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	_, remote := gpDirs(t)
	dst := filepath.Join(remote, "f")
	gpWrite(t, dst, []byte("before"))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	src := &cancellingReader{r: bytes.NewReader(gpData(8<<20, 5)), after: 1 << 20, cancel: cancel}
	_, err := c.PutReader(ctx, src, dst)
	require.ErrorIs(t, err, context.Canceled)
	settle(t, c) // the clean-up a cancelled call leaves to the background
	require.Equal(t, []byte("before"), gpRead(t, dst))
	require.NoFileExists(t, filepath.Join(remote, ".f"+partSuffix))
	requireWorks(t, c)
}

// cancellingReader calls cancel once after bytes have been read.
type cancellingReader struct {
	r      io.Reader
	read   int
	after  int
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.read += n; c.read >= c.after {
		c.cancel()
	}
	return n, err
}

// uploads are the ways an upload creates its part file: Put and PutReader.
var uploads = []struct {
	name string
	put  func(t *testing.T, c *Client, data, remote string) error
}{
	{"Put", func(t *testing.T, c *Client, data, remote string) error {
		src := filepath.Join(t.TempDir(), "src")
		gpWrite(t, src, []byte(data))
		return c.Put(testCtx(t), src, remote)
	}},
	{"PutReader", func(t *testing.T, c *Client, data, remote string) error {
		_, err := c.PutReader(testCtx(t), strings.NewReader(data), remote)
		return err
	}},
}

// Issue 26, item 1: the part file is only ever created exclusively. A server that
// refuses the exclusive create with nothing at the name fails the upload (no create
// that could follow a link is sent instead), and a link planted between the REMOVE of
// what held the name and the second exclusive create fails it too, untouched.
func TestCreateRemotePartOnlyExclusive(t *testing.T) {
	for _, up := range uploads {
		t.Run(up.name+"/refused", func(t *testing.T) {
			c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
				if r.Type == testserver.TypeOpen && r.Path == "/.f"+partSuffix {
					return uint32(StatusFailure)
				}
				return 0
			}})
			err := up.put(t, c, "data", "/f")
			require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
			require.Equal(t, 1, srv.Requests(testserver.TypeOpen), "one exclusive OPEN, and nothing after it")
			requireWorks(t, c)
		})
		t.Run(up.name+"/replanted", func(t *testing.T) {
			var srv *testserver.Server
			opens := 0
			c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
				if r.Type == testserver.TypeOpen && r.Path == "/.f"+partSuffix {
					if opens++; opens == 2 {
						if err := srv.Symlink("/victim", "/.f"+partSuffix); err != nil {
							panic(err)
						}
					}
				}
				return 0
			}})
			require.NoError(t, srv.WriteFile("/victim", []byte("precious"), 0o600))
			require.NoError(t, srv.Symlink("/victim", "/.f"+partSuffix))
			err := up.put(t, c, "attacker", "/f")
			require.ErrorIs(t, err, &StatusError{Code: StatusFailure})
			require.Equal(t, 2, opens)
			got, err := srv.ReadFile("/victim")
			require.NoError(t, err)
			require.Equal(t, "precious", string(got))
			_, err = srv.Lstat("/f")
			require.ErrorIs(t, err, fs.ErrNotExist)
			requireWorks(t, c)
		})
	}
}
