package sftp

import (
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// TestIdleChannelsSwept stripes a download over 5 data channels, then runs the sweeps
// by hand (the timer only calls sweep): a channel is closed once it was quiet at two
// sweeps in a row with nothing sent between, the pool keeps keptIdleChannels, and a
// channel with a File open on it stays whatever its idleness.
func TestIdleChannelsSwept(t *testing.T) {
	c, down, data := stripedOver(t, 5)
	size := len(data)

	// A File left open on a data channel pins it.
	f, err := c.Open(testCtx(t), down)
	require.NoError(t, err)
	pinned := f.cn
	require.NotEqual(t, c.main, pinned)

	before := c.dataChannels()
	require.Zero(t, c.chans.sweep(), "a first sweep only notes what each channel has sent")
	require.Equal(t, 3, c.chans.sweep(), "idle since the sweep before: closed, down to the kept few")
	data2 := c.dataChannels()
	require.Len(t, data2, keptIdleChannels)
	require.Contains(t, data2, pinned, "the channel with a File open on it")
	for _, cn := range before {
		if !slices.Contains(data2, cn) {
			require.ErrorIs(t, cn.failed(), errChannelRetired)
			select {
			case <-cn.readerDone: // sweep waited for its reader
			default:
				t.Fatal("a retired channel's reader still runs after the sweep")
			}
		}
	}
	require.Zero(t, c.chans.sweep(), "the pool keeps its few")
	st := c.Stats()
	require.Zero(t, st.DataChannelsGivenUp, "closed for lying idle, not given up")
	require.Equal(t, int64(keptIdleChannels), st.DataChannelsOpen)

	// The channels closed are gone for good, the ones kept still work.
	got := make([]byte, size)
	n, err := f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, size, n)
	requireSameBytes(t, data, got)
	closeFile(t, f)
	downloadWhole(t, c, down, data, nil)
}

// stripedOver returns a Client whose download of the file down (its content data)
// striped over n data channels, each left idle.
func stripedOver(t *testing.T, n int) (c *Client, down string, data []byte) {
	t.Helper()
	e := newStripeEnv(t, 0)
	data = randBytes(4<<20, uint64(n))
	c, _ = e.client(t, "", WithChannels(n), withStripeFrom(1<<20))
	down = e.file(t, "down", data)
	downloadWhole(t, c, down, data, func() error { return e.awaitLanes(c, down, n) })
	require.Len(t, c.dataChannels(), n)
	return c, down, data
}

// TestIdleChannelActivityKeepsIt checks that a request between two sweeps keeps a
// channel: it is closed only at the sweep after a whole quiet period.
func TestIdleChannelActivityKeepsIt(t *testing.T) {
	c, down, _ := stripedOver(t, 3)

	require.Zero(t, c.chans.sweep())
	// A File opened and closed on each data channel in turn: each has sent requests
	// since the sweep.
	for range 6 {
		f, err := c.Open(testCtx(t), down)
		require.NoError(t, err)
		closeFile(t, f)
	}
	require.Zero(t, c.chans.sweep(), "every channel was used since the last sweep")
	require.Equal(t, 1, c.chans.sweep(), "quiet for a whole period now")
	require.Len(t, c.dataChannels(), keptIdleChannels)
}

// TestRetiredChannelRefusesRequests checks the race the sweep leaves open: a request
// on a channel retired after the caller picked it is refused before it is sent, with
// an error that says so (and matches net.ErrClosed), which OpenFile answers by
// going to another channel.
func TestRetiredChannelRefusesRequests(t *testing.T) {
	c := newServerClient(t, t.TempDir())
	cn := c.main
	n, retired := cn.retireIfQuiet(0, false)
	require.False(t, retired, "not known quiet yet")
	_, retired = cn.retireIfQuiet(n, true)
	require.True(t, retired)
	id := cn.newID()
	_, err := cn.enqueue(testCtx(t), appendString1(nil, sshfx.TypeStat, id, "/"), nil, waiter{ch: make(chan response, 1)})
	require.ErrorIs(t, err, errChannelRetired)
	require.True(t, errors.Is(err, net.ErrClosed))
	cn.mu.Lock()
	_, queued := cn.pending[id]
	cn.mu.Unlock()
	require.False(t, queued, "nothing was queued")
}

// TestIdleChannelHandleCount checks the count of handles open on a channel: up with
// each HANDLE read, down with each CLOSE sent.
func TestIdleChannelHandleCount(t *testing.T) {
	dir := t.TempDir()
	c := newServerClient(t, dir)
	writeLocal(t, dir+"/a", []byte("a"), 0o644)
	handles := func() int {
		c.main.mu.Lock()
		defer c.main.mu.Unlock()
		return c.main.idle.handles
	}
	before := handles()
	f, err := c.Open(testCtx(t), dir+"/a")
	require.NoError(t, err)
	d, err := c.OpenDir(testCtx(t), dir)
	require.NoError(t, err)
	require.Equal(t, before+2, handles())
	closeFile(t, f)
	require.NoError(t, d.Close())
	require.Equal(t, before, handles())
}
