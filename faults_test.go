package sftp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Faults a real server produces only by accident: a connection that dies mid-transfer,
// malformed replies, WRITEs that fail part way, a refused FSTAT, a bad handshake.

// pendingStat stalls every STAT of /pending, so a test can keep one call waiting while
// the connection dies under a transfer.
func pendingStat(r testserver.Request) bool {
	return r.Type == testserver.TypeStat && r.Path == "/pending"
}

func TestFaultServerDiesMidDownload(t *testing.T) {
	const size = 8<<20 + 123
	for _, tc := range []struct {
		name string
		opts testserver.Options
	}{
		// Requests: limits, the pending STAT, OPEN, FSTAT, then READs: the 20th READ
		// never arrives.
		{"DropAfterRequests", testserver.Options{DropAfterRequests: 24}},
		// The connection is cut inside a DATA reply.
		{"DropAfterBytes", testserver.Options{DropAfterBytes: 5<<20 + 77}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Stall = pendingStat
			c, srv := newTestServerClient(t, tc.opts)
			data := randBytes(size, 1)
			require.NoError(t, srv.WriteFile("/big", data, 0o644))

			pending := tsGo(func() error { _, err := c.Stat(context.Background(), "/pending"); return err })
			tsWaitStalled(t, srv, 1)

			f, err := c.Open(testCtx(t), "/big")
			require.NoError(t, err)
			var buf bytes.Buffer
			res := tsRecv(t, tsGo(func() tsResult { n, err := f.WriteTo(&buf); return tsResult{n, err} }), "WriteTo")
			t.Logf("WriteTo: n=%d err=%v", res.n, res.err)
			requireClosedConn(t, res.err)
			require.Less(t, res.n, int64(size))
			require.Equal(t, res.n, int64(buf.Len()))
			require.True(t, bytes.Equal(data[:res.n], buf.Bytes()), "the bytes delivered before the failure must be right")

			requireClosedConn(t, tsRecv(t, pending, "the pending Stat"))
			requireDeadClient(t, c)
			requireClosedConn(t, f.Close())
			tsRecv(t, tsGo(c.Close), "Client.Close")
		})
	}
}

func TestFaultServerDiesMidUpload(t *testing.T) {
	const size = 8<<20 + 123
	for _, tc := range []struct {
		name string
		opts testserver.Options
	}{
		// Requests: limits, the pending STAT, OPEN, then WRITEs: the 21st never arrives.
		{"DropAfterRequests", testserver.Options{DropAfterRequests: 24}},
		// VERSION, limits and HANDLE take about 270 bytes and a STATUS 28: the cut comes
		// about ten WRITE acknowledgements in, of 33.
		{"DropAfterBytes", testserver.Options{DropAfterBytes: 600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Stall = pendingStat
			c, srv := newTestServerClient(t, tc.opts)
			data := randBytes(size, 2)

			pending := tsGo(func() error { _, err := c.Stat(context.Background(), "/pending"); return err })
			tsWaitStalled(t, srv, 1)

			f, err := c.Create(testCtx(t), "/up")
			require.NoError(t, err)
			res := tsRecv(t, tsGo(func() tsResult { n, err := f.ReadFrom(bytes.NewReader(data)); return tsResult{n, err} }), "ReadFrom")
			t.Logf("ReadFrom: n=%d err=%v", res.n, res.err)
			requireClosedConn(t, res.err)
			require.Less(t, res.n, int64(size))
			require.Zero(t, res.n%int64(c.Limits().MaxWrite), "n must be where a WRITE starts")

			// Every byte reported written is on the server, and right.
			got, err := srv.ReadFile("/up")
			require.NoError(t, err)
			require.GreaterOrEqual(t, int64(len(got)), res.n)
			require.True(t, bytes.Equal(data[:res.n], got[:res.n]))

			requireClosedConn(t, tsRecv(t, pending, "the pending Stat"))
			requireDeadClient(t, c)
			requireClosedConn(t, f.Close())
			tsRecv(t, tsGo(c.Close), "Client.Close")
		})
	}
}

