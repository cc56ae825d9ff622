package testserver

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func writePkt(id uint32, h string, off uint64, data string) []byte {
	return newPkt(TypeWrite, id).str(h).u64(off).str(data).bytes()
}

// Held WRITEs are carried out in order, and all of them before the session's next
// request of another kind: a READ sent behind them sees every one.
func TestHoldWritesKeepASessionsOrder(t *testing.T) {
	for seed := range uint64(4) {
		s := newServer(t, Options{HoldWrites: 8, Seed: seed})
		c := dial(t, s)
		h := c.mustOpen("/f", OpenRead|OpenWrite|OpenCreat)
		var burst [][]byte
		for i := range 8 {
			burst = append(burst, writePkt(uint32(100+i), h, uint64(i), string(rune('a'+i))))
		}
		burst = append(burst, newPkt(TypeRead, 200).str(h).u64(0).u32(100).bytes())
		writeAll(c, burst...)
		for i := range 8 {
			r := c.recv()
			require.EqualValues(t, 100+i, r.id, "seed %d: WRITEs are answered as they are carried out, in order", seed)
			c.requireStatus(StatusOK, r)
		}
		r := c.recv()
		require.EqualValues(t, 200, r.id)
		require.Equal(t, "abcdefgh", string(c.data(r)), "seed %d", seed)
	}
}

// A session that ends drops the WRITEs it holds: never carried out, never answered.
// What it carried out is a prefix of what it was sent, and exactly what it answered.
func TestHoldWritesDroppedWithTheSession(t *testing.T) {
	const n = 16
	dropped := 0
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Request 1 is the OPEN, 2 to n+1 the WRITEs; the session ends on receiving
			// request n+2, which is buffered behind them, so the reader never finds
			// itself idle (and so never carries out all it holds) before that.
			s := newServer(t, Options{HoldWrites: 8, Seed: seed, DropAfterRequests: n + 2})
			c := dial(t, s)
			h := c.mustOpen("/f", OpenWrite|OpenCreat)
			var burst [][]byte
			for i := range n {
				burst = append(burst, writePkt(uint32(100+i), h, uint64(i), string(rune('a'+i))))
			}
			burst = append(burst, statPkt(999, "/"))
			writeAll(c, burst...)
			answered := 0
			for {
				r, err := c.tryRecv()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				require.EqualValues(t, 100+answered, r.id)
				c.requireStatus(StatusOK, r)
				answered++
			}
			got, err := s.ReadFile("/f")
			require.NoError(t, err)
			require.Equal(t, "abcdefghijklmnop"[:answered], string(got), "what was carried out is what was answered")
			t.Logf("answered %d of %d", answered, n)
			dropped += n - answered
		})
	}
	require.Positive(t, dropped, "no seed dropped a WRITE: the test proves nothing")
}

// KillSessions ends every session as a dying connection does, and the server serves
// the next one.
func TestKillSessions(t *testing.T) {
	s := newServer(t, Options{HoldWrites: 4})
	a, b := dial(t, s), dial(t, s)
	a.mustOpen("/a", OpenWrite|OpenCreat)
	b.mustOpen("/b", OpenWrite|OpenCreat)
	require.Equal(t, 2, s.OpenHandles())
	s.KillSessions()
	a.expectEOF()
	b.expectEOF()
	require.Zero(t, s.OpenHandles())
	c := dial(t, s)
	h := c.mustOpen("/a", OpenRead)
	r := c.readAt(h, 0, 10)
	c.requireStatus(StatusEOF, r)
}
