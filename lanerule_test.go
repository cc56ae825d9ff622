package sftp

import (
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
		{10 * time.Millisecond, 16, 2},
		{50 * time.Millisecond, 16, 7},
		{100 * time.Millisecond, 16, 13},
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
		{"nothing measured yet: what the round trip suggests", 50 * ms, 16, nil, 7, false},
		// The figures of a 1 GiB download on the 2-core machine at 10 ms: 2 lanes 253
		// MiB/s, 4 lanes 330, 8 lanes 321.
		{"10ms: 2 lanes at 63% of their windows: double", 10 * ms, 16,
			[]laneSample{{2, 253 * mib}}, 4, false},
		{"10ms: 4 lanes 30% faster but at 41% of their windows: the CPU limits", 10 * ms, 16,
			[]laneSample{{2, 253 * mib}, {4, 330 * mib}}, 4, true},
		{"10ms: 8 lanes no faster than 4: back to 4", 10 * ms, 16,
			[]laneSample{{4, 420 * mib}, {8, 410 * mib}}, 4, true},
		{"a doubling that adds under 10% goes back too", 10 * ms, 16,
			[]laneSample{{4, 420 * mib}, {8, 450 * mib}}, 4, true},
		{"50ms: 7 lanes near their windows: double", 50 * ms, 16,
			[]laneSample{{7, 180 * mib}}, 14, false},
		{"50ms: 14 lanes paid, now far from the windows", 50 * ms, 16,
			[]laneSample{{7, 180 * mib}, {14, 240 * mib}}, 14, true},
		{"the ceiling caps a doubling", 100 * ms, 16,
			[]laneSample{{13, 200 * mib}}, 16, false},
		{"at the ceiling", 100 * ms, 16,
			[]laneSample{{13, 200 * mib}, {16, 250 * mib}}, 16, true},
		{"no more lanes could be opened", 100 * ms, 16,
			[]laneSample{{4, 60 * mib}, {4, 61 * mib}}, 4, true},
		{"a slow consumer: far below the windows from the start", 50 * ms, 16,
			[]laneSample{{7, 20 * mib}}, 7, true},
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
