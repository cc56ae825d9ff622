package testserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeAll sends several packets in one Write, so they are all buffered
// before the server reads the first.
func writeAll(c *client, pkts ...[]byte) {
	c.t.Helper()
	c.write(bytes.Join(pkts, nil))
}

func statBurst(first uint32, n int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, statPkt(first+uint32(i), "/"))
	}
	return out
}

func TestReadCapAndShorten(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 10000)

	s := newServer(t, Options{ReadCap: 32768})
	require.NoError(t, s.WriteFile("/f", data, 0o644))
	c := dial(t, s)
	h := c.mustOpen("/f", OpenRead)
	require.Equal(t, data[:32768], c.data(c.readAt(h, 0, 65536)))
	require.Equal(t, data[99990:], c.data(c.readAt(h, 99990, 65536)))

	var calls [][2]int64
	s2 := newServer(t, Options{ReadCap: 1000, Shorten: func(off int64, asked int) int {
		calls = append(calls, [2]int64{off, int64(asked)})
		switch off {
		case 0:
			return 7
		case 10:
			return 0
		}
		return 1 << 30 // clamped to asked
	}})
	require.NoError(t, s2.WriteFile("/f", data, 0o644))
	c2 := dial(t, s2)
	h = c2.mustOpen("/f", OpenRead)
	require.Equal(t, data[:7], c2.data(c2.readAt(h, 0, 500)))
	require.Empty(t, c2.data(c2.readAt(h, 10, 500)), "0 sends an empty DATA")
	require.Equal(t, data[20:1020], c2.data(c2.readAt(h, 20, 5000)))
	c2.requireStatus(StatusEOF, c2.readAt(h, 100000, 10))
	require.Equal(t, [][2]int64{{0, 500}, {10, 500}, {20, 1000}, {100000, 10}}, calls)
}

func TestReorder(t *testing.T) {
	s := newServer(t, Options{Reorder: 4})
	c := dial(t, s)

	// Eight requests buffered at once form two full groups, each shuffled.
	writeAll(c, statBurst(1, 8)...)
	var ids []uint32
	for range 8 {
		r := c.recv()
		c.attrs(r)
		ids = append(ids, r.id)
	}
	require.ElementsMatch(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8}, ids)
	require.NotEqual(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8}, ids, "replies should be shuffled")
	first := slices.Clone(ids[:4])
	slices.Sort(first)
	require.Equal(t, []uint32{1, 2, 3, 4}, first, "groups are released in order")

	// A client that waits for each reply is never stalled by a part group.
	for range 5 {
		c.attrs(c.path(TypeStat, "/"))
	}
	// Three buffered requests: less than a group, flushed when idle.
	writeAll(c, statBurst(100, 3)...)
	ids = ids[:0]
	for range 3 {
		ids = append(ids, c.recv().id)
	}
	require.ElementsMatch(t, []uint32{100, 101, 102}, ids)

	// The shuffle is repeatable.
	s2 := newServer(t, Options{Reorder: 4})
	c2 := dial(t, s2)
	writeAll(c2, statBurst(1, 8)...)
	var ids2 []uint32
	for range 8 {
		ids2 = append(ids2, c2.recv().id)
	}
	s3 := newServer(t, Options{Reorder: 4})
	c3 := dial(t, s3)
	writeAll(c3, statBurst(1, 8)...)
	for i := range 8 {
		require.Equal(t, ids2[i], c3.recv().id)
	}
}

func TestLatency(t *testing.T) {
	const lat = 30 * time.Millisecond
	s := newServer(t, Options{Latency: lat})
	c := dial(t, s)
	start := time.Now()
	c.attrs(c.path(TypeStat, "/"))
	require.GreaterOrEqual(t, time.Since(start), lat, "a reply never comes early")
}

// TestLatencyKeepsReading shows that replies waiting out their latency don't
// stop the server from reading and executing further requests: with an hour
// of latency, far more requests than the reply channel holds still all
// reach the server.
func TestLatencyKeepsReading(t *testing.T) {
	const n = 1000
	seen := make(chan struct{})
	s := newServer(t, Options{
		Latency: time.Hour,
		Stall: func(req Request) bool {
			if req.Seq == n {
				close(seen)
			}
			return false
		},
	})
	c := connect(t, s) // VERSION is an hour away too
	writeAll(c, append([][]byte{newInit(3).bytes()}, statBurst(1, n)...)...)
	<-seen
	require.Equal(t, n, s.Requests(TypeStat))
	require.NoError(t, s.Close())
	c.expectEOF()
}

