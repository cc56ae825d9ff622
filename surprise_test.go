package sftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Well-formed surprises against the line OpenSSH draws: a STATUS reply, whatever its
// code, fails the one request it answers and the channel carries on; anything else
// that does not fit closes the channel, and then every call, the one that met it
// included, gets an error matching both *ProtocolError and net.ErrClosed.

// requireRequestFailed checks that err is the server's STATUS for one request, code
// code, and not the error of a dead channel.
func requireRequestFailed(t testing.TB, err error, code StatusCode) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, &StatusError{Code: code}, "want the server's %v status, got %v", code, err)
	require.NotErrorIs(t, err, net.ErrClosed, "one request failed: the channel must stay up")
	require.NotErrorAs(t, err, new(*ProtocolError))
}

// requireChannelFailed checks that err is what a call gets when a reply broke the
// protocol: the one error that matches both checks a caller may make.
func requireChannelFailed(t testing.TB, err error) {
	t.Helper()
	requireClosedConn(t, err)
	requireProtocolError(t, err)
}

// replayStatusOKToRead replays what rclone's `serve sftp --vfs-cache-mode writes` does
// to a read-write handle: OPEN(READ|WRITE|CREAT|TRUNC), WRITE "hello world" (OK), READ
// at offset 6, answered with STATUS OK. That READ must fail, and nothing else: the
// File and the Client keep working. reread is what a second READ there returns: the
// fault server answers it honestly, rclone the same way again.
func replayStatusOKToRead(t *testing.T, c *Client, name string, reread func(t *testing.T, n int, err error, got []byte)) {
	ctx := testCtx(t)
	f, err := c.OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	n, err := f.Write([]byte("hello world"))
	require.NoError(t, err)
	require.Equal(t, 11, n)

	p := make([]byte, 5)
	within(t, func() { n, err = f.ReadAt(p, 6) })
	require.Zero(t, n, "nothing was read")
	requireRequestFailed(t, err, StatusOK)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, name, pe.Path)

	// The channel and the handle carry on.
	within(t, func() { n, err = f.ReadAt(p, 6) })
	reread(t, n, err, p[:n])
	_, err = f.Write([]byte("!"))
	require.NoError(t, err, "a later WRITE on the same handle")
	require.NoError(t, f.Close())
	fi, err := c.Stat(ctx, name)
	require.NoError(t, err, "a later call on the same Client")
	require.EqualValues(t, 12, fi.Size())
	require.NoError(t, c.main.failed(), "the channel is up")
}

// TestFaultStatusOKToRead replays rclone's trace on the fault server, which answers
// the first READ with STATUS OK and every later one honestly.
func TestFaultStatusOKToRead(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Corrupt: testserver.StatusInstead(testserver.TypeData, testserver.StatusOK)})
	replayStatusOKToRead(t, c, "/rw", func(t *testing.T, n int, err error, got []byte) {
		require.NoError(t, err)
		require.Equal(t, "world", string(got))
	})
	got, err := srv.ReadFile("/rw")
	require.NoError(t, err)
	require.Equal(t, "hello world!", string(got))
}

// TestRcloneStatusOKToRead runs the trace against rclone itself with the cache mode
// its documentation recommends for clients that open files read-write. rclone answers
// the READ with STATUS OK every time (Debian's 1.60.1): each READ fails alone.
func TestRcloneStatusOKToRead(t *testing.T) {
	dir := serverDir(t)
	cmd := rcloneCommand(t, dir)
	cmd.Args = append(cmd.Args[:len(cmd.Args)-1], "--vfs-cache-mode", "writes", dir)
	c := startPipeServer(t, cmd, nil)
	replayStatusOKToRead(t, c, "/rw", func(t *testing.T, n int, err error, _ []byte) {
		require.Zero(t, n)
		requireRequestFailed(t, err, StatusOK)
	})
	// Sequential Read and WriteTo meet the same answer, and fail alone too.
	f, err := c.OpenFile(testCtx(t), "/rw", os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var n int
	within(t, func() { n, err = f.Read(make([]byte, 4)) })
	require.Zero(t, n)
	requireRequestFailed(t, err, StatusOK)
	var wn int64
	within(t, func() { wn, err = f.WriteTo(io.Discard) })
	require.Zero(t, wn)
	requireRequestFailed(t, err, StatusOK)
	requireWorks(t, c)
}

// TestFaultStatusInsteadOfReply answers one request of each kind with a STATUS where
// another reply was due, for codes that answer nothing (OK), that make no sense there
// (EOF), a real error and one this version does not define. Only that call fails, with
// the server's code, and the Client carries on.
func TestFaultStatusInsteadOfReply(t *testing.T) {
	codes := []uint32{testserver.StatusOK, testserver.StatusEOF, testserver.StatusPermissionDenied, 99}
	for _, op := range corruptOps {
		if op.typ == testserver.TypeStatus {
			continue // a STATUS for a STATUS is no surprise
		}
		for _, code := range codes {
			want := StatusCode(code)
			t.Run(op.name+"/"+want.String(), func(t *testing.T) {
				corrupt := testserver.StatusInstead(op.typ, code)
				if op.typ == testserver.TypeExtendedReply {
					corrupt = tsSkipFirst(op.typ, corrupt)
				}
				c, srv := newTestServerClient(t, testserver.Options{Corrupt: corrupt})
				require.NoError(t, srv.WriteFile("/file", randBytes(corruptFileSize, 3), 0o644))
				err := tsRecv(t, tsGo(func() error { return op.run(testCtx(t), c) }), op.name)
				t.Logf("%s: %v", op.name, err)
				switch {
				case op.typ == testserver.TypeData && code == testserver.StatusEOF:
					// EOF is a READ's answer at the end of a file, but the READs past it
					// brought data: the server contradicts itself, and the ReadAt fails
					// at that end (readEnds) rather than come back short.
					var ec *eofConflictError
					require.ErrorAs(t, err, &ec)
				case op.typ == testserver.TypeName && code == testserver.StatusEOF:
					// and READDIR's at the end of a listing: an empty directory.
					require.NoError(t, err)
				default:
					requireRequestFailed(t, err, want.normal())
				}
				requireWorks(t, c)
			})
		}
	}
	// The FSTAT a download sends with its first READ is only a hint: a STATUS for it,
	// even OK, leaves the size unknown and the download whole.
	t.Run("FSTAT-of-WriteTo/OK", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{Corrupt: testserver.StatusInstead(testserver.TypeAttrs, testserver.StatusOK)})
		data := randBytes(corruptFileSize, 4)
		require.NoError(t, srv.WriteFile("/file", data, 0o644))
		f, err := c.Open(testCtx(t), "/file")
		require.NoError(t, err)
		defer f.Close()
		var buf bytes.Buffer
		res := tsRecv(t, tsGo(func() tsResult { n, err := f.WriteTo(&buf); return tsResult{n, err} }), "WriteTo")
		require.NoError(t, res.err)
		require.Equal(t, data, buf.Bytes())
		requireWorks(t, c)
	})
}

