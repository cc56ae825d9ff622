package sftp

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Which channel a File goes on: the main channel rule (the README's "main channel
// for small calls"). An SFTP channel answers in order (one sftp-server process per
// channel) and carries at most one 2 MiB window of replies per round trip, so a Stat
// sent behind a window of bulk DATA waits for that DATA to cross the link: several
// round trips on a long link. So on a link where striping pays (Client.stripes), the
// main channel is kept for metadata: files are opened on data channels, and striped
// transfers add lanes on data channels only (dataChannels). Stat, Rename, ReadDir and
// the rest then wait behind nothing but other small calls.
//
// The first data channel is opened in the background, when the first file is opened
// on a long link: until it is ready files go on the main channel as before, so no Open
// waits for a channel to be set up. More data channels come from striping, or, when
// every data channel is busy with files of its own (busyChannel), from another
// background open, up to WithChannels(n). A file goes on the data channel with the
// fewest requests in flight, taking turns among equals so idle files spread too.
//
// On a short link nothing changes: the main channel carries everything, as one
// channel's window is not what limits it there.

// busyChannel is how many requests a data channel must have in flight before a new
// file's open asks for another data channel: about a window's worth of full-size
// READs (8 x 255 KiB fills 2 MiB), or dozens of small files.
const busyChannel = 8

// dataChannelOpener opens data channels in the background for Client.fileChannel.
type dataChannelOpener struct {
	turn atomic.Uint32 // rotates the choice among equally loaded channels

	mu      sync.Mutex
	ctx     context.Context // ends with the Client; nil until the first open
	cancel  context.CancelFunc
	opening chan struct{} // closed when the open under way ends; nil when none is
	closed  bool
	wg      sync.WaitGroup // the opener goroutine, for Client.Close
}

// fileChannel returns the channel to open a file on: the least loaded data channel
// on a long link, else the main channel. It never waits for a channel to open.
func (c *Client) fileChannel() *conn {
	if !c.stripes() {
		return c.main
	}
	data := c.dataChannels()
	best := c.dataOpener.leastLoaded(slices.DeleteFunc(slices.Clone(data), notAnswered))
	if len(data) < c.opts.channels && (best == nil || inFlight(best) >= busyChannel) {
		c.dataOpener.open(c, len(data)+1)
	}
	if best == nil {
		return c.main
	}
	return best
}

// notAnswered reports whether cn has yet to answer a request. A channel is put in the
// pool as soon as its INIT is sent, without waiting for the server to start (see
// startSession): a file opened there would wait behind the server's start, which
// sshd pays a login shell for, 100 ms of CPU or more on a busy server, and the least
// loaded channel is just the one starting. So a file goes only to a channel that has
// answered a round trip (it has a minRTT): the data channel opener asks a new one for one as
// soon as it is open, and a transfer's lane answers its OPEN.
func notAnswered(cn *conn) bool { return cn.minRTT.Load() == 0 }

// dataChannels returns the live channels a transfer may add as lanes: every channel
// but the main one, which is kept for small calls (a File still open on the main
// channel keeps it as its own lane).
func (c *Client) dataChannels() []*conn {
	return slices.DeleteFunc(c.chans.live(), func(cn *conn) bool { return cn == c.main })
}

// leastLoaded returns the channel of conns with the fewest requests in flight, taking
// turns among equals; nil when conns is empty.
func (l *dataChannelOpener) leastLoaded(conns []*conn) *conn {
	if len(conns) == 0 {
		return nil
	}
	loads := make([]int, len(conns))
	low := int(^uint(0) >> 1)
	for i, cn := range conns {
		loads[i] = inFlight(cn)
		low = min(low, loads[i])
	}
	var ties []*conn
	for i, cn := range conns {
		if loads[i] == low {
			ties = append(ties, cn)
		}
	}
	return ties[int(l.turn.Add(1)-1)%len(ties)]
}

// inFlight counts the requests cn has sent and not yet had answered.
func inFlight(cn *conn) int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.pending)
}

// open makes sure c has n data channels, in the background: one open at a time, none
// once the server has refused a channel or the Client is closed.
func (l *dataChannelOpener) open(c *Client, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opening != nil || l.closed || c.chans.closedToNew() {
		return
	}
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancel(context.Background())
	}
	done := make(chan struct{})
	l.opening = done
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		c.eachChannel(l.ctx, n, func(cn *conn) {
			if notAnswered(cn) {
				// A round trip, so that files go to cn once it answers (notAnswered).
				cn.do(l.ctx, func(dst []byte, id uint32) []byte {
					return appendString1(dst, sshfx.TypeRealpath, id, ".")
				}, func(response) error { return nil })
			}
		})
		l.mu.Lock()
		l.opening = nil
		l.mu.Unlock()
		close(done)
	}()
}

// stop ends an open under way, without waiting for it (see wait); no open starts
// after it.
func (l *dataChannelOpener) stop() {
	l.mu.Lock()
	l.closed = true
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
}

// wait waits for the open stop ended. Giving up a channel half set up costs a round
// trip (the server has to close its side), so Client.Close waits for it only after
// closing the other channels, which costs the same, rather than before.
func (l *dataChannelOpener) wait() { l.wg.Wait() }