func TestDropAfterRequests(t *testing.T) {
	s := newServer(t, Options{DropAfterRequests: 3, Latency: time.Millisecond, Reorder: 2})
	c := dial(t, s)
	_, _ = c.w.Write(bytes.Join(statBurst(1, 5), nil))
	// Replies to the two requests before the third still arrive; the third
	// gets none, and the connection ends.
	ids := []uint32{c.recv().id, c.recv().id}
	require.ElementsMatch(t, []uint32{1, 2}, ids)
	c.expectEOF()
	require.Equal(t, 3, s.Requests(TypeStat))
	_, err := c.w.Write(statPkt(9, "/"))
	require.ErrorIs(t, err, io.ErrClosedPipe)
}

func TestDropAfterBytes(t *testing.T) {
	probe := newServer(t, Options{})
	verLen := len(dial(t, probe).ver.raw)

	s := newServer(t, Options{DropAfterBytes: int64(verLen + 10)})
	c := dial(t, s)
	c.write(statPkt(1, "/"))
	got, err := io.ReadAll(c.r)
	require.NoError(t, err)
	require.Len(t, got, 10, "the reply is cut mid-packet")
	require.Equal(t, []byte{0, 0, 0, 37, TypeAttrs, 0, 0, 0, 1, 0}, got)
	// Both directions are closed.
	_, err = c.w.Write(statPkt(2, "/"))
	require.ErrorIs(t, err, io.ErrClosedPipe)
}

func TestFail(t *testing.T) {
	s := newServer(t, Options{Fail: func(req Request) uint32 {
		switch {
		case req.Type == TypeWrite && req.Offset == 5:
			return StatusFailure
		case req.Type == TypeStat && req.Path == "/odd":
			return 42
		}
		return 0
	}})
	c := dial(t, s)
	h := c.mustOpen("/f", OpenWrite|OpenCreat)
	c.requireStatus(StatusOK, c.writeAt(h, 0, "01234"))
	c.requireStatus(StatusFailure, c.writeAt(h, 5, "56789"))
	got, _ := s.ReadFile("/f")
	require.Equal(t, "01234", string(got), "a failed request is not executed")
	r := c.path(TypeStat, "/odd")
	require.EqualValues(t, 42, c.status(r))
}

func TestStallAndRelease(t *testing.T) {
	s := newServer(t, Options{Stall: func(req Request) bool {
		return req.Type == TypeMkdir
	}})
	c := dial(t, s)
	writeAll(c,
		newPkt(TypeMkdir, 1).str("/late").u32(0).bytes(),
		statPkt(2, "/"),
	)
	require.EqualValues(t, 2, c.recv().id, "the stalled request doesn't block others")
	require.NoError(t, s.WaitStalled(context.Background(), 1))
	require.Equal(t, 1, s.Stalled())
	_, err := s.Stat("/late")
	require.NoError(t, err, "a stalled request is still executed")

	require.Equal(t, 1, s.ReleaseStalled())
	require.Equal(t, 0, s.Stalled())
	r := c.recv()
	require.EqualValues(t, 1, r.id)
	c.requireStatus(StatusOK, r)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.WaitStalled(ctx, 5), context.Canceled)
}

// ReleaseStalledWhere releases the chosen replies, in the order withheld, and keeps the
// others; successive calls decide the order the client sees.
func TestReleaseStalledWhere(t *testing.T) {
	s := newServer(t, Options{Stall: func(req Request) bool { return req.Type == TypeStat }})
	c := dial(t, s)
	writeAll(c, statPkt(1, "/"), statPkt(2, "/a"), statPkt(3, "/"), statPkt(4, "/b"))
	require.NoError(t, s.WaitStalled(context.Background(), 4))
	require.Equal(t, 2, s.ReleaseStalledWhere(func(r Request) bool { return r.Path != "/" }))
	require.Equal(t, 2, s.Stalled())
	require.EqualValues(t, 2, c.recv().id)
	require.EqualValues(t, 4, c.recv().id)
	require.Equal(t, 0, s.ReleaseStalledWhere(func(r Request) bool { return r.ID == 99 }))
	require.Equal(t, 1, s.ReleaseStalledWhere(func(r Request) bool { return r.ID == 3 }))
	require.Equal(t, 1, s.ReleaseStalled())
	require.Equal(t, 0, s.Stalled())
	require.EqualValues(t, 3, c.recv().id)
	require.EqualValues(t, 1, c.recv().id)
}