// requireDeadClient checks that calls on a Client whose channel died fail at once with
// net.ErrClosed.
func requireDeadClient(t *testing.T, c *Client) {
	t.Helper()
	ctx := testCtx(t)
	_, err := c.Stat(ctx, "/")
	requireClosedConn(t, err)
	_, err = c.ReadDir(ctx, "/")
	requireClosedConn(t, err)
	_, err = c.Open(ctx, "/big")
	requireClosedConn(t, err)
	requireClosedConn(t, c.Mkdir(ctx, "/d", 0o755))
}

// corruptOp is a call whose first reply of type typ is the one the fault hits.
type corruptOp struct {
	name string
	typ  uint8
	run  func(ctx context.Context, c *Client) error
}

var corruptOps = []corruptOp{
	{"STATUS/Mkdir", testserver.TypeStatus, func(ctx context.Context, c *Client) error {
		return c.Mkdir(ctx, "/newdir", 0o755)
	}},
	{"HANDLE/Open", testserver.TypeHandle, func(ctx context.Context, c *Client) error {
		f, err := c.Open(ctx, "/file")
		if err == nil {
			f.Close() // fails or not depending on when the fault is read: either is fine
		}
		return err
	}},
	{"DATA/ReadAt", testserver.TypeData, func(ctx context.Context, c *Client) error {
		f, err := c.Open(ctx, "/file")
		if err != nil {
			return fmt.Errorf("open, before the fault: %w", err)
		}
		defer f.Close()
		p := make([]byte, corruptFileSize)
		_, err = f.ReadAt(p, 0)
		return err
	}},
	{"ATTRS/Stat", testserver.TypeAttrs, func(ctx context.Context, c *Client) error {
		_, err := c.Stat(ctx, "/file")
		return err
	}},
	{"NAME/ReadDir", testserver.TypeName, func(ctx context.Context, c *Client) error {
		_, err := c.ReadDir(ctx, "/")
		return err
	}},
	{"EXTENDED_REPLY/StatVFS", testserver.TypeExtendedReply, func(ctx context.Context, c *Client) error {
		_, err := c.StatVFS(ctx, "/")
		return err
	}},
}

// corruptFileSize spans several READs, so a fault on the first DATA always leaves
// others outstanding.
const corruptFileSize = 1 << 20

// tsSkipFirst lets the first reply of type typ through untouched before corrupt sees
// any: NewClientPipe's limits@openssh.com query gets the first EXTENDED_REPLY, and the
// fault is meant for StatVFS's.
func tsSkipFirst(typ uint8, corrupt func(testserver.Request, []byte) [][]byte) func(testserver.Request, []byte) [][]byte {
	var seen bool // hooks of one session run one at a time
	return func(r testserver.Request, reply []byte) [][]byte {
		if len(reply) > 4 && reply[4] == typ && !seen {
			seen = true
			return nil
		}
		return corrupt(r, reply)
	}
}

