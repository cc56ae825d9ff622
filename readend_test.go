package sftp

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The end of a download. A READ's EOF says where the file ends; DATA says bytes exist.
// A server that says both about the same bytes, in whichever order the replies come,
// contradicts itself (or the file changed during the read): every reader reports it,
// after handing over what comes before that end, and none returns a shorter or holed
// result with a nil error.

const endChunk = 32 << 10 // READ size in these tests (WithMaxPacket)

// endServer serves /f (size bytes) and answers the READ at eofAt with STATUS EOF while
// faulty is set. Its replies to the READs in [eofAt, stallTo) are withheld, so a test
// releases them in the order it wants (releaseEOFLast, releaseEOFFirst).
type endServer struct {
	*testserver.Server
	c      *Client
	data   []byte
	eofAt  uint64
	faulty atomic.Bool
}

func newEndServer(t *testing.T, size int, eofAt, stallTo uint64) *endServer {
	t.Helper()
	es := &endServer{data: randBytes(size, 9), eofAt: eofAt}
	es.faulty.Store(true)
	isRead := func(r testserver.Request) bool { return r.Type == testserver.TypeRead }
	opts := testserver.Options{
		Fail: func(r testserver.Request) uint32 {
			if es.faulty.Load() && isRead(r) && r.Offset == eofAt {
				return 1 // SSH_FX_EOF
			}
			return 0
		},
		Stall: func(r testserver.Request) bool {
			return es.faulty.Load() && isRead(r) && r.Offset >= eofAt && r.Offset < stallTo
		},
	}
	es.c, es.Server = newTestServerClient(t, opts, WithMaxPacket(endChunk))
	require.NoError(t, es.WriteFile("/f", es.data, 0o644))
	return es
}

// stalledReads is how many READs in [eofAt, stallTo) the transfer sends at once.
func stalledReads(eofAt, stallTo uint64) int { return int((stallTo - eofAt) / endChunk) }

// releaseEOFLast lets the client see the DATA past the end before the EOF.
func (es *endServer) releaseEOFLast(t *testing.T, n int) {
	tsWaitStalled(t, es.Server, n)
	es.ReleaseStalledWhere(func(r testserver.Request) bool { return r.Offset != es.eofAt })
	es.ReleaseStalled()
}

// releaseEOFFirst lets the client see the EOF before the DATA past it.
func (es *endServer) releaseEOFFirst(t *testing.T, n int) {
	tsWaitStalled(t, es.Server, n)
	es.ReleaseStalledWhere(func(r testserver.Request) bool { return r.Offset == es.eofAt })
	es.ReleaseStalled()
}

// requireEndConflict checks the error names the contradiction at the offset.
func requireEndConflict(t *testing.T, err error, at int64) {
	t.Helper()
	var ec *eofConflictError
	require.True(t, errors.As(err, &ec), "want the end-of-file conflict, got %v", err)
	require.Equal(t, at, ec.at)
	require.ErrorContains(t, err, "the server reported the end of the file at")
}

// The reproduction of issue 19 item 9: a 192 KiB file whose READ at 64 KiB gets EOF
// after the DATA for 96-192 KiB arrived. Get fails, naming the contradiction; the part
// file holds exactly the 64 KiB before the reported end, with nothing written past it
// left behind; Resume against the server, now consistent, completes the file.
func TestGetEndConflictKeepsThePrefix(t *testing.T) {
	for _, order := range []string{"eof-last", "eof-first"} {
		t.Run(order, func(t *testing.T) {
			const size, eofAt = 192 << 10, 64 << 10
			es := newEndServer(t, size, eofAt, size)
			dir := t.TempDir()
			dst := filepath.Join(dir, "f")
			done := tsGo(func() error { return es.c.Get(testCtx(t), "/f", dst) })
			n := stalledReads(eofAt, size)
			if order == "eof-last" {
				es.releaseEOFLast(t, n)
			} else {
				es.releaseEOFFirst(t, n)
			}
			err := tsRecv(t, done, "Get")
			requireEndConflict(t, err, eofAt)
			_, serr := os.Lstat(dst)
			require.ErrorIs(t, serr, os.ErrNotExist, "nothing lands under the final name")
			part := readLocal(t, dst+partSuffix)
			requireSameBytes(t, es.data[:eofAt], part)

			es.faulty.Store(false)
			require.NoError(t, es.c.Get(testCtx(t), "/f", dst, Resume()))
			requireSameBytes(t, es.data, readLocal(t, dst))
		})
	}
}

