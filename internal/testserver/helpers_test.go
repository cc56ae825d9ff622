package testserver

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests build and parse packets by hand with encoding/binary rather than
// with the server's own codec, so a codec bug can't cancel itself out.

// pkt builds one request packet.
type pkt struct{ b []byte }

func newPkt(typ uint8, id uint32) *pkt {
	p := &pkt{b: []byte{0, 0, 0, 0, typ}}
	return p.u32(id)
}

// newInit builds INIT, which has no id.
func newInit(version uint32) *pkt {
	p := &pkt{b: []byte{0, 0, 0, 0, TypeInit}}
	return p.u32(version)
}

func (p *pkt) u32(v uint32) *pkt { p.b = binary.BigEndian.AppendUint32(p.b, v); return p }
func (p *pkt) u64(v uint64) *pkt { p.b = binary.BigEndian.AppendUint64(p.b, v); return p }
func (p *pkt) str(s string) *pkt { p.u32(uint32(len(s))); p.b = append(p.b, s...); return p }
func (p *pkt) raw(b ...byte) *pkt {
	p.b = append(p.b, b...)
	return p
}

func (p *pkt) bytes() []byte {
	binary.BigEndian.PutUint32(p.b, uint32(len(p.b)-4))
	return p.b
}

// reply is one packet read from the server.
type reply struct {
	typ  uint8
	id   uint32 // for VERSION: the version
	body []byte // after type and id
	raw  []byte // the whole packet, length field included
}

// cursor reads reply fields; t fails the test on a short body.
type cursor struct {
	t testing.TB
	b []byte
}

func (c *cursor) u32() uint32 {
	c.t.Helper()
	require.GreaterOrEqual(c.t, len(c.b), 4, "short reply")
	v := binary.BigEndian.Uint32(c.b)
	c.b = c.b[4:]
	return v
}

func (c *cursor) u64() uint64 {
	c.t.Helper()
	require.GreaterOrEqual(c.t, len(c.b), 8, "short reply")
	v := binary.BigEndian.Uint64(c.b)
	c.b = c.b[8:]
	return v
}

func (c *cursor) str() string {
	c.t.Helper()
	n := c.u32()
	require.GreaterOrEqual(c.t, uint64(len(c.b)), uint64(n), "short string")
	s := string(c.b[:n])
	c.b = c.b[n:]
	return s
}

type testAttrs struct {
	flags                        uint32
	size                         uint64
	uid, gid, perm, atime, mtime uint32
}

func (c *cursor) attrs() testAttrs {
	c.t.Helper()
	var a testAttrs
	a.flags = c.u32()
	if a.flags&AttrSize != 0 {
		a.size = c.u64()
	}
	if a.flags&AttrUIDGID != 0 {
		a.uid, a.gid = c.u32(), c.u32()
	}
	if a.flags&AttrPermissions != 0 {
		a.perm = c.u32()
	}
	if a.flags&AttrACModTime != 0 {
		a.atime, a.mtime = c.u32(), c.u32()
	}
	require.Zero(c.t, a.flags&^uint32(0x0f), "unexpected attr flags")
	return a
}

// wantMessages are OpenSSH's fixed status texts.
var wantMessages = map[uint32]string{
	0: "Success", 1: "End of file", 2: "No such file", 3: "Permission denied",
	4: "Failure", 5: "Bad message", 8: "Operation unsupported",
}

// client drives one session with raw packets.
type client struct {
	t      testing.TB
	r      io.ReadCloser
	w      io.WriteCloser
	nextID uint32
	ver    reply
}

// connect opens a session without the handshake.
func connect(t testing.TB, s *Server) *client {
	r, w := s.Conn()
	c := &client{t: t, r: r, w: w, nextID: 1}
	t.Cleanup(func() { c.r.Close(); c.w.Close() })
	return c
}

// dial opens a session and does INIT/VERSION.
func dial(t testing.TB, s *Server) *client {
	t.Helper()
	c := connect(t, s)
	c.write(newInit(3).bytes())
	c.ver = c.recv()
	require.EqualValues(t, TypeVersion, c.ver.typ)
	require.EqualValues(t, 3, c.ver.id)
	return c
}

func (c *client) id() uint32 {
	id := c.nextID
	c.nextID++
	return id
}

func (c *client) write(b []byte) {
	c.t.Helper()
	_, err := c.w.Write(b)
	require.NoError(c.t, err)
}

// recv reads one packet; it fails the test if the connection ended.
func (c *client) recv() reply {
	c.t.Helper()
	r, err := c.tryRecv()
	require.NoError(c.t, err)
	return r
}