// TestFaultMalformedReplies applies each malformed packet to each reply type. The call
// meeting it must fail with an error matching both *ProtocolError and net.ErrClosed (a
// duplicate may arrive after its call succeeded: then the next call fails), the channel
// must be closed afterwards with the protocol error as cause, and Close must work.
func TestFaultMalformedReplies(t *testing.T) {
	kinds := []struct {
		name    string
		corrupt func(typ uint8) func(testserver.Request, []byte) [][]byte
		mayPass bool // the fault comes after the reply the call needs
	}{
		{"Oversize", testserver.CorruptOversize, false},
		{"Truncate", testserver.CorruptTruncate, false},
		{"UnknownType", testserver.CorruptUnknownType, false},
		{"WrongID", testserver.CorruptWrongID, false},
		{"Repeat", testserver.CorruptRepeat, true},
	}
	for _, k := range kinds {
		for _, op := range corruptOps {
			t.Run(k.name+"/"+op.name, func(t *testing.T) {
				corrupt := k.corrupt(op.typ)
				if op.typ == testserver.TypeExtendedReply {
					corrupt = tsSkipFirst(op.typ, corrupt)
				}
				// A repeated DATA is followed by the replies of the other READs
				// in flight, so the transfer cannot finish.
				mayPass := k.mayPass && op.typ != testserver.TypeData
				runCorrupt(t, testserver.Options{Corrupt: corrupt}, op, mayPass)
			})
		}
	}
	t.Run("LongData/ReadAt", func(t *testing.T) {
		runCorrupt(t, testserver.Options{Corrupt: testserver.CorruptLongData()}, corruptOpNamed(t, "DATA/ReadAt"), false)
	})
	t.Run("AttrsFlags/Stat", func(t *testing.T) {
		runCorrupt(t, testserver.Options{Corrupt: testserver.CorruptAttrsFlags()}, corruptOpNamed(t, "ATTRS/Stat"), false)
	})
	// The FSTAT a download sends alongside its first READ is only a hint, but a
	// malformed answer to it still condemns the channel.
	for name, corrupt := range map[string]func(testserver.Request, []byte) [][]byte{
		"AttrsFlags": testserver.CorruptAttrsFlags(),
		"Truncate":   testserver.CorruptTruncate(testserver.TypeAttrs),
		"WrongID":    testserver.CorruptWrongID(testserver.TypeAttrs),
	} {
		t.Run(name+"/FSTAT-of-WriteTo", func(t *testing.T) {
			runCorrupt(t, testserver.Options{Corrupt: corrupt}, corruptOp{"WriteTo", testserver.TypeAttrs,
				func(ctx context.Context, c *Client) error {
					f, err := c.Open(ctx, "/file")
					if err != nil {
						return fmt.Errorf("open, before the fault: %w", err)
					}
					defer f.Close()
					_, err = f.WriteTo(io.Discard)
					return err
				}}, false)
		})
	}
}

func corruptOpNamed(t *testing.T, name string) corruptOp {
	i := slices.IndexFunc(corruptOps, func(op corruptOp) bool { return op.name == name })
	require.GreaterOrEqual(t, i, 0, "no corrupt op %q", name)
	return corruptOps[i]
}

func runCorrupt(t *testing.T, opts testserver.Options, op corruptOp, mayPass bool) {
	c, srv := newTestServerClient(t, opts)
	require.NoError(t, srv.WriteFile("/file", randBytes(corruptFileSize, 3), 0o644))

	ctx := testCtx(t)
	err := tsRecv(t, tsGo(func() error { return op.run(ctx, c) }), op.name)
	t.Logf("%s: %v", op.name, err)
	if !mayPass || err != nil {
		// The call that met the fault learns of it the way every later call does.
		requireChannelFailed(t, err)
	}
	// The fault is on the wire before any reply to a later request, so the next call
	// finds the channel closed, and learns why.
	_, err = c.Stat(ctx, "/file")
	requireClosedConn(t, err)
	requireProtocolError(t, err)
	tsRecv(t, tsGo(c.Close), "Client.Close")
}

// TestFaultUploadFailsPartWay: the server refuses WRITEs from some offset on. ReadFrom
// must report the server's error and exactly the bytes before the first refused
// WRITE, and those bytes must be on the server.
func TestFaultUploadFailsPartWay(t *testing.T) {
	const size = 4<<20 + 99
	const w = maxDataSize // WRITE size the default limits give
	firstFailed := int64((1<<20)/w+1) * w
	for _, tc := range []struct {
		name     string
		opts     testserver.Options
		failAt   int64 // offset of the first WRITE refused
		exactLen bool  // the server holds nothing beyond it
	}{
		{"every WRITE past 1MiB", testserver.Options{Fail: failWritesFrom(1<<20, false)}, firstFailed, true},
		{"one WRITE past 1MiB", testserver.Options{Fail: failWritesFrom(1<<20, true)}, firstFailed, false},
		{"every WRITE past 1MiB, reordered", testserver.Options{Fail: failWritesFrom(1<<20, false), Reorder: 16}, firstFailed, true},
		{"MaxFileSize", testserver.Options{MaxFileSize: 3 << 20}, (3 << 20) / w * w, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTestServerClient(t, tc.opts)
			require.Equal(t, w, c.Limits().MaxWrite)
			data := randBytes(size, 4)

			f, err := c.Create(testCtx(t), "/up")
			require.NoError(t, err)
			res := tsRecv(t, tsGo(func() tsResult { n, err := f.ReadFrom(bytes.NewReader(data)); return tsResult{n, err} }), "ReadFrom")
			t.Logf("ReadFrom: n=%d err=%v", res.n, res.err)
			var se *StatusError
			require.True(t, errors.As(res.err, &se), "want a *StatusError, got %T: %v", res.err, res.err)
			require.Equal(t, StatusFailure, se.Code)
			require.Equal(t, tc.failAt, res.n, "n must be the offset of the first failed WRITE")

			got, err := srv.ReadFile("/up")
			require.NoError(t, err)
			if tc.exactLen {
				require.Equal(t, tc.failAt, int64(len(got)))
			}
			require.True(t, bytes.Equal(data[:res.n], got[:res.n]), "the acknowledged prefix must be on the server")

			require.NoError(t, f.Close())
			requireWorks(t, c)
			require.Zero(t, srv.OpenHandles())

			// WriteAt reports the same through its n (the one-shot hook is spent).
			f, err = c.OpenFile(testCtx(t), "/up2", os.O_WRONLY|os.O_CREATE, 0o644)
			require.NoError(t, err)
			n, err := tsRecv(t, tsGo(func() tsResult {
				n, err := f.WriteAt(data, 0)
				return tsResult{int64(n), err}
			}), "WriteAt").get()
			if tc.exactLen {
				require.True(t, errors.As(err, &se), "WriteAt: want a *StatusError, got %v", err)
				require.Equal(t, tc.failAt, n)
			} else {
				require.NoError(t, err)
				require.Equal(t, int64(size), n)
			}
			require.NoError(t, f.Close())
		})
	}
}

