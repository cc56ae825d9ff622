package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
)

func TestConnHandshake(t *testing.T) {
	checkLeaks(t)
	c, _, err := pipeConn(t, context.Background(), func(p *scriptPeer) {
		p.handshake(3, "posix-rename@openssh.com", "1", "vendor-id", "\x00\xff\x01")
		p.expectEOF()
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"posix-rename@openssh.com": "1", "vendor-id": "\x00\xff\x01"}, c.exts)
	require.NoError(t, c.failed())
}

func TestConnHandshakeRefused(t *testing.T) {
	isProtoErr := func(t *testing.T, err error) {
		var pe *ProtocolError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "VERSION", pe.Op)
	}
	unexpectedEOF := func(t *testing.T, err error) { require.ErrorIs(t, err, io.ErrUnexpectedEOF) }
	tests := []struct {
		name   string
		script func(p *scriptPeer)
		check  func(t *testing.T, err error)
		hangUp bool // the script ends the stream itself, rather than wait for the client to
	}{
		{"version 4", func(p *scriptPeer) { p.handshake(4) }, isProtoErr, false},
		{"version 6", func(p *scriptPeer) { p.handshake(6, "versions", "2,3,4,5,6") }, isProtoErr, false},
		{"version 2", func(p *scriptPeer) { p.handshake(2) }, isProtoErr, false},
		{"STATUS first", func(p *scriptPeer) {
			p.read()
			p.write(statusReply(0, sshfx.StatusFailure, "no"))
			// The client gives up after the type byte and closes its end, so the rest of
			// the write may find the pipe closed.
			if p.err == io.ErrClosedPipe {
				p.err = nil
			}
		}, isProtoErr, false},
		{"VERSION of 2 GiB", func(p *scriptPeer) {
			p.read()
			p.write([]byte{0x7f, 0xff, 0xff, 0xff, byte(sshfx.TypeVersion)})
		}, isProtoErr, false},
		{"truncated VERSION", func(p *scriptPeer) {
			p.read()
			p.write(versionPacket(3, "half")) // a name without its data
		}, isProtoErr, false},
		{"EOF instead of VERSION", func(p *scriptPeer) { p.read() }, unexpectedEOF, true},
		{"EOF inside VERSION", func(p *scriptPeer) {
			p.read()
			p.write(versionPacket(3)[:7])
		}, unexpectedEOF, true},
		{"EOF after VERSION header", func(p *scriptPeer) {
			p.read()
			p.write(versionPacket(3)[:5])
		}, unexpectedEOF, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			c, run, err := pipeConn(t, testCtx(t), func(p *scriptPeer) {
				tt.script(p)
				if !tt.hangUp {
					p.expectEOF() // a refused handshake closes the transport
				}
			})
			require.Nil(t, c)
			require.Error(t, err)
			tt.check(t, err)
			require.NoError(t, run.wait(t))
		})
	}
}

func TestConnHandshakeNoVersionDeadline(t *testing.T) {
	checkLeaks(t)
	// The peer takes INIT and never answers: only the deadline can end newConn.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	c, run, err := pipeConn(t, ctx, func(p *scriptPeer) {
		p.read()
		if p.err == io.EOF {
			p.err = nil // on a slow run the deadline can pass before INIT goes out
		}
		p.expectEOF()
	})
	require.Nil(t, c)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The transport was closed (the peer saw EOF) and the reader has ended (checkLeaks).
	require.NoError(t, run.wait(t))
}

func TestConnHandshakeCancelled(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, run, err := pipeConn(t, ctx, func(p *scriptPeer) {
		p.read()
		cancel()
		p.expectEOF()
	})
	require.Nil(t, c)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, run.wait(t))

	// Already cancelled: nothing is sent at all.
	c, run, err = pipeConn(t, ctx, func(p *scriptPeer) { p.expectEOF() })
	require.Nil(t, c)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, run.wait(t))
}