// Every reader of the engine, each order of arrival: the bytes before the reported
// end, then the error.
func TestReadersEndConflict(t *testing.T) {
	const size, eofAt = 192 << 10, 64 << 10
	dir := t.TempDir()
	readers := map[string]func(f *File) ([]byte, error){
		"WriteTo/writer": func(f *File) ([]byte, error) {
			var b bytes.Buffer
			n, err := f.WriteTo(&b)
			if n != int64(b.Len()) {
				return nil, errors.New("n differs from what the writer got")
			}
			return b.Bytes(), err
		},
		"WriteTo/WriterAt": func(f *File) ([]byte, error) {
			lf, err := os.CreateTemp(dir, "out")
			if err != nil {
				return nil, err
			}
			defer lf.Close()
			n, err := f.WriteTo(lf)
			if pos, _ := lf.Seek(0, io.SeekCurrent); pos != n {
				return nil, errors.New("the file is not left after the n bytes")
			}
			b, rerr := os.ReadFile(lf.Name())
			if rerr != nil {
				return nil, rerr
			}
			return b[:min(int64(len(b)), n)], err
		},
		"ReadAt": func(f *File) ([]byte, error) {
			p := make([]byte, size+100)
			n, err := f.ReadAt(p, 0)
			return p[:n], err
		},
		"ReadAll": func(f *File) ([]byte, error) { return io.ReadAll(f) },
	}
	for name, read := range readers {
		for _, order := range []string{"eof-last", "eof-first"} {
			t.Run(name+"/"+order, func(t *testing.T) {
				es := newEndServer(t, size, eofAt, size)
				f, err := es.c.Open(testCtx(t), "/f")
				require.NoError(t, err)
				defer f.Close()
				type result struct {
					b   []byte
					err error
				}
				done := tsGo(func() result { b, err := read(f); return result{b, err} })
				// Read grows its window from one READ: 0 and 32 KiB, then 64 KiB
				// (withheld) and two more, and no more while that one is out.
				n := stalledReads(eofAt, size)
				if name == "ReadAll" {
					n = 3
				}
				if order == "eof-last" {
					es.releaseEOFLast(t, n)
				} else {
					es.releaseEOFFirst(t, n)
				}
				r := tsRecv(t, done, name)
				requireEndConflict(t, r.err, eofAt)
				requireSameBytes(t, es.data[:eofAt], r.b)
			})
		}
	}
}

// A file small enough for Get's two-round-trip path (smallfile.go): the READ of the
// listed size and the probe past it contradict each other, or the probe and the READs
// the engine goes on with. The file grows at OPEN, after the listing, so the probe
// finds data; the READ at eofAt gets EOF.
func TestGetSmallEndConflict(t *testing.T) {
	const size = 1000
	cases := []struct {
		name    string
		shorten int   // what the READ at 0 returns, if short
		eofAt   int64 // the READ at eofAt gets EOF (-1: none)
		growAt  int   // the file grows at this OPEN (1: the first)
		at      int64 // where the Get fails
	}{
		{"eof-at-0", 0, 0, 1, 0},
		{"short-then-eof", size / 2, size / 2, 1, size / 2},
		// The probe finds the end at size; the file grows before the engine's OPEN,
		// and the engine's READs find data past it.
		{"probe-eof-then-data", size / 2, -1, 2, size},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(2*size, 5)
			var srv *testserver.Server
			var opens atomic.Int32
			opts := testserver.Options{
				Fail: func(r testserver.Request) uint32 {
					if r.Type == testserver.TypeOpen && int(opens.Add(1)) == tc.growAt {
						if err := srv.WriteFile("/f", data, 0o644); err != nil {
							panic(err)
						}
					}
					if r.Type == testserver.TypeRead && int64(r.Offset) == tc.eofAt {
						return 1 // SSH_FX_EOF
					}
					return 0
				},
			}
			if tc.shorten > 0 {
				opts.Shorten = func(off int64, asked int) int {
					if off == 0 {
						return tc.shorten
					}
					return asked
				}
			}
			var c *Client
			c, srv = newTestServerClient(t, opts)
			require.NoError(t, srv.WriteFile("/f", data[:size], 0o644))
			dst := filepath.Join(t.TempDir(), "f")
			err := c.Get(testCtx(t), "/f", dst)
			requireEndConflict(t, err, tc.at)
			if tc.at > 0 {
				requireSameBytes(t, data[:tc.at], readLocal(t, dst+partSuffix))
			}
		})
	}
}

// readEnds on its own: the cases of issue 19 item 9, in both orders of arrival.
func TestReadEnds(t *testing.T) {
	type reply struct {
		off int64
		n   int // 0: EOF
	}
	cases := []struct {
		name    string
		replies []reply
		eof     int64 // -1: none
		at      int64 // where it fails; -1: it does not
	}{
		{"data only", []reply{{0, 10}, {10, 10}}, -1, -1},
		{"EOF past the data", []reply{{0, 10}, {10, 0}}, 10, -1},
		{"short DATA, then EOF for the rest", []reply{{0, 6}, {6, 0}, {10, 0}}, 6, -1},
		{"EOF for a middle READ, DATA past it", []reply{{0, 10}, {20, 10}, {10, 0}}, 10, 10},
		{"EOF below a short DATA's end", []reply{{0, 10}, {10, 4}, {12, 0}}, 12, 12},
		{"two EOFs, data between them", []reply{{30, 0}, {10, 10}, {10, 0}}, 10, 10},
		{"EOF at 0, DATA later", []reply{{0, 0}, {100, 1}}, 0, 0},
	}
	for _, tc := range cases {
		for _, reversed := range []bool{false, true} {
			e := newReadEnds()
			rs := slices.Clone(tc.replies)
			if reversed {
				slices.Reverse(rs)
			}
			for _, r := range rs {
				if r.n == 0 {
					e.sawEOF(r.off)
				} else {
					e.sawData(r.off, int64(r.n))
				}
			}
			require.Equal(t, tc.eof, e.eof, "%s (reversed %v)", tc.name, reversed)
			err := e.conflict()
			if tc.at < 0 {
				require.NoError(t, err, "%s (reversed %v)", tc.name, reversed)
				continue
			}
			requireEndConflict(t, err, tc.at)
		}
	}
}
