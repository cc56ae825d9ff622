package sftp

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/sshfx"
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

// stripeMin is how large a transfer must be before it stripes: enough that the few
// round trips of opening handles are paid back.
const stripeMin = 8 << 20

// channelWindow is the flow-control window of one SSH session channel: fixed at 2 MiB
// in x/crypto/ssh and OpenSSH alike (sshd advertises it once the subsystem runs).
const channelWindow = 2 << 20

// defaultStripeMinRTT is the round trip below which one channel's window is not what
// limits a transfer: 2 MiB per 2 ms is 1 GiB/s, more than SSH's ciphers move on one
// connection. There extra channels would only add server processes competing for the
// CPU. (Tests lower it to exercise striping on loopback.)
const defaultStripeMinRTT = 2 * time.Millisecond

// stripes reports whether the link is slow enough for striping to pay.
func (c *Client) stripes() bool {
	return c.opts.channels > 1 && c.openChannel != nil &&
		time.Duration(c.main.minRTT.Load()) >= c.opts.stripeMinRTT
}

// channelSet holds the SFTP channels of a Client: the main one, and the extra ones
// opened for striping, kept for reuse by later transfers.
type channelSet struct {
	grow sync.Mutex // serialises opening channels, so two transfers don't both open them

	mu      sync.Mutex
	conns   []*conn // conns[0] is the main channel
	closed  bool
	refused bool // the server refused a channel: don't ask again
}

func (s *channelSet) init(main *conn) { s.conns = []*conn{main} }

// closeAll closes every channel and waits for their readers.
func (s *channelSet) closeAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns, s.closed = nil, true
	s.mu.Unlock()
	for _, cn := range conns {
		cn.close()
	}
}

// live returns the channels that have not failed, dropping dead ones from the set.
func (s *channelSet) live() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.conns[:0:0]
	kept := s.conns[:0]
	for _, cn := range s.conns {
		if cn.failed() == nil {
			kept = append(kept, cn)
			out = append(out, cn)
		} else {
			go cn.close() // its reader may still be running: let it end
		}
	}
	clear(s.conns[len(kept):])
	s.conns = kept
	return out
}