func TestConnRepliesOutOfOrder(t *testing.T) {
	checkLeaks(t)
	c := mustPipeConn(t, func(p *scriptPeer) {
		reqs := p.readN(3, sshfx.TypeStat)
		if len(reqs) == 3 {
			p.echo([]rawPacket{reqs[2], reqs[0], reqs[1]})
		}
		p.expectEOF()
	})
	ctx := testCtx(t)
	ids := make([]uint32, 3)
	calls := make([]call, 3)
	for i := range ids {
		ids[i] = c.newID()
		calls[i] = c.start(ctx, appendString1(nil, sshfx.TypeStat, ids[i], fmt.Sprint("/", i)), nil)
		require.NoError(t, calls[i].err)
	}
	for i := range ids {
		r, err := calls[i].wait(ctx)
		require.NoError(t, err)
		require.Equal(t, ids[i], r.id)
		require.Equal(t, fmt.Sprint("for /", i), handleOf(t, r))
	}
	require.NoError(t, c.failed())
}

// scribbleRef overwrites its packet's buffer once the writer lets go of it, as the
// next request given the same pooled buffer would.
type scribbleRef struct{ buf []byte }

func (r scribbleRef) writeDone() {
	for i := range r.buf {
		r.buf[i] = 0xff
	}
}

// A short packet is copied as it is queued and its buffer handed back at once: the
// call must have taken its id before, or it waits for a reply to another id.
func TestConnShortPacketFreedWhenQueued(t *testing.T) {
	checkLeaks(t)
	c := mustPipeConn(t, func(p *scriptPeer) {
		p.echo(p.readN(2, sshfx.TypeStat))
		p.expectEOF()
	})
	ctx := testCtx(t)
	id := c.newID()
	pkt := appendString1(nil, sshfx.TypeStat, id, "/a")
	cl := c.start(ctx, pkt, scribbleRef{pkt})
	require.NoError(t, cl.err)
	require.Equal(t, id, cl.id)

	into := make(chan response, 1)
	id2 := c.newID()
	pkt2 := appendString1(nil, sshfx.TypeStat, id2, "/b")
	require.NoError(t, c.startInto(ctx, pkt2, scribbleRef{pkt2}, into))

	r, err := cl.wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "for /a", handleOf(t, r))
	r2 := <-into
	require.NoError(t, r2.err)
	require.Equal(t, id2, r2.id)
	require.Equal(t, "for /b", handleOf(t, r2))
	require.NoError(t, c.failed())
}

func TestConnConcurrentCallsShuffled(t *testing.T) {
	checkLeaks(t)
	const n = 32
	c := mustPipeConn(t, func(p *scriptPeer) {
		// All 32 are in flight at once before any is answered.
		reqs := p.readN(n, sshfx.TypeStat)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
		p.echo(reqs)
		p.expectEOF()
	})
	ctx := testCtx(t)
	results := make([]<-chan callResult, n)
	for i := range results {
		results[i] = goCall(ctx, c, fmt.Sprint("/", i))
	}
	for i, ch := range results {
		res := recv(t, ch)
		require.NoError(t, res.err)
		require.Equal(t, fmt.Sprint("for /", i), handleOf(t, res.r))
	}
	require.NoError(t, c.failed())
}

func TestConnReplyForUnknownID(t *testing.T) {
	checkLeaks(t)
	c := mustPipeConn(t, func(p *scriptPeer) {
		p.readN(3, sshfx.TypeStat)
		p.write(handleReply(0xfffffff0, "stray"))
		p.expectEOF()
	})
	ctx := testCtx(t)
	results := []<-chan callResult{goCall(ctx, c, "/a"), goCall(ctx, c, "/b"), goCall(ctx, c, "/c")}
	for _, ch := range results {
		res := recv(t, ch)
		require.ErrorIs(t, res.err, net.ErrClosed)
		var pe *ProtocolError
		require.ErrorAs(t, res.err, &pe)
		require.Contains(t, pe.Error(), "not outstanding")
	}
	// Later calls fail at once, with the same cause.
	res := recv(t, goCall(ctx, c, "/d"))
	require.ErrorIs(t, res.err, net.ErrClosed)
	require.ErrorAs(t, res.err, new(*ProtocolError))
	require.ErrorIs(t, c.failed(), net.ErrClosed)
}

