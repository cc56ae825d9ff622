//go:build linux

package sftp

import (
	"bytes"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/realserver"
)

// dropbear as the SSH server, running OpenSSH's sftp-server: NewClient's own SSH path
// meets dropbear's 24 KiB receive window and 32759-byte packets. The cross-server
// suite runs over it on loopback, where the client does not stripe; here a delay proxy
// makes the round trip long enough (>= 2 ms) that it does.

// dropbearStripeSize is large enough to stripe (stripeMin) and a multiple of no
// request size, yet small enough to cross 24 KiB windows in a few seconds.
const dropbearStripeSize = stripeMin + 4<<20 + 12345

// channelTaps taps every SFTP channel of a Client separately.
type channelTaps struct {
	mu   sync.Mutex
	taps []*xsTap
}

func (ct *channelTaps) wrap(r io.Reader, w io.WriteCloser) (io.Reader, io.WriteCloser) {
	tp := &xsTap{}
	ct.mu.Lock()
	ct.taps = append(ct.taps, tp)
	ct.mu.Unlock()
	return tp.wrap(io.NopCloser(r), w)
}

// busy counts the channels whose tap saw WRITE (upload) or DATA (download) payload
// since the last reset, and adds it all up.
func (ct *channelTaps) busy(upload bool) (channels int, total int) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, tp := range ct.taps {
		writes, datas := tp.seen()
		sizes := datas
		if upload {
			sizes = writes
		}
		sum := 0
		for _, n := range sizes {
			sum += n
		}
		if sum > 0 {
			channels++
		}
		total += sum
	}
	return channels, total
}

func (ct *channelTaps) reset() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, tp := range ct.taps {
		tp.reset()
	}
}

func TestDropbearStriped(t *testing.T) {
	dir := shmDir(t)
	srv := realserver.StartDropbear(t, dir)
	// 2 ms each way: a round trip of at least 4 ms, over the 2 ms from which the
	// client stripes by default.
	p, err := delayproxy.New(srv.Addr, 2*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	sc, err := srv.DialVia(p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	taps := &channelTaps{}
	c, err := NewClient(testCtx(t), sc, WithChannels(4), withStreamWrap(taps.wrap))
	require.NoError(t, err)
	// Four lanes, as a count that has settled: this is about how they share the work.
	// (The lane rule reads the window bound from OpenSSH's 2 MiB channel window, so
	// against dropbear's 24 KiB it would not grow past the lanes it starts with.)
	pinLanes(c, 4)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	ctx := testCtx(t)

	data := randBytes(dropbearStripeSize, 21)
	writeLocal(t, filepath.Join(dir, "down"), data, 0o644)
	var got bytes.Buffer
	f, err := c.Open(ctx, "down")
	require.NoError(t, err)
	taps.reset()
	var n int64
	within(t, func() { n, err = f.WriteTo(&got) })
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, int64(len(data)), n)
	requireSameBytes(t, data, got.Bytes())
	// The main channel and four data channels: the file went on the main channel, as
	// the first data channel was not open yet, and striped onto four others.
	require.Len(t, c.chans.live(), 5, "channels open")
	busy, total := taps.busy(false)
	require.GreaterOrEqual(t, busy, 2, "channels that carried DATA")
	require.Equal(t, len(data), total, "DATA bytes over all channels")

	up, err := c.Create(ctx, "up")
	require.NoError(t, err)
	taps.reset()
	within(t, func() { n, err = up.ReadFrom(bytes.NewReader(data)) })
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.NoError(t, up.Close())
	requireSameBytes(t, data, readLocal(t, filepath.Join(dir, "up")))
	busy, total = taps.busy(true)
	require.GreaterOrEqual(t, busy, 2, "channels that carried WRITEs")
	requireNonces(t, int64(total-len(data)), -1) // one per stripe round (reopen.go)
	require.Len(t, c.chans.live(), 5, "the same channels, reused")
}