// eachChannel calls use for up to n live channels, opening missing ones concurrently.
// use runs for each channel as soon as it is ready, from several goroutines at once, so
// a transfer can put a new channel to work without waiting for the slowest to open (sshd
// starts a subsystem process for each, one after another). When the server refuses a
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
	useAll(c.chans.live())
	if len(seen) < n && c.openChannel != nil && !c.chans.isRefused() {
		c.chans.grow.Lock()
		useAll(c.chans.live()) // what another transfer opened while we waited
		for i := len(c.chans.live()); i < n && !c.chans.isRefused(); i++ {
			g.Go(func() error {
				cn, err := c.openChannel(ctx)
				if err != nil {
					if ctx.Err() == nil {
						c.chans.refuse()
					}
					return nil
				}
				cn.ids = c.main.ids
				cn.maxPacket.Store(c.maxReply())
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

func (s *channelSet) isRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *channelSet) refuse() {
	s.mu.Lock()
	s.refused = true
	s.mu.Unlock()
}

// add keeps cn for reuse; false (and cn closed) when the Client closed meanwhile.
func (s *channelSet) add(cn *conn) bool {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conns = append(s.conns, cn)
	}
	s.mu.Unlock()
	if closed {
		cn.close()
	}
	return !closed
}

// lane is one channel a transfer uses, with the file's handle on that channel.
type lane struct {
	cn      *conn
	handle  string
	out     int  // requests in flight on this lane
	sibling bool // opened by the transfer, which closes it at the end
}

// lanes is the part of a transfer that knows its channels: it picks the lane for each
// request, takes in lanes as they are opened, and closes them at the end.
type lanes struct {
	f      *File
	ch     chan response // every reply of the transfer, from every lane
	all    []*lane
	pflags sshfx.OpenFlag // how siblings are opened: READ, or WRITE without CREAT/TRUNC

	joins  chan *lane // from the opener; nil until striping starts
	stop   context.CancelFunc
	opened chan struct{} // closed when the opener is done
}

func (f *File) newLanes(window int, pflags sshfx.OpenFlag) lanes {
	return lanes{
		f:      f,
		ch:     make(chan response, window+1),
		all:    []*lane{{cn: f.cn, handle: f.handle}},
		pflags: pflags,
	}
}

// canStripe reports whether this transfer may add lanes.
func (ls *lanes) canStripe() bool {
	c := ls.f.c
	return ls.joins == nil && !ls.f.append && c.stripes()
}

// stripe starts opening the file on the Client's other channels, in the background.
func (ls *lanes) stripe() {
	if !ls.canStripe() {
		return
	}
	c := ls.f.c
	ls.joins = make(chan *lane, c.opts.channels)
	ls.opened = make(chan struct{})
	ctx, cancel := context.WithCancel(ls.f.ctx)
	ls.stop = cancel
	go func() {
		defer close(ls.opened)
		c.eachChannel(ctx, c.opts.channels, func(cn *conn) {
			if cn == ls.f.cn {
				return
			}
			h, err := c.openHandle(ctx, cn, "open", func(id uint32) []byte {
				return appendOpen(nil, id, ls.f.name, ls.pflags, &sshfx.Attrs{})
			})
			if err == nil { // a lane that can't be had is not the transfer's failure
				ls.joins <- &lane{cn: cn, handle: h, sibling: true}
			}
		})
	}()
}

// join adds a lane the opener finished.
func (ls *lanes) join(l *lane) { ls.all = append(ls.all, l) }

// pick returns the lane with the fewest requests in flight: a lane held back by its
// window collects requests, so new ones go to the others.
func (ls *lanes) pick() *lane {
	best := ls.all[0]
	for _, l := range ls.all[1:] {
		if l.out < best.out {
			best = l
		}
	}
	return best
}

// forget abandons the given requests (grouped by lane) and drains their replies.
func (ls *lanes) forget(ids map[*lane][]uint32) {
	inTransit := 0
	for l, list := range ids {
		inTransit += l.cn.forget(list)
		l.out = 0
	}
	for ; inTransit > 0; inTransit-- {
		r := <-ls.ch
		r.release()
	}
	for {
		select {
		case r := <-ls.ch:
			r.release()
		default:
			return
		}
	}
}

// finish stops the opener and closes every sibling handle, waiting for the replies:
// a transfer leaves no handle open. It returns the first CLOSE failure, which matters
// for uploads (a server may report a failed write only at close).
func (ls *lanes) finish() error {
	if ls.stop != nil {
		ls.stop()
		<-ls.opened
		for {
			select {
			case l := <-ls.joins:
				ls.join(l)
				continue
			default:
			}
			break
		}
	}
	var first error
	waiting := make(map[uint32]*conn, len(ls.all))
	for _, l := range ls.all {
		if !l.sibling || l.cn.failed() != nil {
			continue
		}
		id := l.cn.newID()
		if err := l.cn.send(context.Background(), id, appendString1(nil, sshfx.TypeClose, id, l.handle), ls.ch); err != nil {
			first = cmpErr(first, err)
			continue
		}
		waiting[id] = l.cn
	}
	// Match replies by id: a reply a dying channel had already handed over may still
	// turn up here, and must not be taken for a CLOSE's.
	for len(waiting) > 0 {
		r := <-ls.ch
		if cn := waiting[r.id]; cn != nil {
			delete(waiting, r.id)
			if r.err != nil {
				first = cmpErr(first, r.err)
			} else {
				first = cmpErr(first, cn.check(expectStatus("CLOSE", &r)))
			}
		}
		r.release()
	}
	ls.all = ls.all[:1]
	return first
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}
