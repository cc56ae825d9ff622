package sftp

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Striping. x/crypto/ssh (like OpenSSH) gives each channel a fixed 2 MiB window, so one
// channel moves at most 2 MiB per round trip however many requests are in flight. Flow
// control is per channel, so a large transfer opens its file on several SFTP channels of
// the same SSH connection and spreads its requests over them.
//
// A transfer starts on the channel its File was opened on. Once it is known to be
// large, a goroutine opens the file on the other channels (opening those channels first
// if need be) and hands each ready handle to the transfer, which adds it as a lane.
// So striping never delays the start of a transfer, and a channel the server refuses
// (sshd MaxSessions) just means fewer lanes.

// defaultStripeMinRTT is the round trip below which one channel's window is not what
// limits a transfer: 2 MiB per 2 ms is 1 GiB/s, more than SSH's ciphers move on one
// connection. There extra channels would only add server processes competing for the
// CPU. (Tests lower it to exercise striping on loopback.)
const defaultStripeMinRTT = 2 * time.Millisecond

// stripes reports whether the link is slow enough for striping to pay.
func (c *Client) stripes() bool {
	return c.opts.channels > 1 && c.source != nil &&
		time.Duration(c.main.minRTT.Load()) >= c.opts.stripeMinRTT
}

// channelPool holds the SFTP channels of a Client: the main one, and the extra ones
// opened for striping, kept for reuse by later transfers.
type channelPool struct {
	grow sync.Mutex // serialises opening channels, so two transfers don't both open them

	mu      sync.Mutex
	conns   []*conn // conns[0] is the main channel
	closed  bool
	refused bool // the server refused a channel: don't ask again
	// lingering are the channels given up on a stalled Write (connwrite.go) whose
	// reader or writer may still run: see closedToNew.
	lingering []*conn
	idle      idleSweeper // closes idle data channels (channelidle.go)
}

// maxLingering is how many channels given up on a stalled Write may still hold their
// goroutines before the Client opens no more. Such a channel's reader and writer (and
// x/crypto's two goroutines of its session) stay blocked until the server closes the
// channel or the SSH connection closes: nothing on the client's side can end them
// (connwrite.go). A server that stalls every channel it is given could otherwise make
// a long-lived Client pile them up, some 4 goroutines and 0.65 MiB each. Past the
// bound the Client goes on with the channels it has (the main one at least), and
// opens more once one of those given up has ended.
const maxLingering = 4

func (s *channelPool) init(main *conn) { s.conns = []*conn{main} }

// closeAll closes every channel and waits for their readers. A reader ends when the
// server has closed its side, a round trip and a server process's exit away: the
// channels close in parallel, so that Client.Close costs that once, not per channel.
func (s *channelPool) closeAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns, s.closed = nil, true
	s.mu.Unlock()
	s.stopSweeps()
	shutdownAll(conns, errClientClosed)
}

// live returns the channels that have not failed, dropping dead ones from the set.
func (s *channelPool) live() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.conns[:0:0]
	kept := s.conns[:0]
	for _, cn := range s.conns {
		if cn.failed() == nil {
			kept = append(kept, cn)
			out = append(out, cn)
		} else {
			if cn.givenUp() {
				s.lingering = append(s.lingering, cn)
			}
			go cn.close() // its reader may still be running: let it end
		}
	}
	clear(s.conns[len(kept):])
	s.conns = kept
	return out
}

// eachChannel calls use for up to n live channels other than the main one, opening missing ones concurrently.
// use runs for each channel as soon as it is ready, from several goroutines at once, so
// a transfer can put a new channel to work without waiting for the slowest to open (sshd
// starts each channel's sftp-server through the user's login shell, whose start-up can
// cost a server 100 ms of CPU or more per channel). When the server refuses a
// channel, the Client stops asking: fewer channels is not an error.
func (c *Client) eachChannel(ctx context.Context, n int, use func(*conn)) {
	var g errgroup.Group
	seen := make(map[*conn]bool, n)
	useAll := func(conns []*conn) {
		for _, cn := range conns {
			if len(seen) < n && !seen[cn] {
				seen[cn] = true
				g.Go(func() error { use(cn); return nil })
			}
		}
	}
	useAll(c.dataChannels()) // never the main channel: see filechannel.go
	if len(seen) < n && c.source != nil && !c.chans.closedToNew() {
		c.chans.grow.Lock()
		useAll(c.dataChannels()) // what another transfer opened while we waited
		for i := len(c.dataChannels()); i < n && !c.chans.closedToNew(); i++ {
			g.Go(func() error {
				cn, err := c.source.open(ctx)
				if err != nil {
					if ctx.Err() == nil {
						c.chans.refuse()
					}
					return nil
				}
				cn.ids = c.main.ids
				cn.stallGraceSet.Store(int64(c.opts.stallGrace))
				cn.maxPacket.Store(c.maxReply())
				c.obs.track(cn, true)
				if c.chans.add(cn) {
					use(cn)
				}
				return nil
			})
		}
		defer c.chans.grow.Unlock()
	}
	g.Wait()
}

func (s *channelPool) isRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// closedToNew reports whether the Client opens no more channels: the server refused
// one, or maxLingering channels given up still hold their goroutines.
func (s *channelPool) closedToNew() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lingering = slices.DeleteFunc(s.lingering, func(cn *conn) bool { return !cn.lingers() })
	return s.refused || len(s.lingering) >= maxLingering
}

func (s *channelPool) refuse() {
	s.mu.Lock()
	s.refused = true
	s.mu.Unlock()
}

// add keeps cn for reuse; false (and cn closed) when the Client closed meanwhile.
func (s *channelPool) add(cn *conn) bool {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conns = append(s.conns, cn)
		s.armSweepLocked()
	}
	s.mu.Unlock()
	if closed {
		cn.close()
	}
	return !closed
}
