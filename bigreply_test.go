package sftp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// replySizes records the length of every READDIR reply a testserver sends.
type replySizes struct {
	mu      sync.Mutex
	largest int
}

func (s *replySizes) corrupt(req testserver.Request, reply []byte) [][]byte {
	if req.Type == testserver.TypeReaddir {
		s.mu.Lock()
		s.largest = max(s.largest, len(reply))
		s.mu.Unlock()
	}
	return nil
}

// awsDir serves AWS Transfer Family's personality from memory, with n files in /big.
func awsDir(t *testing.T, n int, clientOpts ...Option) (*Client, *testserver.Server, *replySizes) {
	t.Helper()
	sizes := &replySizes{}
	opts := testserver.AWSTransferS3()
	opts.Corrupt = sizes.corrupt
	c, srv := newTestServerClient(t, opts, clientOpts...)
	require.NoError(t, srv.MkdirAll("/big", 0o755))
	require.NoError(t, srv.MkdirAll("/small", 0o755))
	require.NoError(t, srv.WriteFile("/small/f", []byte("f"), 0o644))
	for i := range n {
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/big/file-%06d.dat", i), nil, 0o644))
	}
	return c, srv, sizes
}

// AWS Transfer Family answers a READDIR with the whole directory in one NAME: a
// directory of 100,000 entries comes in one reply of megabytes, which ReadDir, a
// walk and a streaming listing read within the default memory limit.
func TestReadDirOneNameOf100000(t *testing.T) {
	const n = 100000
	c, _, sizes := awsDir(t, n)
	ctx := testCtx(t)
	entries, err := c.ReadDir(ctx, "big")
	require.NoError(t, err)
	require.Len(t, entries, n)
	require.True(t, slices.IsSortedFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) }))
	require.Equal(t, "file-099999.dat", entries[n-1].Name())
	require.Greater(t, sizes.largest, 8*defaultMaxReply, "the directory came in one reply far above the cap")

	walked := 0
	require.NoError(t, c.WalkDir(ctx, "big", func(string, fs.DirEntry, error) error { walked++; return nil }))
	require.Equal(t, n+1, walked)
	streamed := 0
	for _, err := range c.DirEntries(ctx, "big") {
		require.NoError(t, err)
		streamed++
	}
	require.Equal(t, n, streamed)
	require.NoError(t, c.main.failed())
}

// Past the call's memory account the one-reply directory fails that call with
// ErrListingTooLarge, and the channel goes on: other calls, and smaller listings,
// still work.
func TestReadDirOneNamePastTheAccount(t *testing.T) {
	c, _, sizes := awsDir(t, 20000, WithMemoryLimit(minMemoryLimit))
	ctx := testCtx(t)
	_, err := c.ReadDir(ctx, "big")
	require.ErrorIs(t, err, ErrListingTooLarge)
	var one *replyTooLargeError
	require.ErrorAs(t, err, &one)
	require.Greater(t, sizes.largest, minMemoryLimit)
	for _, err := range c.DirEntries(ctx, "big") {
		require.ErrorIs(t, err, ErrListingTooLarge, "a page at a time cannot help: the page is the directory")
	}
	require.ErrorIs(t, c.WalkDir(ctx, "big", func(_ string, _ fs.DirEntry, err error) error { return err }), ErrListingTooLarge)

	require.NoError(t, c.main.failed(), "the channel lives")
	entries, err := c.ReadDir(ctx, "small")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	_, err = c.Stat(ctx, "big/file-000001.dat")
	require.NoError(t, err)
}

// A reply the account cannot hold is read and thrown away without being held: the
// client allocates far less than the reply's length while it passes.
func TestOneNameSkippedNotHeld(t *testing.T) {
	checkLeaks(t)
	const entries = 200000
	reply := bigNameReply(0, entries) // id patched below
	clientR, clientW, run := startPeer(func(p *scriptPeer) {
		p.handshake(3)
		open := p.read()
		p.write(handleReply(open.id, "d"))
		rd := p.read() // one READDIR: a listing a page at a time
		binaryPutID(reply, rd.id)
		p.write(reply)
		st := p.read()
		p.write(replyPacket(sshfx.TypeAttrs, st.id, sshfx.AppendUint32(nil, 0)))
		p.expectClose("d")
		p.expectEOF()
	})
	ctx := testCtx(t)
	c, err := NewClientPipe(ctx, clientR, clientW, WithMemoryLimit(minMemoryLimit))
	require.NoError(t, err)
	d, err := c.OpenDir(ctx, "d")
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = d.ReadDirContext(ctx, 1)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrListingTooLarge)
	require.Greater(t, len(reply), 4<<20)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "the reply passed without being held")
	_, err = c.Stat(ctx, "x")
	require.NoError(t, err, "the channel lives")
	require.NoError(t, d.Close())
	require.NoError(t, c.Close())
	require.NoError(t, run.wait(t))
}

