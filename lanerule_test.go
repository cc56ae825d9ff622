package sftp

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

func TestFirstLanes(t *testing.T) {
	for _, tc := range []struct {
		rtt     time.Duration
		ceiling int
		want    int
	}{
		{0, 16, 2}, // striping itself starts only from 2 ms (Client.stripes)
		{2 * time.Millisecond, 1, 1},
		{4 * time.Millisecond, 16, 2},
		{10 * time.Millisecond, 16, 4},
		{50 * time.Millisecond, 16, 16},
		{50 * time.Millisecond, 32, 20},
		{100 * time.Millisecond, 16, 16},
		{100 * time.Millisecond, 64, 40},
		{100 * time.Millisecond, 4, 4},
		{time.Second, 16, 16},
	} {
		require.Equal(t, tc.want, firstLanes(tc.rtt, tc.ceiling), "rtt %v ceiling %d", tc.rtt, tc.ceiling)
	}
}

func TestNextLanes(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		rtt     time.Duration
		ceiling int
		tried   []laneSample
		want    int
		settled bool
	}{
		{"nothing measured yet: what the round trip suggests", 10 * ms, 16, nil, 4, false},
		// The figures of a 1 GiB download on the 2-core machine at 10 ms: 2 lanes 253
		// MiB/s, 4 lanes 330, 8 lanes 321.
		{"10ms: 2 lanes at 63% of their windows: double", 10 * ms, 16,
			[]laneSample{{2, 253 * mib}}, 4, false},
		{"10ms: 4 lanes 30% faster: double", 10 * ms, 16,
			[]laneSample{{2, 253 * mib}, {4, 330 * mib}}, 8, false},
		{"10ms: 8 lanes no faster than 4: back to 4", 10 * ms, 16,
			[]laneSample{{2, 253 * mib}, {4, 330 * mib}, {8, 321 * mib}}, 4, true},
		// A busy machine at 10 ms: 2 lanes 74 MiB/s, 4 lanes 107, 8 lanes 116.
		{"busy 10ms: 2 lanes far from their windows, yet not surely limited elsewhere", 10 * ms, 16,
			[]laneSample{{2, 74 * mib}}, 4, false},
		{"busy 10ms: 4 lanes at 13% of their windows: settle", 10 * ms, 16,
			[]laneSample{{2, 74 * mib}, {4, 107 * mib}}, 4, true},
		{"a doubling that adds under 10% goes back too", 10 * ms, 16,
			[]laneSample{{4, 420 * mib}, {8, 450 * mib}}, 4, true},
		{"50ms: 7 lanes near their windows: double", 50 * ms, 16,
			[]laneSample{{7, 180 * mib}}, 14, false},
		{"50ms: 14 lanes paid: on to the ceiling", 50 * ms, 16,
			[]laneSample{{7, 180 * mib}, {14, 240 * mib}}, 16, false},
		{"the ceiling caps a doubling", 100 * ms, 16,
			[]laneSample{{13, 200 * mib}}, 16, false},
		{"at the ceiling", 100 * ms, 16,
			[]laneSample{{13, 200 * mib}, {16, 250 * mib}}, 16, true},
		{"no more lanes could be opened", 100 * ms, 16,
			[]laneSample{{4, 60 * mib}, {4, 61 * mib}}, 4, true},
		{"a slow consumer: far below the windows from the start", 50 * ms, 16,
			[]laneSample{{7, 20 * mib}}, 7, true},
		{"a slow consumer at 10 ms", 10 * ms, 16,
			[]laneSample{{2, 30 * mib}}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, settled := nextLanes(tc.rtt, tc.ceiling, tc.tried)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.settled, settled)
		})
	}
}

// pinLanes makes c's transfers use n lanes from the start, as if earlier ones had
// settled there.
func pinLanes(c *Client, n int) {
	c.laneMemory.down.Store(int32(n)<<1 | 1)
	c.laneMemory.up.Store(int32(n)<<1 | 1)
}

// laneCtl feeds the rule from a running transfer; here its clock is stepped by hand.
func TestLaneCtl(t *testing.T) {
	const rtt = 10 * time.Millisecond
	var mem atomic.Int32
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	// moveAt completes bytes at rate (MiB/s) over one sample with have lanes, after
	// the round trip in which the lanes of a round fill their windows.
	moveAt := func(lc *laneCtl, rate float64, have int) int {
		now = now.Add(rtt)
		require.Zero(t, lc.moved(0, have), "a sample ended before it began")
		now = now.Add(measureFor(rtt))
		return lc.moved(int(rate*measureFor(rtt).Seconds()*mib), have)
	}

	lc := &laneCtl{clock: clock}
	require.Equal(t, 2, lc.start(5*time.Millisecond, 16, &mem))
	lc.rtt = rtt // the samples below are for 10 ms
	now = now.Add(time.Second)
	require.Zero(t, lc.moved(64*mib, 1), "bytes counted while lanes were being opened")
	lc.roundDone(2)
	now = now.Add(rtt / 2)
	require.Zero(t, lc.moved(64*mib, 2), "bytes counted while the new lanes filled")
	now = now.Add(-rtt / 2)

	require.Equal(t, 4, moveAt(lc, 253, 2), "2 lanes near their windows")
	require.Equal(t, int32(4<<1), mem.Load(), "an unsettled count is remembered as such")
	lc.roundDone(4)
	require.Equal(t, 8, moveAt(lc, 330, 4), "4 lanes 30% faster than 2")
	lc.roundDone(8)
	require.Zero(t, moveAt(lc, 321, 8))
	require.Equal(t, 4, lc.target, "8 lanes were no faster than 4")
	require.Equal(t, int32(4<<1|1), mem.Load(), "the settled count")

	// The next transfer starts where this one settled, and measures no more.
	next := &laneCtl{clock: clock}
	require.Equal(t, 4, next.start(rtt, 16, &mem))
	next.roundDone(4)
	require.Zero(t, moveAt(next, 100, 4))
	require.False(t, next.on)
	require.Equal(t, int32(4<<1|1), mem.Load())

	// A doubling that did not pay goes back; fewer lanes than asked for is the ceiling.
	mem.Store(0)
	lc = &laneCtl{clock: clock}
	require.Equal(t, 4, lc.start(rtt, 8, &mem))
	lc.roundDone(4)
	require.Equal(t, 8, moveAt(lc, 420, 4))
	lc.roundDone(8)
	require.Zero(t, moveAt(lc, 410, 8))
	require.Equal(t, 4, lc.target, "lanes after a doubling that did not pay")
	require.Equal(t, int32(4<<1|1), mem.Load())

	mem.Store(0)
	lc = &laneCtl{clock: clock}
	require.Equal(t, 16, lc.start(40*time.Millisecond, 16, &mem))
	lc.roundDone(5) // the server allowed no more sessions
	require.Equal(t, 5, lc.ceiling)
	require.Equal(t, 5, lc.target)
}