func TestConnBadLength(t *testing.T) {
	for _, length := range []uint32{0x7fffffff, 0xffffffff, defaultMaxReply + 1, 4, 0} {
		t.Run(fmt.Sprintf("%#x", length), func(t *testing.T) {
			checkLeaks(t)
			c := mustPipeConn(t, func(p *scriptPeer) {
				req := p.read()
				// Only the header: a client that trusted the length would wait for the
				// body (and allocate for it) instead of failing.
				hdr := binary.BigEndian.AppendUint32(nil, length)
				hdr = append(hdr, byte(sshfx.TypeData))
				p.write(binary.BigEndian.AppendUint32(hdr, req.id))
				p.expectEOF()
			})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res := recv(t, goCall(testCtx(t), c, "/x"))
			runtime.ReadMemStats(&after)

			require.ErrorIs(t, res.err, net.ErrClosed)
			require.ErrorAs(t, res.err, new(*ProtocolError))
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "allocated for the bogus length")
		})
	}
}

func TestConnEOFWithRequestsPending(t *testing.T) {
	checkLeaks(t)
	// Returning closes the peer's end: EOF between packets, two requests unanswered.
	c := mustPipeConn(t, func(p *scriptPeer) { p.readN(2, sshfx.TypeStat) })
	ctx := testCtx(t)
	for _, ch := range []<-chan callResult{goCall(ctx, c, "/a"), goCall(ctx, c, "/b")} {
		res := recv(t, ch)
		require.ErrorIs(t, res.err, io.ErrUnexpectedEOF)
		require.ErrorIs(t, res.err, net.ErrClosed)
	}
}

func TestConnEOFInsidePacket(t *testing.T) {
	whole := handleReply(1, "handle")
	for _, cut := range []int{3, 9, len(whole) - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			checkLeaks(t)
			c := mustPipeConn(t, func(p *scriptPeer) {
				req := p.read()
				p.write(handleReply(req.id, "handle")[:cut])
			})
			res := recv(t, goCall(testCtx(t), c, "/a"))
			require.ErrorIs(t, res.err, io.ErrUnexpectedEOF)
			require.ErrorIs(t, res.err, net.ErrClosed)
		})
	}
}

func TestConnCleanEOF(t *testing.T) {
	checkLeaks(t)
	c := mustPipeConn(t, func(p *scriptPeer) {})
	recv(t, c.done)
	err := c.failed()
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, err, errServerClosed)
	require.NotErrorIs(t, err, io.ErrUnexpectedEOF, "nothing was outstanding")

	res := recv(t, goCall(testCtx(t), c, "/a"))
	require.ErrorIs(t, res.err, errServerClosed)
}

func TestConnCancelThenLateReply(t *testing.T) {
	for _, kind := range []sshfx.PacketType{sshfx.TypeAttrs, sshfx.TypeHandle} {
		t.Run(kind.String(), func(t *testing.T) {
			checkLeaks(t)
			got, late, settled := make(chan struct{}), make(chan struct{}), make(chan struct{})
			c := mustPipeConn(t, func(p *scriptPeer) {
				first := p.read()
				close(got)
				<-late
				// The waiter is gone: this reply must be dropped, not fail the connection.
				if kind == sshfx.TypeHandle {
					p.write(handleReply(first.id, "late"))
					p.expectClose("late") // nobody else will close that handle
				} else {
					a := sshfx.Attrs{Flags: sshfx.AttrSize, Size: 1}
					p.write(replyPacket(sshfx.TypeAttrs, first.id, sshfx.AppendAttrs(nil, &a)))
				}
				close(settled)
				p.echo([]rawPacket{p.read()})
				p.expectEOF()
			})
			ctx, cancel := context.WithCancel(testCtx(t))
			first := goCall(ctx, c, "/first")
			recv(t, got)
			cancel()
			res := recv(t, first)
			require.ErrorIs(t, res.err, context.Canceled)
			require.NotErrorIs(t, res.err, net.ErrClosed)
			close(late)
			recv(t, settled)

			res = recv(t, goCall(testCtx(t), c, "/second"))
			require.NoError(t, res.err)
			require.Equal(t, "for /second", handleOf(t, res.r))
			require.NoError(t, c.failed())
		})
	}
}