// failWritesFrom returns a Fail hook refusing WRITEs at or past off: all of them, or
// only the first (once).
func failWritesFrom(off uint64, once bool) func(testserver.Request) uint32 {
	var done bool // Fail runs on the session's reader, one request at a time
	return func(r testserver.Request) uint32 {
		if r.Type != testserver.TypeWrite || r.Offset < off || (once && done) {
			return 0
		}
		done = true
		return testserver.StatusFailure
	}
}

// TestFaultDownloadFailsPartWay: the server refuses READs from some offset on, or
// claims the file ends there. Every way of reading must deliver exactly the bytes
// before that offset, then the server's error (or the end of the file), and the
// channel stays up: a refused READ is an answer, not a broken protocol.
func TestFaultDownloadFailsPartWay(t *testing.T) {
	const size = 4<<20 + 99
	const r = maxDataSize // READ size the default limits give
	failAt := int64((1<<20)/r+1) * r
	for _, tc := range []struct {
		name    string
		code    uint32
		reorder int
	}{
		{"FAILURE", testserver.StatusFailure, 0},
		{"FAILURE, reordered", testserver.StatusFailure, 16},
		{"PERMISSION_DENIED", testserver.StatusPermissionDenied, 0},
		{"EOF", testserver.StatusEOF, 0},
		{"EOF, reordered", testserver.StatusEOF, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refuse := func(req testserver.Request) uint32 {
				if req.Type == testserver.TypeRead && req.Offset >= 1<<20 {
					return tc.code
				}
				return 0
			}
			c, srv := newTestServerClient(t, testserver.Options{Fail: refuse, Reorder: tc.reorder})
			data := randBytes(size, 7)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			f, err := c.Open(testCtx(t), "/f")
			require.NoError(t, err)
			defer f.Close()
			requireErr := func(what string, err error) {
				t.Helper()
				if tc.code == testserver.StatusEOF {
					require.NoError(t, err, "%s: a premature EOF is still the end of the file", what)
					return
				}
				var se *StatusError
				require.True(t, errors.As(err, &se), "%s: want a *StatusError, got %v", what, err)
				require.Equal(t, StatusCode(tc.code), se.Code)
			}

			var buf bytes.Buffer
			n, err := tsRecv(t, tsGo(func() tsResult { n, err := f.WriteTo(&buf); return tsResult{n, err} }), "WriteTo").get()
			requireErr("WriteTo", err)
			require.Equal(t, failAt, n)
			require.True(t, bytes.Equal(data[:failAt], buf.Bytes()), "WriteTo bytes differ")

			p := make([]byte, size)
			k, err := f.ReadAt(p, 0)
			if tc.code == testserver.StatusEOF {
				require.Equal(t, io.EOF, err, "a short ReadAt must say io.EOF")
			} else {
				requireErr("ReadAt", err)
			}
			require.Equal(t, failAt, int64(k))
			require.True(t, bytes.Equal(data[:failAt], p[:k]), "ReadAt bytes differ")

			_, err = f.Seek(0, io.SeekStart)
			require.NoError(t, err)
			got, err := readSmall(f)
			requireErr("Read", err)
			require.True(t, bytes.Equal(data[:failAt], got), "Read bytes differ")

			requireWorks(t, c)
			require.NoError(t, f.Close())
			require.Zero(t, srv.OpenHandles())
		})
	}
}

