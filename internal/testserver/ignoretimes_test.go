package testserver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// IgnoreSetTimes: times in SETSTAT and FSETSTAT are answered OK and left as they are;
// the rest of the request is carried out, and a WRITE still sets the modification
// time.
func TestIgnoreSetTimes(t *testing.T) {
	s := newServer(t, Options{IgnoreSetTimes: true})
	c := dial(t, s)
	require.NoError(t, s.WriteFile("/f", []byte("0123456789"), 0o644))
	before, err := s.Stat("/f")
	require.NoError(t, err)

	c.requireStatus(StatusOK, c.call(TypeSetstat, func(p *pkt) {
		p.str("/f").u32(AttrSize | AttrPermissions | AttrACModTime).u64(4).u32(0o600).u32(100).u32(200)
	}))
	a := c.attrs(c.path(TypeStat, "/f"))
	require.EqualValues(t, 4, a.size, "the size in the same request was not applied")
	require.EqualValues(t, 0o100600, a.perm)
	require.Equal(t, before.Atime, a.atime)
	require.Equal(t, before.Mtime, a.mtime)

	h := c.mustOpen("/f", OpenWrite)
	c.requireStatus(StatusOK, c.call(TypeFsetstat, func(p *pkt) { p.str(h).u32(AttrACModTime).u32(100).u32(200) }))
	require.Equal(t, before.Mtime, c.attrs(c.path(TypeStat, "/f")).mtime)

	// A WRITE sets the modification time to now: moved back first, it must come forward.
	mem := s.fs.(*fsys)
	mem.mu.Lock()
	n, err := mem.find("/f", true)
	require.NoError(t, err)
	n.mtime = 1
	mem.mu.Unlock()
	c.requireStatus(StatusOK, c.writeAt(h, 0, "x"))
	require.Greater(t, c.attrs(c.path(TypeStat, "/f")).mtime, uint32(1))
}