// TestConnAbandonDelivered covers a waiter that gives up after the reader has already
// handed its reply over: abandon must take it off the channel, and as the reply is a
// HANDLE, close that handle.
func TestConnAbandonDelivered(t *testing.T) {
	checkLeaks(t)
	acked := make(chan struct{})
	c := mustPipeConn(t, func(p *scriptPeer) {
		p.echo(p.readN(2, sshfx.TypeStat))
		p.expectClose("for /a")
		close(acked)
		p.expectEOF()
	})
	ctx := testCtx(t)
	cl := c.start(ctx, appendString1(nil, sshfx.TypeStat, c.newID(), "/a"), nil)
	require.NoError(t, cl.err)
	ch := cl.ch
	// The reader dispatches in order, so once the second call has its reply the
	// first reply is sitting in ch.
	res := recv(t, goCall(ctx, c, "/b"))
	require.NoError(t, res.err)
	require.Equal(t, "for /b", handleOf(t, res.r))
	require.Len(t, ch, 1)

	cl.abandon()
	require.Empty(t, ch)
	recv(t, acked) // the CLOSE went out, and its reply is dropped without harm
	require.NoError(t, c.failed())
}

func TestConnCloseWithCallsInFlight(t *testing.T) {
	checkLeaks(t)
	const n = 8
	allIn := make(chan struct{})
	c := mustPipeConn(t, func(p *scriptPeer) {
		p.readN(n, sshfx.TypeStat)
		close(allIn)
		p.expectEOF()
	})
	ctx := testCtx(t)
	results := make([]<-chan callResult, n)
	for i := range results {
		results[i] = goCall(ctx, c, fmt.Sprint("/", i))
	}
	recv(t, allIn)

	closed := make(chan struct{})
	go func() {
		c.close()
		close(closed)
	}()
	recv(t, closed)
	for _, ch := range results {
		res := recv(t, ch)
		require.ErrorIs(t, res.err, net.ErrClosed)
		require.ErrorIs(t, res.err, errClientClosed)
	}
	res := recv(t, goCall(ctx, c, "/after"))
	require.ErrorIs(t, res.err, net.ErrClosed)
	c.close() // idempotent
}

func TestConnForgetWithRepliesInTransit(t *testing.T) {
	checkLeaks(t)
	const n = 6
	release := make(chan struct{})
	c := mustPipeConn(t, func(p *scriptPeer) {
		reqs := p.readN(n+1, sshfx.TypeStat) // n on one channel, then a marker call
		if p.err != nil {
			return
		}
		for _, req := range reqs[:n] {
			if req.id%2 == 1 {
				p.write(dataReply(req.id, "early"))
			}
		}
		p.echo(reqs[n:])
		<-release
		for _, req := range reqs[:n] {
			if req.id%2 == 0 {
				p.write(dataReply(req.id, "late"))
			}
		}
		p.echo([]rawPacket{p.read()})
		p.expectEOF()
	})
	ctx := testCtx(t)
	ch := make(chan response, n)
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = c.newID()
		require.NoError(t, c.startInto(ctx, appendString1(nil, sshfx.TypeStat, ids[i], "/s"), nil, ch))
	}
	res := recv(t, goCall(ctx, c, "/marker"))
	require.NoError(t, res.err)
	require.Equal(t, "for /marker", handleOf(t, res.r))
	require.Len(t, ch, n/2, "the odd ids' replies were delivered")

	// The odd ids left pending before forget; their replies are the caller's to drain.
	require.Equal(t, n/2, c.forget(ids))
	drain(t, ch, n/2)
	close(release)

	// The late replies are dropped, and the channel carries on.
	res = recv(t, goCall(ctx, c, "/last"))
	require.NoError(t, res.err)
	require.Equal(t, "for /last", handleOf(t, res.r))
	require.Empty(t, ch)
	require.NoError(t, c.failed())
}