// A READDIR given up on before its long NAME came: the reply is skipped, the channel
// goes on.
func TestOneNameOfAbandonedReaddir(t *testing.T) {
	checkLeaks(t)
	reply := bigNameReply(0, 20000)
	sent := make(chan struct{})
	clientR, clientW, run := startPeer(func(p *scriptPeer) {
		p.handshake(3)
		open := p.read()
		p.write(handleReply(open.id, "d"))
		rd := p.read()
		close(sent)
		st := p.read() // sent once the READDIR was given up
		binaryPutID(reply, rd.id)
		p.write(reply)
		p.write(replyPacket(sshfx.TypeAttrs, st.id, sshfx.AppendUint32(nil, 0)))
		p.expectEOF()
	})
	ctx := testCtx(t)
	c, err := NewClientPipe(ctx, clientR, clientW)
	require.NoError(t, err)
	d, err := c.OpenDir(ctx, "d")
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	go func() { <-sent; cancel() }()
	_, err = d.ReadDirContext(rctx, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.Stat(ctx, "x")
	require.NoError(t, err, "the late long reply was skipped")
	c.Close()
	require.NoError(t, run.wait(t))
}

// Only a READDIR's NAME may pass the cap: a NAME answering REALPATH, or a STATUS
// answering a READDIR, longer than the cap closes the channel.
func TestOversizedReplyOtherwiseClosesTheChannel(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, c *Client) error
		read func(p *scriptPeer) uint32 // reads the requests, returns the id to answer
		long func(id uint32) []byte
	}{
		{"NAME for REALPATH", func(ctx context.Context, c *Client) error { _, err := c.RealPath(ctx, "x"); return err },
			func(p *scriptPeer) uint32 { return p.read().id },
			padName},
		{"STATUS for READDIR", func(ctx context.Context, c *Client) error {
			d, err := c.OpenDir(ctx, "d")
			if err != nil {
				return err
			}
			_, err = d.ReadDirContext(ctx, 1)
			return err
		}, func(p *scriptPeer) uint32 {
			open := p.read()
			p.write(handleReply(open.id, "d"))
			return p.read().id
		}, func(id uint32) []byte {
			return statusReply(id, sshfx.StatusFailure, string(make([]byte, defaultMaxReply+1000)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			clientR, clientW, run := startPeer(func(p *scriptPeer) {
				p.handshake(3)
				id := tc.read(p)
				if p.err == nil {
					// The client stops reading at the header: the rest may not go.
					p.w.Write(tc.long(id))
					io.Copy(io.Discard, p.r)
				}
			})
			ctx := testCtx(t)
			c, err := NewClientPipe(ctx, clientR, clientW)
			require.NoError(t, err)
			err = tc.call(ctx, c)
			require.ErrorIs(t, err, net.ErrClosed)
			require.ErrorAs(t, err, new(*ProtocolError))
			c.Close()
			require.NoError(t, run.wait(t))
		})
	}
}

// decodeLargePage keeps what keptEntries keeps, charges each entry as it goes, and
// leaves nothing charged when it fails.
func TestDecodeLargePage(t *testing.T) {
	names := []string{".", "a", "..", "b", "c/d", "e"}
	body := sshfx.AppendUint32(nil, uint32(len(names)))
	for _, n := range names {
		body = sshfx.AppendString(body, n)
		body = sshfx.AppendString(body, "-rw-r--r-- 1 u g 0 Jan 1 00:00 "+n)
		body = sshfx.AppendUint32(body, 0)
	}
	b := &budget{limit: 1 << 20}
	r := response{typ: sshfx.TypeName, body: body}
	page, charged, invalid, err := decodeLargePage(&r, b)
	require.NoError(t, err)
	require.ErrorIs(t, invalid, ErrInvalidEntryName)
	require.Equal(t, []string{"a", "b"}, entryNames(page))
	require.Equal(t, charged, b.held.Load())
	b.release(charged)

	tight := &budget{limit: int64(len(names))*entrySlotBytes + entryCost("a", &sshfx.Attrs{}) + 10}
	_, _, _, err = decodeLargePage(&r, tight)
	require.ErrorIs(t, err, ErrListingTooLarge)
	require.Zero(t, tight.held.Load())

	r.body = body[:len(body)-1]
	_, _, _, err = decodeLargePage(&r, b)
	require.ErrorAs(t, err, new(*ProtocolError))
	require.Zero(t, b.held.Load())
	r.body = sshfx.AppendUint32(nil, 1<<30)
	_, _, _, err = decodeLargePage(&r, b)
	require.ErrorAs(t, err, new(*ProtocolError), "a count the bytes cannot hold sizes nothing")
	require.Zero(t, b.held.Load())
}

func entryNames(page []fs.DirEntry) []string {
	var out []string
	for _, e := range page {
		out = append(out, e.Name())
	}
	return out
}

// bigNameReply is a NAME reply to id listing n entries.
func bigNameReply(id uint32, n int) []byte {
	b := sshfx.Begin(nil, sshfx.TypeName, id)
	b = sshfx.AppendUint32(b, uint32(n))
	for i := range n {
		name := fmt.Sprintf("entry-%07d", i)
		b = sshfx.AppendString(b, name)
		b = sshfx.AppendString(b, "-rw-r--r--    1 0        0               0 Jan  1 00:00 "+name)
		b = sshfx.AppendUint32(b, uint32(sshfx.AttrSize))
		b = sshfx.AppendUint64(b, 0)
	}
	return sshfx.Finish(b, 0)
}

// padName is a one-entry NAME reply to id longer than the cap: a long longname.
func padName(id uint32) []byte {
	b := sshfx.Begin(nil, sshfx.TypeName, id)
	b = sshfx.AppendUint32(b, 1)
	b = sshfx.AppendString(b, "/x")
	b = sshfx.AppendString(b, string(make([]byte, defaultMaxReply)))
	b = sshfx.AppendUint32(b, 0)
	return sshfx.Finish(b, 0)
}

func binaryPutID(pkt []byte, id uint32) { binary.BigEndian.PutUint32(pkt[5:], id) }