func TestCloseUnblocksStall(t *testing.T) {
	s := New(Options{Stall: func(Request) bool { return true }})
	c := connect(t, s)
	c.write(newInit(3).bytes())
	c.write(statPkt(1, "/"))
	require.NoError(t, s.WaitStalled(context.Background(), 1), "INIT's reply is withheld")

	got := make(chan error, 1)
	go func() {
		_, err := c.tryRecv()
		got <- err
	}()
	waitErr := make(chan error, 1)
	go func() { waitErr <- s.WaitStalled(context.Background(), 100) }()

	require.NoError(t, s.Close())
	require.ErrorIs(t, <-got, io.EOF)
	require.ErrorIs(t, <-waitErr, ErrClosed)
	require.Equal(t, 0, s.Stalled())
	require.NoError(t, s.Close(), "Close is idempotent")

	// A session opened after Close is already over.
	r, w := s.Conn()
	_, err := r.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	_, err = w.Write([]byte{1})
	require.ErrorIs(t, err, io.ErrClosedPipe)
}

func TestMaxInflight(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	for range 20 {
		c.attrs(c.path(TypeStat, "/"))
	}
	require.Equal(t, 1, s.MaxInflight(), "one at a time is exactly 1")

	writeAll(c, statBurst(100, 10)...)
	for range 10 {
		c.recv()
	}
	require.Equal(t, 10, s.MaxInflight(), "ten written before any reply was read")

	s.ResetStats()
	require.Equal(t, 0, s.MaxInflight())
	require.Equal(t, 0, s.Requests(TypeStat))
	c.write(statPkt(200, "/"))
	c.recv()
	require.Equal(t, 1, s.MaxInflight())
	require.Equal(t, 1, s.Requests(TypeStat))
}

func TestCorruptOversize(t *testing.T) {
	s := newServer(t, Options{Corrupt: CorruptOversize(TypeAttrs)})
	c := dial(t, s)
	c.write(statPkt(1, "/"))
	var hdr [4]byte
	_, err := io.ReadFull(c.r, hdr[:])
	require.NoError(t, err)
	require.EqualValues(t, 0x7fffffff, binary.BigEndian.Uint32(hdr[:]))
}

func TestCorruptTruncate(t *testing.T) {
	for _, typ := range []uint8{TypeStatus, TypeAttrs, TypeData, TypeName, TypeHandle, TypeVersion} {
		s := newServer(t, Options{Corrupt: CorruptTruncate(typ)})
		require.NoError(t, s.WriteFile("/f", []byte("abc"), 0o644))
		c := connect(t, s)
		c.write(newInit(3).bytes())
		if typ != TypeVersion {
			c.recv()
		}
		switch typ {
		case TypeStatus:
			c.write(statPkt(1, "/nope"))
		case TypeAttrs:
			c.write(statPkt(1, "/"))
		case TypeData, TypeHandle:
			c.write(newPkt(TypeOpen, 1).str("/f").u32(OpenRead).u32(0).bytes())
			if typ == TypeData {
				h := c.handle(c.recv())
				c.write(newPkt(TypeRead, 2).str(h).u64(0).u32(10).bytes())
			}
		case TypeName:
			c.write(newPkt(TypeRealpath, 1).str(".").bytes())
		}
		r := c.recv()
		// The frame itself is consistent...
		require.Equal(t, typ, r.typ)
		require.EqualValues(t, len(r.raw)-4, binary.BigEndian.Uint32(r.raw))
		// ...but the body is one byte short of what its fields need.
		switch typ {
		case TypeStatus: // code, "No such file", ""
			require.Len(t, r.body, 4+4+12+4-1)
		case TypeAttrs: // flags 0x0f and all four fields
			require.Len(t, r.body, 4+8+8+4+8-1)
		case TypeData: // "abc"
			require.Len(t, r.body, 4+3-1)
		case TypeName: // count, "/", "/", flags 0
			require.Len(t, r.body, 4+5+5+4-1)
		case TypeVersion: // the last pair is statvfs@openssh.com "2"
			require.Equal(t, []byte{0, 0, 0, 1}, r.raw[len(r.raw)-4:])
		}
	}
}