// TestConnForgetRacingReplies forgets requests while their replies stream in, so some
// are in pending, some in transit between the reader and ch, some already in ch.
// Whatever the interleaving, forget must return and nothing may reach ch afterwards.
func TestConnForgetRacingReplies(t *testing.T) {
	checkLeaks(t)
	const rounds, n = 50, 8
	c := mustPipeConn(t, func(p *scriptPeer) {
		rng := rand.New(rand.NewPCG(3, 4))
		for range rounds {
			// forget withdraws the READs the writer has not started, so how many
			// arrive is not known: each is answered at once or held back, in a
			// random order, until the marker comes.
			var held []rawPacket
			for p.err == nil {
				req := p.read()
				if req.typ != sshfx.TypeRead {
					rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
					for _, r := range held {
						p.write(dataReply(r.id, "data"))
					}
					p.echo([]rawPacket{req})
					break
				}
				if rng.IntN(2) == 0 {
					p.write(dataReply(req.id, "data"))
				} else {
					held = append(held, req)
				}
			}
		}
		p.expectEOF()
	})
	ctx := testCtx(t)
	for round := range rounds {
		ch := make(chan response, n)
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = c.newID()
			require.NoError(t, c.startInto(ctx, appendRead(nil, ids[i], "h", 0, 4), nil, ch))
		}
		// Those forget found gone from pending are owed to ch: each must arrive.
		drain(t, ch, c.forget(ids))
		// Every reply of this round precedes the marker's, so by now each one has
		// been drained above or dropped by the reader.
		res := recv(t, goCall(ctx, c, "/marker"))
		require.NoError(t, res.err, "round %d", round)
		require.Equal(t, "for /marker", handleOf(t, res.r))
		require.Empty(t, ch, "round %d", round)
	}
	require.NoError(t, c.failed())
}

func TestConnForgetAfterFailure(t *testing.T) {
	checkLeaks(t)
	c := mustPipeConn(t, func(p *scriptPeer) { p.readN(2, sshfx.TypeRead) })
	ch := make(chan response, 2)
	ids := []uint32{c.newID(), c.newID()}
	for _, id := range ids {
		require.NoError(t, c.startInto(testCtx(t), appendRead(nil, id, "h", 0, 4), nil, ch))
	}
	recv(t, c.done)
	// The failure reached each pending request as an error reply on ch; nothing else
	// is owed.
	require.Zero(t, c.forget(ids))
	require.Len(t, ch, 2)
	for range 2 {
		r := <-ch
		require.ErrorIs(t, r.err, io.ErrUnexpectedEOF)
		require.ErrorIs(t, r.err, net.ErrClosed)
		require.Contains(t, ids, r.id)
	}
	require.ErrorIs(t, c.failed(), io.ErrUnexpectedEOF)
}

// drain takes n replies off ch, as a caller of forget must.
func drain(t *testing.T, ch <-chan response, n int) {
	t.Helper()
	for range n {
		r := recv(t, ch)
		require.NoError(t, r.err)
		r.release()
	}
}

func TestClientPipeWrongReplyType(t *testing.T) {
	checkLeaks(t)
	clientR, clientW, run := startPeer(func(p *scriptPeer) {
		p.handshake(3)
		req := p.read()
		if p.err == nil && (req.typ != sshfx.TypeStat || req.path() != "/a/b") {
			p.fail(fmt.Errorf("peer: got %v %q, want STAT /a/b", req.typ, req.body))
		}
		p.write(handleReply(req.id, "not attrs"))
		p.expectEOF() // the client cannot trust the channel after that: it must close it
	})
	ctx := testCtx(t)
	cl, err := NewClientPipe(ctx, clientR, clientW)
	require.NoError(t, err)
	defer cl.Close()

	_, err = cl.Stat(ctx, "/a/b")
	var pe *ProtocolError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, net.ErrClosed, "the call that met it gets the dead channel's error too")
	var pathErr *fs.PathError
	require.ErrorAs(t, err, &pathErr)
	require.Equal(t, "/a/b", pathErr.Path)
	require.NoError(t, run.wait(t), "scripted peer")

	_, err = cl.Stat(ctx, "/a/b")
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorAs(t, err, &pe, "the cause is kept")
	require.NoError(t, cl.Close())
}

