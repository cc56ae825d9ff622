package sftp

import (
	"crypto/sha256"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSumFeedOrders feeds a file's pieces in random orders: the digest is the file's,
// each piece is given back exactly once, and the ones that came early were parked
// until their turn.
func TestSumFeedOrders(t *testing.T) {
	data := randBytes(1<<20, 1)
	want := sha256.Sum256(data)
	r := rand.New(rand.NewPCG(3, 4))
	for run := range 50 {
		var pieces []sumPiece
		for off := 0; off < len(data); {
			n := min(1+r.IntN(100<<10), len(data)-off)
			pieces = append(pieces, sumPiece{off: int64(off), data: data[off : off+n]})
			off += n
		}
		r.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
		rs, err := newRunningSum(SHA256)
		require.NoError(t, err)
		var mu sync.Mutex
		released := map[int64]int{}
		sf := startSumFeed(rs, len(pieces), func(p sumPiece) {
			mu.Lock()
			defer mu.Unlock()
			released[p.off]++
		})
		maxParked := 0
		for _, p := range pieces {
			sf.put(p)
			maxParked = max(maxParked, int(sf.parked.Load()))
		}
		sf.close()
		sum, err := rs.sum(int64(len(data)))
		require.NoError(t, err, "run %d", run)
		require.Equal(t, want[:], sum, "run %d", run)
		require.Len(t, released, len(pieces))
		for off, n := range released {
			require.Equal(t, 1, n, "piece at %d given back %d times", off, n)
		}
		require.Zero(t, sf.parked.Load())
		require.LessOrEqual(t, maxParked, len(pieces)-1)
	}
}

// TestSumFeedGap: a piece that never comes leaves the sum short, and what waited
// behind it is given back, unhashed, when the feed closes.
func TestSumFeedGap(t *testing.T) {
	data := randBytes(3000, 2)
	rs, err := newRunningSum(SHA256)
	require.NoError(t, err)
	var mu sync.Mutex
	var back []int64
	sf := startSumFeed(rs, 3, func(p sumPiece) {
		mu.Lock()
		defer mu.Unlock()
		back = append(back, p.off)
	})
	sf.put(sumPiece{off: 0, data: data[:1000]})
	sf.put(sumPiece{off: 2000, data: data[2000:]})
	sf.close()
	require.ElementsMatch(t, []int64{0, 2000}, back)
	_, err = rs.sum(3000)
	require.ErrorContains(t, err, "1000 bytes hashed of the 3000")
	require.Zero(t, sf.parked.Load())
}

// TestRunningSumOutOfOrder: bytes written out of turn poison the sum rather than
// making a wrong one.
func TestRunningSumOutOfOrder(t *testing.T) {
	rs, err := newRunningSum(SHA256)
	require.NoError(t, err)
	rs.write(0, []byte("abc"))
	rs.write(5, []byte("def"))
	_, err = rs.sum(6)
	require.ErrorContains(t, err, "internal error")
	_, err = newRunningSum("crc32")
	require.ErrorIs(t, err, ErrUnknownHashAlgorithm)
}