// TestFaultFstatRefused: a download sends FSTAT only for a size hint, so a server that
// refuses it, or never answers it, must not stop the download.
func TestFaultFstatRefused(t *testing.T) {
	const size = 2<<20 + 5
	refuse := func(code uint32) func(testserver.Request) uint32 {
		return func(r testserver.Request) uint32 {
			if r.Type == testserver.TypeFstat {
				return code
			}
			return 0
		}
	}
	for _, tc := range []struct {
		name string
		opts testserver.Options
	}{
		{"FAILURE", testserver.Options{Fail: refuse(testserver.StatusFailure)}},
		{"OP_UNSUPPORTED", testserver.Options{Fail: refuse(testserver.StatusOpUnsupported)}},
		{"PERMISSION_DENIED", testserver.Options{Fail: refuse(testserver.StatusPermissionDenied)}},
		{"never answered", testserver.Options{Stall: ofType(testserver.TypeFstat)}},
		// A size hint that is wrong (the file changed since) must not change the data.
		{"size too small", testserver.Options{Corrupt: fstatSize(1)}},
		{"size zero", testserver.Options{Corrupt: fstatSize(0)}},
		{"size too large", testserver.Options{Corrupt: fstatSize(1 << 40)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTestServerClient(t, tc.opts)
			data := randBytes(size, 5)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))

			f, err := c.Open(testCtx(t), "/f")
			require.NoError(t, err)
			var buf bytes.Buffer
			err = tsRecv(t, tsGo(func() error { _, err := f.WriteTo(&buf); return err }), "WriteTo")
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, buf.Bytes()), "downloaded bytes differ")
			require.NoError(t, f.Close())

			got, err := c.ReadFile(testCtx(t), "/f")
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got))

			// Late ATTRS for the abandoned FSTATs are dropped without harm.
			srv.ReleaseStalled()
			requireWorks(t, c)
			require.Zero(t, srv.OpenHandles())
		})
	}
}

// fstatSize returns a Corrupt hook that makes every FSTAT report size.
func fstatSize(size uint64) func(testserver.Request, []byte) [][]byte {
	return func(r testserver.Request, reply []byte) [][]byte {
		if r.Type != testserver.TypeFstat || reply[4] != testserver.TypeAttrs ||
			binary.BigEndian.Uint32(reply[9:])&testserver.AttrSize == 0 {
			return nil
		}
		p := slices.Clone(reply)
		binary.BigEndian.PutUint64(p[13:], size)
		return [][]byte{p}
	}
}

// versionAs returns a Corrupt hook rewriting VERSION to announce version v.
func versionAs(v uint32) func(testserver.Request, []byte) [][]byte {
	return func(r testserver.Request, reply []byte) [][]byte {
		if r.Type != testserver.TypeInit {
			return nil
		}
		p := slices.Clone(reply)
		binary.BigEndian.PutUint32(p[5:], v)
		return [][]byte{p}
	}
}

// dialTestServer runs NewClientPipe against a fresh session of srv.
func dialTestServer(ctx context.Context, srv *testserver.Server) (*Client, error) {
	r, w := srv.Conn()
	return NewClientPipe(ctx, r, w)
}