// handleInstead answers the first reply of type typ with a well-formed HANDLE for the
// same request: a reply of a known type, but not one that can answer the request.
func handleInstead(typ uint8) func(testserver.Request, []byte) [][]byte {
	var used bool // hooks of one session run one at a time
	return func(_ testserver.Request, reply []byte) [][]byte {
		if used || len(reply) < 9 || reply[4] != typ {
			return nil
		}
		used = true
		p := binary.BigEndian.AppendUint32(nil, 5+4+1)
		p = append(p, testserver.TypeHandle)
		p = append(p, reply[5:9]...)
		p = binary.BigEndian.AppendUint32(p, 1)
		return [][]byte{append(p, 'h')}
	}
}

// TestFaultFatalKindsCloseWithOneError puts each fatal kind of reply in front of each
// way of reading and writing: calls and transfers alike must return an error matching
// both *ProtocolError and net.ErrClosed, and so must every call after it.
func TestFaultFatalKindsCloseWithOneError(t *testing.T) {
	type run func(ctx context.Context, c *Client) error
	openRead := func(do func(f *File) error) run {
		return func(ctx context.Context, c *Client) error {
			f, err := c.Open(ctx, "/file")
			if err != nil {
				return err
			}
			defer f.Close()
			return do(f)
		}
	}
	readAt := openRead(func(f *File) error { _, err := f.ReadAt(make([]byte, corruptFileSize), 0); return err })
	read := openRead(func(f *File) error { _, err := f.Read(make([]byte, 4096)); return err })
	writeTo := openRead(func(f *File) error { _, err := f.WriteTo(io.Discard); return err })
	readFrom := func(ctx context.Context, c *Client) error {
		f, err := c.Create(ctx, "/up")
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.ReadFrom(io.LimitReader(zeroReader{}, corruptFileSize))
		return err
	}
	type corruptFn = func(testserver.Request, []byte) [][]byte
	handleForData := func() corruptFn { return handleInstead(testserver.TypeData) }
	cases := []struct {
		name    string
		corrupt func() corruptFn // a fresh one per run: each acts once
		run     run
	}{
		{"LongData/ReadAt", testserver.CorruptLongData, readAt},
		{"LongData/Read", testserver.CorruptLongData, read},
		{"LongData/WriteTo", testserver.CorruptLongData, writeTo},
		{"HandleForRead/ReadAt", handleForData, readAt},
		{"HandleForRead/WriteTo", handleForData, writeTo},
		{"HandleForWrite/ReadFrom", func() corruptFn {
			corrupt := handleInstead(testserver.TypeStatus)
			return func(r testserver.Request, reply []byte) [][]byte {
				if r.Type != testserver.TypeWrite {
					return nil // OPEN's and CLOSE's replies stay as they are
				}
				return corrupt(r, reply)
			}
		}, readFrom},
		{"TruncatedData/WriteTo", func() corruptFn { return testserver.CorruptTruncate(testserver.TypeData) }, writeTo},
		{"UnknownID/WriteTo", func() corruptFn { return testserver.CorruptWrongID(testserver.TypeData) }, writeTo},
		{"Oversize/WriteTo", func() corruptFn { return testserver.CorruptOversize(testserver.TypeData) }, writeTo},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTestServerClient(t, testserver.Options{Corrupt: tc.corrupt()})
			require.NoError(t, srv.WriteFile("/file", randBytes(corruptFileSize, 3), 0o644))
			ctx := testCtx(t)
			err := tsRecv(t, tsGo(func() error { return tc.run(ctx, c) }), tc.name)
			t.Logf("%s: %v", tc.name, err)
			requireChannelFailed(t, err)
			_, err = c.Stat(ctx, "/file")
			requireChannelFailed(t, err)
			require.True(t, errors.Is(c.main.failed(), net.ErrClosed))
		})
	}
}