func TestCorruptUnknownTypeAndWrongID(t *testing.T) {
	s := newServer(t, Options{Corrupt: CorruptUnknownType(TypeAttrs)})
	c := dial(t, s)
	writeAll(c, statPkt(1, "/"), statPkt(2, "/"))
	r := c.recv()
	require.EqualValues(t, UnknownType, r.typ)
	require.EqualValues(t, 1, r.id)
	require.EqualValues(t, TypeAttrs, c.recv().typ, "only the first is changed")

	s = newServer(t, Options{Corrupt: CorruptWrongID(TypeStatus)})
	c = dial(t, s)
	writeAll(c, statPkt(1, "/nope"), statPkt(2, "/nope"))
	require.Equal(t, uint32(BogusID), c.recv().id)
	require.EqualValues(t, 2, c.recv().id)
}

func TestCorruptRepeat(t *testing.T) {
	s := newServer(t, Options{Corrupt: CorruptRepeat(TypeAttrs)})
	c := dial(t, s)
	writeAll(c, statPkt(1, "/"), statPkt(2, "/"))
	a, b, d := c.recv(), c.recv(), c.recv()
	require.Equal(t, a.raw, b.raw)
	require.EqualValues(t, 1, a.id)
	require.EqualValues(t, 2, d.id)
	// MaxInflight counts the request answered once the last copy is read.
	require.Equal(t, 2, s.MaxInflight())
}

func TestCorruptLongData(t *testing.T) {
	s := newServer(t, Options{Corrupt: CorruptLongData()})
	require.NoError(t, s.WriteFile("/f", []byte("abcdefghij"), 0o644))
	c := dial(t, s)
	h := c.mustOpen("/f", OpenRead)
	require.Equal(t, []byte("abcd\x00"), c.data(c.readAt(h, 0, 4)), "one byte more than asked")
	require.Equal(t, []byte("abcd"), c.data(c.readAt(h, 0, 4)))
}

func TestCorruptAttrsFlags(t *testing.T) {
	s := newServer(t, Options{Corrupt: CorruptAttrsFlags()})
	c := dial(t, s)
	r := c.path(TypeStat, "/")
	require.EqualValues(t, TypeAttrs, r.typ)
	require.EqualValues(t, 0x10f, binary.BigEndian.Uint32(r.body))
	c.attrs(c.path(TypeStat, "/")) // the second is clean
}

func TestStatusInstead(t *testing.T) {
	s := newServer(t, Options{Corrupt: StatusInstead(TypeData, StatusOK)})
	require.NoError(t, s.WriteFile("/f", []byte("abcdefghij"), 0o644))
	c := dial(t, s)
	h := c.mustOpen("/f", OpenRead)
	r := c.readAt(h, 0, 4)
	require.EqualValues(t, TypeStatus, r.typ, "the first DATA becomes a STATUS for its id")
	c.requireStatus(StatusOK, r)
	require.Equal(t, []byte("abcd"), c.data(c.readAt(h, 0, 4)), "the second is clean")

	s = newServer(t, Options{Corrupt: StatusInstead(TypeAttrs, 77)})
	c = dial(t, s)
	c.requireStatus(77, c.path(TypeStat, "/"))
	c.attrs(c.path(TypeStat, "/"))
}

func TestCorruptCustom(t *testing.T) {
	// nil leaves the reply alone; an empty slice swallows it; Corrupt sees
	// VERSION as a reply to INIT.
	var seen []Request
	s := newServer(t, Options{Corrupt: func(req Request, reply []byte) [][]byte {
		seen = append(seen, req)
		if req.Seq == 1 {
			return [][]byte{}
		}
		return nil
	}})
	c := dial(t, s)
	writeAll(c, statPkt(1, "/a"), statPkt(2, "/b"))
	require.EqualValues(t, 2, c.recv().id)
	require.Len(t, seen, 3)
	require.Equal(t, Request{Type: TypeInit}, seen[0])
	require.Equal(t, Request{Type: TypeStat, ID: 1, Path: "/a", Seq: 1}, seen[1])
	require.Equal(t, 2, s.MaxInflight(), "the swallowed request stays outstanding")
}

func TestMaxInflightCountsWholePackets(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s)
	for range 3 {
		for _, b := range statPkt(1, "/") {
			c.write([]byte{b})
		}
		c.attrs(c.recv())
	}
	require.Equal(t, 1, s.MaxInflight(), "a request written a byte at a time counts once")
}