// TestFaultHandshake: everything that can go wrong before NewClientPipe returns must
// make it fail with an error that says what, and leave nothing running.
func TestFaultHandshake(t *testing.T) {
	for _, v := range []uint32{0, 2, 4, 6} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			tsNoLeaks(t)
			srv := testserver.New(testserver.Options{Corrupt: versionAs(v)})
			defer srv.Close()
			c, err := dialTestServer(testCtx(t), srv)
			require.Nil(t, c)
			requireProtocolError(t, err)
			require.Contains(t, err.Error(), fmt.Sprintf("version %d", v))
		})
	}

	corrupt := map[string]func(testserver.Request, []byte) [][]byte{
		"VERSION oversize":     testserver.CorruptOversize(testserver.TypeVersion),
		"VERSION truncated":    testserver.CorruptTruncate(testserver.TypeVersion),
		"VERSION unknown type": testserver.CorruptUnknownType(testserver.TypeVersion),
		"limits oversize":      testserver.CorruptOversize(testserver.TypeExtendedReply),
		"limits truncated":     testserver.CorruptTruncate(testserver.TypeExtendedReply),
		"limits unknown type":  testserver.CorruptUnknownType(testserver.TypeExtendedReply),
		"limits wrong id":      testserver.CorruptWrongID(testserver.TypeExtendedReply),
	}
	for name, fn := range corrupt {
		t.Run(name, func(t *testing.T) {
			tsNoLeaks(t)
			srv := testserver.New(testserver.Options{Corrupt: fn})
			defer srv.Close()
			c, err := dialTestServer(testCtx(t), srv)
			t.Logf("%v", err)
			require.Nil(t, c)
			requireProtocolError(t, err)
		})
	}

	for _, cut := range []int64{1, 4, 9, 30} {
		t.Run(fmt.Sprintf("connection cut after %d bytes", cut), func(t *testing.T) {
			tsNoLeaks(t)
			srv := testserver.New(testserver.Options{DropAfterBytes: cut})
			defer srv.Close()
			c, err := dialTestServer(testCtx(t), srv)
			t.Logf("%v", err)
			require.Nil(t, c)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		})
	}

	t.Run("connection dropped at the limits query", func(t *testing.T) {
		tsNoLeaks(t)
		srv := testserver.New(testserver.Options{DropAfterRequests: 1})
		defer srv.Close()
		c, err := dialTestServer(testCtx(t), srv)
		t.Logf("%v", err)
		require.Nil(t, c)
		requireClosedConn(t, err)
	})

	t.Run("no VERSION, deadline", func(t *testing.T) {
		tsNoLeaks(t)
		srv := testserver.New(testserver.Options{Stall: ofType(testserver.TypeInit)})
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		c, err := tsRecv(t, tsGo(func() tsClientResult { c, err := dialTestServer(ctx, srv); return tsClientResult{c, err} }), "NewClientPipe").get()
		require.Nil(t, c)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("no VERSION, cancelled", func(t *testing.T) {
		tsNoLeaks(t)
		srv := testserver.New(testserver.Options{Stall: ofType(testserver.TypeInit)})
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res := tsGo(func() tsClientResult { c, err := dialTestServer(ctx, srv); return tsClientResult{c, err} })
		tsWaitStalled(t, srv, 1)
		cancel()
		c, err := tsRecv(t, res, "NewClientPipe").get()
		require.Nil(t, c)
		require.ErrorIs(t, err, context.Canceled)
		// The late VERSION meets a closed pipe; the server must not mind either.
		srv.ReleaseStalled()
	})
}

// TestFaultShortReads: servers that return less DATA than asked (a read cap, or any
// length at all). Every way of reading must deliver the exact bytes, never a short
// result with a nil error, and once a cap is seen later transfers ask for no more.
func TestFaultShortReads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    testserver.Options
		size    int
		learned int64 // the READ size later transfers must use; 0: not fixed
		reads   int   // READs a whole-file ReadAt then takes; 0: not fixed
	}{
		{"ReadCap 32768", testserver.Options{ReadCap: 32768}, 1<<20 + 777, 32768, 33},
		{"ReadCap 1000", testserver.Options{ReadCap: 1000}, 300<<10 + 17, 1000, 308},
		// Below the client's floor it keeps asking for minDataSize and taking what comes.
		{"ReadCap 100", testserver.Options{ReadCap: 100}, 40<<10 + 3, minDataSize, 0},
		{"Shorten random", testserver.Options{Shorten: randomShorten(42)}, 700<<10 + 3, 0, 0},
		{"ReadCap 32768, reordered", testserver.Options{ReadCap: 32768, Reorder: 16}, 1<<20 + 777, 32768, 33},
		{"Shorten random, reordered", testserver.Options{Shorten: randomShorten(43), Reorder: 16}, 700<<10 + 3, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var maxAsked atomic.Int64 // largest READ length since the last reset
			tc.opts.Fail = func(r testserver.Request) uint32 {
				if r.Type == testserver.TypeRead && int64(r.Len) > maxAsked.Load() {
					maxAsked.Store(int64(r.Len)) // one session: no concurrent writers
				}
				return 0
			}
			c, srv := newTestServerClient(t, tc.opts)
			data := randBytes(tc.size, 6)
			require.NoError(t, srv.WriteFile("/f", data, 0o644))
			f, err := c.Open(testCtx(t), "/f")
			require.NoError(t, err)
			defer f.Close()

			var buf bytes.Buffer
			n, err := tsRecv(t, tsGo(func() tsResult { n, err := f.WriteTo(&buf); return tsResult{n, err} }), "WriteTo").get()
			require.NoError(t, err)
			require.Equal(t, int64(tc.size), n)
			require.True(t, bytes.Equal(data, buf.Bytes()), "WriteTo bytes differ")

			if tc.learned > 0 {
				require.Equal(t, tc.learned, c.readCap.Load(), "the read cap should be learned")
			}
			maxAsked.Store(0)
			srv.ResetStats()
			p := make([]byte, tc.size+1000)
			k, err := f.ReadAt(p[:tc.size], 0)
			require.NoError(t, err)
			require.Equal(t, tc.size, k)
			require.True(t, bytes.Equal(data, p[:tc.size]), "ReadAt bytes differ")
			if tc.learned > 0 {
				require.LessOrEqual(t, maxAsked.Load(), tc.learned, "a later transfer asked for more than the cap")
			}
			if tc.reads > 0 {
				require.Equal(t, tc.reads, srv.Requests(testserver.TypeRead), "READs of a whole-file ReadAt")
			}

			requireReadAt(t, f, data, p, 0)                     // the buffer outlasts the file
			requireReadAt(t, f, data, p[:4096], tc.size-500)    // and near the end
			requireReadAt(t, f, data, p[:10], tc.size)          // and at it
			requireReadAt(t, f, data, p[:tc.size/2], tc.size/4) // well inside
			requireReadAt(t, f, data, p[:1000], tc.size-1000)

			_, err = f.Seek(0, io.SeekStart)
			require.NoError(t, err)
			got, err := io.ReadAll(bufio.NewReaderSize(&strictReader{t: t, r: f}, 4096))
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got), "Read bytes differ")
		})
	}
}

