package sftp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWindowOptionsAgree: WithMaxInflight's n is a transfer's window on every link,
// striped or not, as its godoc says; without it the window is defaultFlight on one
// channel and 12 per channel of WithChannels' ceiling when striping, within
// windowBudget.
func TestWindowOptionsAgree(t *testing.T) {
	const size = 261120
	client := func(rtt time.Duration, opts ...Option) *Client {
		c, err := newClient(append([]Option{WithChannels(16)}, opts...))
		require.NoError(t, err)
		c.main = makeConn(nil, nil, nil, false, nil)
		c.main.minRTT.Store(int64(rtt))
		c.source = channelSourceFunc(nil)
		c.limits = Limits{MaxRead: size, MaxWrite: size}
		return c
	}
	short, long := time.Millisecond, 50*time.Millisecond
	require.False(t, client(short).stripes())
	require.True(t, client(long).stripes())

	require.Equal(t, defaultFlight, client(short).window())
	require.Equal(t, min(16*12, windowBudget/(size+packetSlack)), client(long).window())
	for _, n := range []int{1, 8, 64, 1000} {
		require.Equal(t, n, client(short, WithMaxInflight(n)).window(), "WithMaxInflight(%d), one channel", n)
		require.Equal(t, n, client(long, WithMaxInflight(n)).window(), "WithMaxInflight(%d), striped", n)
	}
}