// TestConnCheck: check passes the server's errors through and leaves the channel up;
// a protocol error fails the channel, and the caller gets the error every other call
// gets: one matching both *ProtocolError and net.ErrClosed, even when the channel had
// already died of something else.
func TestConnCheck(t *testing.T) {
	checkLeaks(t)
	c := mustPipeConn(t, func(p *scriptPeer) { p.expectEOF() })
	require.NoError(t, c.check(nil))
	se := &StatusError{Code: StatusOK}
	require.Same(t, se, c.check(se))
	require.Equal(t, io.EOF, c.check(io.EOF))
	require.NoError(t, c.failed(), "a STATUS fails one request, not the channel")

	pe := protoErr("READ", "DATA of %d bytes for a READ of %d", 5, 4)
	err := c.check(fmt.Errorf("wrapped: %w", pe))
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorAs(t, err, new(*ProtocolError))
	require.ErrorIs(t, c.failed(), net.ErrClosed)
	require.ErrorIs(t, c.failed(), pe, "the channel died of it")
	require.Same(t, err, c.check(err), "a dead channel's error is passed on as it is")

	// Another protocol error on the channel already dead: the caller still learns of
	// its own, with both matches.
	other := protoErr("STAT", "got HANDLE, want ATTRS")
	err = c.check(other)
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, err, other)
	require.ErrorIs(t, c.failed(), pe, "the first cause stays")
}

func TestClientPipeHandshakeRefused(t *testing.T) {
	checkLeaks(t)
	clientR, clientW, run := startPeer(func(p *scriptPeer) {
		p.handshake(5)
		p.expectEOF()
	})
	cl, err := NewClientPipe(testCtx(t), clientR, clientW)
	require.Nil(t, cl)
	require.ErrorAs(t, err, new(*ProtocolError))
	require.NoError(t, run.wait(t))
}

// TestConnConcurrentSendersDoNotInterleave has many goroutines send large WRITEs at
// once: the peer must see every packet whole.
func TestConnConcurrentSendersDoNotInterleave(t *testing.T) {
	checkLeaks(t)
	const n, size = 16, 200000
	c := mustPipeConn(t, func(p *scriptPeer) {
		for range n {
			req := p.read()
			d := sshfx.NewDecoder(req.body)
			d.Bytes()  // handle
			d.Uint64() // offset
			data := d.Bytes()
			if err := d.Done(); p.err == nil && (err != nil || req.typ != sshfx.TypeWrite || len(data) != size) {
				p.fail(fmt.Errorf("peer: mangled WRITE (%v, %d bytes): %v", req.typ, len(data), err))
			}
			for _, b := range data {
				if b != data[0] {
					p.fail(errors.New("peer: WRITE payload mixes two senders"))
					break
				}
			}
			p.write(statusReply(req.id, sshfx.StatusOK, ""))
		}
		p.expectEOF()
	})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{}) // all senders go at once, to make overlap likely
	for i := range n {
		wg.Go(func() {
			payload := make([]byte, size)
			for j := range payload {
				payload[j] = byte(i)
			}
			<-start
			errs <- c.start(ctx, appendWrite(nil, c.newID(), "h", 0, payload), nil).take(ctx, status("WRITE"))
		})
	}
	close(start)
	for range n {
		require.NoError(t, recv(t, errs))
	}
	wg.Wait()
}

// TestConnSendWaitsNoLongerThanCtx blocks one request's write half way (the peer stops
// reading) and checks a second request gives up with its ctx, and never goes out.
func TestConnSendWaitsNoLongerThanCtx(t *testing.T) {
	checkLeaks(t)
	stuck, proceed := make(chan struct{}), make(chan struct{})
	c := mustPipeConn(t, func(p *scriptPeer) {
		hdr := make([]byte, 5)
		p.readFull(hdr)
		close(stuck)
		<-proceed
		if p.err != nil {
			return
		}
		rest := make([]byte, binary.BigEndian.Uint32(hdr[:4])-1)
		p.readFull(rest)
		p.write(handleReply(binary.BigEndian.Uint32(rest), "first"))
		p.expectEOF() // the second request must not have been sent
	})
	first := goCall(testCtx(t), c, "/first")
	recv(t, stuck)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res := recv(t, goCall(ctx, c, "/second"))
	require.ErrorIs(t, res.err, context.DeadlineExceeded)
	require.NoError(t, c.failed())

	close(proceed)
	res = recv(t, first)
	require.NoError(t, res.err)
	require.Equal(t, "first", handleOf(t, res.r))
}