// requireReadAt checks ReadAt(p, off) against io.ReaderAt's contract: all of p unless
// the file ends first, and then exactly what is left with io.EOF.
func requireReadAt(t *testing.T, f *File, data, p []byte, off int) {
	t.Helper()
	n, err := f.ReadAt(p, int64(off))
	want := min(len(p), len(data)-off)
	require.Equal(t, want, n, "ReadAt(%d bytes at %d)", len(p), off)
	require.True(t, bytes.Equal(data[off:off+n], p[:n]), "ReadAt(%d bytes at %d): bytes differ", len(p), off)
	if want < len(p) {
		require.Equal(t, io.EOF, err, "a short ReadAt must say io.EOF")
	} else if err != nil {
		require.Equal(t, io.EOF, err, "a full ReadAt may only add io.EOF")
		require.Equal(t, len(data), off+n)
	}
}

// strictReader fails the test when Read returns nothing and no error.
type strictReader struct {
	t *testing.T
	r io.Reader
}

func (s *strictReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n == 0 && err == nil && len(p) > 0 {
		s.t.Errorf("Read of %d bytes returned 0, nil", len(p))
	}
	return n, err
}

// randomShorten returns a Shorten hook that sends a seeded random length from 1 to
// what was asked.
func randomShorten(seed uint64) func(int64, int) int {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed))
	return func(_ int64, asked int) int {
		mu.Lock()
		defer mu.Unlock()
		return 1 + rng.IntN(asked)
	}
}