func (c *client) tryRecv() (reply, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return reply{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 5 || n > 1<<24 {
		return reply{raw: hdr[:]}, io.ErrUnexpectedEOF
	}
	raw := make([]byte, 4+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(c.r, raw[4:]); err != nil {
		return reply{}, err
	}
	return reply{
		typ:  raw[4],
		id:   binary.BigEndian.Uint32(raw[5:]),
		body: raw[9:],
		raw:  raw,
	}, nil
}

// expectEOF asserts the server closed the reply direction.
func (c *client) expectEOF() {
	c.t.Helper()
	_, err := c.tryRecv()
	require.ErrorIs(c.t, err, io.EOF)
}

// call sends a request with a fresh id and returns its reply, checking ids.
func (c *client) call(typ uint8, fill func(p *pkt)) reply {
	c.t.Helper()
	id := c.id()
	p := newPkt(typ, id)
	if fill != nil {
		fill(p)
	}
	c.write(p.bytes())
	r := c.recv()
	require.Equal(c.t, id, r.id, "reply id")
	return r
}

func (c *client) status(r reply) uint32 {
	c.t.Helper()
	require.EqualValues(c.t, TypeStatus, r.typ, "want STATUS, got type %d", r.typ)
	cur := cursor{t: c.t, b: r.body}
	code := cur.u32()
	msg := cur.str()
	lang := cur.str()
	if want, ok := wantMessages[code]; ok {
		require.Equal(c.t, want, msg)
	}
	require.Empty(c.t, lang)
	require.Empty(c.t, cur.b)
	return code
}

func (c *client) requireStatus(want uint32, r reply) {
	c.t.Helper()
	require.EqualValues(c.t, want, c.status(r))
}

func (c *client) handle(r reply) string {
	c.t.Helper()
	require.EqualValues(c.t, TypeHandle, r.typ, "want HANDLE, got type %d", r.typ)
	cur := cursor{t: c.t, b: r.body}
	h := cur.str()
	require.Empty(c.t, cur.b)
	return h
}

func (c *client) data(r reply) []byte {
	c.t.Helper()
	require.EqualValues(c.t, TypeData, r.typ, "want DATA, got type %d", r.typ)
	cur := cursor{t: c.t, b: r.body}
	d := cur.str()
	require.Empty(c.t, cur.b)
	return []byte(d)
}

type nameEntry struct {
	name, long string
	attrs      testAttrs
}

func (c *client) names(r reply) []nameEntry {
	c.t.Helper()
	require.EqualValues(c.t, TypeName, r.typ, "want NAME, got type %d", r.typ)
	cur := cursor{t: c.t, b: r.body}
	n := cur.u32()
	var out []nameEntry
	for range n {
		out = append(out, nameEntry{name: cur.str(), long: cur.str(), attrs: cur.attrs()})
	}
	require.Empty(c.t, cur.b)
	return out
}

func (c *client) attrs(r reply) testAttrs {
	c.t.Helper()
	require.EqualValues(c.t, TypeAttrs, r.typ, "want ATTRS, got type %d", r.typ)
	cur := cursor{t: c.t, b: r.body}
	a := cur.attrs()
	require.Empty(c.t, cur.b)
	return a
}

// Convenience wrappers for the common requests.

func (c *client) open(name string, pflags uint32) reply {
	return c.call(TypeOpen, func(p *pkt) { p.str(name).u32(pflags).u32(0) })
}

func (c *client) mustOpen(name string, pflags uint32) string {
	c.t.Helper()
	return c.handle(c.open(name, pflags))
}

func (c *client) readAt(h string, off uint64, n uint32) reply {
	return c.call(TypeRead, func(p *pkt) { p.str(h).u64(off).u32(n) })
}

func (c *client) writeAt(h string, off uint64, data string) reply {
	return c.call(TypeWrite, func(p *pkt) { p.str(h).u64(off).str(data) })
}

func (c *client) closeHandle(h string) reply {
	return c.call(TypeClose, func(p *pkt) { p.str(h) })
}

func (c *client) path(typ uint8, name string) reply {
	return c.call(typ, func(p *pkt) { p.str(name) })
}

func (c *client) path2(typ uint8, a, b string) reply {
	return c.call(typ, func(p *pkt) { p.str(a).str(b) })
}

func (c *client) ext(name string, fill func(p *pkt)) reply {
	return c.call(TypeExtended, func(p *pkt) {
		p.str(name)
		if fill != nil {
			fill(p)
		}
	})
}

// statPkt is a STAT request for pipelining tests.
func statPkt(id uint32, name string) []byte {
	return newPkt(TypeStat, id).str(name).bytes()
}
