package sftp

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// The channel pool (channelpool.go): channels a transfer opened serve the next one,
// the server's MaxSessions is noted, and channels given up are capped.

// Channels given up on a stalled Write (issue 26, item 6): their goroutines stay
// blocked until the server closes them, so a Client keeps at most maxLingering of them
// and opens no more channels past that, until one has ended.

// stallingChannel is a data channel whose writer holds every long packet, like an SSH
// channel whose server stopped reading, and whose closing ends neither its writer nor
// its reader: only end does, as the server's CLOSE or the SSH connection's end would.
type stallingChannel struct {
	cn   *conn
	gate *gateWriter
	r    io.Closer
}

func (s *stallingChannel) end() {
	s.gate.release()
	s.r.Close()
}

// stallingSource opens stallingChannels on srv for c, handing each to opened.
func stallingSource(t *testing.T, c *Client, srv *testserver.Server, opened chan<- *stallingChannel) channelSourceFunc {
	return func(ctx context.Context) (*conn, error) {
		r, w := srv.Conn()
		gate := newGateWriter(w, copyMax)
		gate.hold()
		cn, err := newConn(ctx, r, gate, func() error { return nil }, true, &c.dataPool)
		if err != nil {
			return nil, err
		}
		sc := &stallingChannel{cn: cn, gate: gate, r: r}
		t.Cleanup(func() { sc.end(); w.Close() })
		opened <- sc // room: the test makes fewer rounds than it has
		return cn, nil
	}
}

// giveUpAChannel asks c for a data channel, stalls a request on it and gives it up
// (the grace passed); nil when c opened none.
func giveUpAChannel(t *testing.T, c *Client, opened <-chan *stallingChannel) *stallingChannel {
	t.Helper()
	var cn *conn
	c.eachChannel(testCtx(t), 1, func(got *conn) { cn = got })
	if cn == nil {
		return nil
	}
	sc := tsRecv(t, opened, "the channel opened")
	require.Same(t, cn, sc.cn)
	ctx, cancel := context.WithCancel(testCtx(t))
	long := "/" + strings.Repeat("x", 2*copyMax) // written whole, from its buffer: held
	cl := cn.start(ctx, appendString1(nil, sshfx.TypeStat, cn.newID(), long), nil)
	tsRecv(t, sc.gate.entered, "the request held in the Write")
	cancel()
	_, err := cl.wait(ctx)
	require.ErrorIs(t, err, context.Canceled)
	cn.checkStall(time.Now().Add(2 * time.Hour))
	require.True(t, isStalled(cn.failed()), "given up: %v", cn.failed())
	c.chans.live() // drops it
	return sc
}

// TestGivenUpChannelsCapped gives up channel after channel on one Client: the Client
// opens maxLingering of them and no more while they linger, its goroutines stop
// growing, the main channel works on, and once one of them ends a new one opens.
func TestGivenUpChannelsCapped(t *testing.T) {
	const rounds = 3 * maxLingering
	c, srv := newTestServerClient(t, testserver.Options{}, withStallGrace(time.Hour))
	opened := make(chan *stallingChannel, rounds+2)
	c.source = stallingSource(t, c, srv, opened)
	_, base := heapAndGoroutines()
	var given []*stallingChannel
	goroutines := make([]int, rounds)
	for i := range rounds {
		if sc := giveUpAChannel(t, c, opened); sc != nil {
			given = append(given, sc)
		}
		_, goroutines[i] = heapAndGoroutines()
	}
	t.Logf("goroutines: %d at the start, then after each round %v", base, goroutines)
	require.Len(t, given, maxLingering, "channels opened and given up")
	require.Equal(t, goroutines[maxLingering-1], goroutines[rounds-1], "goroutines after round %d and after round %d", maxLingering, rounds)
	requireWorks(t, c)

	// One of them ends (its server closed it): the Client opens a channel again.
	given[0].end()
	tsRecv(t, given[0].cn.readerDone, "the reader's end")
	tsRecv(t, given[0].cn.ws.writerDone, "the writer's end")
	require.NotNil(t, giveUpAChannel(t, c, opened), "a channel opened once one given up had ended")
}

func TestStripeReusesChannels(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 4)
	c, _ := e.client(t, "", WithChannels(4))

	down := e.file(t, "down", data)
	downloadWhole(t, c, down, data, func() error { return e.awaitLanes(c, down, 4) })
	require.Len(t, c.chans.live(), 5)
	require.Equal(t, 5, e.sessions(t))

	up := e.file(t, "up", nil)
	uploadWhole(t, c, up, data, func() error { return e.awaitLanes(c, up, 4) })
	e.requireStriped(t, up, 4, stripeSize, true)
	require.Len(t, c.chans.live(), 5)
	require.Equal(t, 5, e.sessions(t), "the second transfer opened channels")
}

func TestStripeMaxSessions(t *testing.T) {
	e := newStripeEnv(t, 2)
	data := randBytes(stripeSize, 5)
	c, _ := e.client(t, "", WithChannels(8))

	down := e.file(t, "down", data)
	downloadWhole(t, c, down, data, nil)
	require.LessOrEqual(t, len(c.chans.live()), 2)

	up := e.file(t, "up", nil)
	uploadWhole(t, c, up, data, nil)
	require.LessOrEqual(t, len(c.chans.live()), 2)
	require.LessOrEqual(t, e.sessions(t), 2)
	require.True(t, c.chans.isRefused(), "the refused channels were not noted")
}
