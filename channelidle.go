package sftp

import (
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Idle data channels. A burst of striped transfers leaves the Client holding the data
// channels it opened: each costs a server process (sshd starts an sftp-server per
// channel) and, here, a reader and a writer goroutine and x/crypto's own. A channel
// stays in the pool for the next transfers, but one that has carried nothing for a
// while is closed, beyond the few (keptIdleChannels) a service's next burst starts on.
//
// A sweep runs every idleChannelAfter while the pool holds more data channels than it
// keeps. It closes a channel that was quiet at the sweep before and is still: nothing
// in flight, no handle open on it (a File or a transfer's sibling; counted from the
// HANDLE replies it read and the CLOSEs it sent), and no request sent in between. So
// a channel is closed after lying idle between idleChannelAfter and twice that. The
// sweep takes the channel out of the pool and marks it retired under its lock, in one
// step with the check, so a request that races it (an Open that picked the channel
// just before) is refused before it is sent, with errChannelRetired; OpenFile then
// asks for another channel (openOnFileChannel).

// keptIdleChannels is how many idle data channels the pool keeps open.
const keptIdleChannels = 2

// idleChannelAfter is how often idle data channels are swept: one is closed once it
// has carried nothing for between this and twice this.
const idleChannelAfter = 30 * time.Second

// errChannelRetired is the cause of a request refused by a data channel that was
// closed for lying idle; the caller goes to another channel.
var errChannelRetired = errors.New("sftp: the data channel was closed for lying idle")

// idleState is what a conn knows of its own use, guarded by its mu.
type idleState struct {
	handles  int    // HANDLE replies read, less the CLOSEs sent: handles open on the channel
	requests uint64 // requests sent, ever
	retired  bool   // the sweep is closing the channel: no request goes out
}

func (s *idleState) replied(t sshfx.PacketType) {
	if t == sshfx.TypeHandle {
		s.handles++
	}
}

// sent counts pkt, a request going out.
func (s *idleState) sent(pkt []byte) {
	s.requests++
	if sshfx.PacketType(pkt[4]) == sshfx.TypeClose {
		s.handles--
	}
}

// retireIfQuiet retires c if it is quiet (nothing in flight, no handle open) and has
// sent no request since it had sent requests. It returns the count to compare with
// at the next sweep.
func (c *conn) retireIfQuiet(requests uint64, seen bool) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return c.idle.requests, false
	}
	quiet := len(c.pending) == 0 && c.idle.handles <= 0
	if seen && quiet && c.idle.requests == requests {
		c.idle.retired = true
	}
	return c.idle.requests, c.idle.retired
}

// idleSweeper is the part of the channel pool that closes idle data channels.
type idleSweeper struct {
	running sync.Mutex       // held through a sweep: sweeps take turns
	seen    map[*conn]uint64 // requests each channel had sent at the last sweep; guarded by running
	// timer is armed while the pool holds more data channels than it keeps, and fired
	// is closed once its function has returned; both guarded by channelPool.mu.
	timer *time.Timer
	fired chan struct{}
}

// armSweep starts the sweeps if the pool holds more data channels than it keeps and
// they are not running. s.mu must be held.
func (s *channelPool) armSweepLocked() {
	if s.closed || s.idle.timer != nil || len(s.conns)-1 <= keptIdleChannels {
		return
	}
	fired := make(chan struct{})
	s.idle.fired = fired
	s.idle.timer = time.AfterFunc(idleChannelAfter, func() {
		defer close(fired)
		s.sweep()
		s.mu.Lock()
		s.idle.timer = nil
		s.armSweepLocked()
		s.mu.Unlock()
	})
}

// sweep closes the data channels, beyond keptIdleChannels, that have been idle since
// the sweep before (see above), and returns how many it closed.
func (s *channelPool) sweep() int {
	s.idle.running.Lock()
	defer s.idle.running.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0
	}
	seen := make(map[*conn]uint64, len(s.conns))
	var retired []*conn
	kept := s.conns[:1] // the main channel
	for i, cn := range s.conns[1:] {
		before, known := s.idle.seen[cn]
		dataLeft := len(kept) - 1 + len(s.conns) - 1 - i // kept so far, and this one and those after
		if dataLeft > keptIdleChannels {
			n, gone := cn.retireIfQuiet(before, known)
			if gone {
				retired = append(retired, cn)
				continue
			}
			seen[cn] = n
		}
		kept = append(kept, cn)
	}
	clear(s.conns[len(kept):])
	s.conns = kept
	s.idle.seen = seen
	s.mu.Unlock()
	shutdownAll(retired, errChannelRetired)
	return len(retired)
}

// shutdownAll shuts the conns down in parallel, each waiting for its server to close
// its side (a round trip and a process exit), so that the waits overlap.
func shutdownAll(conns []*conn, cause error) {
	var wg sync.WaitGroup
	for _, cn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn.shutdown(cause)
		}()
	}
	wg.Wait()
}

// stopSweeps stops the sweeps, waiting for one under way; s.closed is set already, so
// none is armed again.
func (s *channelPool) stopSweeps() {
	s.mu.Lock()
	timer, fired := s.idle.timer, s.idle.fired
	s.mu.Unlock()
	if timer != nil && !timer.Stop() {
		<-fired
	}
}
