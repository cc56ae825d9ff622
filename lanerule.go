package sftp

import (
	"math"
	"sync/atomic"
	"time"
)

// How many lanes a transfer uses. One lane moves at most channelWindow per round
// trip, so a long link needs several; but each lane is another sftp-server process
// and more work for the client, so on a short link, or once the CPU rather than the
// window is the limit, more lanes only cost. The rule therefore sizes the lanes from
// what it measures:
//
//   - it starts with the lanes the round trip suggests: enough to carry
//     laneStartRate if each lane moved a full window per round trip;
//   - while the rate measured with n lanes is not far below the window bound
//     n x channelWindow / RTT (far below it, the windows are surely not the limit)
//     and the last growth paid, it doubles n, up to the ceiling WithChannels sets;
//   - a growth that added less than laneGainMin goes back to the lanes before it:
//     they were about as fast, with fewer processes and less memory.
//
// The decision (nextLanes) is a pure function of the samples, so its tests need no
// timing; laneCtl takes the samples from a running transfer.

const (
	// laneStartRate is the rate the first lane count is sized for: more than this
	// client moves on two cores when the link is not the limit (480 MiB/s at RTT 0).
	// Setting up a round of lanes costs at least 3 round trips (session, then INIT
	// and OPEN, pipelined), more where the server's login shell is slow to start, so
	// a lane too few costs a round of setup at the lower rate, while a lane too many
	// costs an idle process: it is better to ask for enough at once than to find them
	// by doubling.
	laneStartRate = 800 << 20
	// windowBound is the share of n x channelWindow / RTT below which the windows
	// are surely not what limits (a slow reader or writer at the caller's end, a slow
	// disk), so more lanes cannot help. Above it, whether they help is found by
	// trying: a lane alone reaches about 3/4 of its bound (the window refills a round
	// trip plus the server's turnaround after it empties), but on a machine whose
	// CPUs are shared the turnaround grows, and 2 lanes measured 0.19 of their bound
	// at 10 ms where 4 were still 45% faster.
	windowBound = 0.15
	// laneGainMin is the least speed-up a doubling must bring to be kept.
	laneGainMin = 1.10
)

// laneSample is the rate a transfer moved at with lanes lanes working.
type laneSample struct {
	lanes int
	rate  float64 // bytes per second
}

// firstLanes is the lane count a transfer on a link of round trip rtt starts with.
func firstLanes(rtt time.Duration, ceiling int) int {
	if ceiling <= 1 {
		return 1
	}
	n := int(math.Ceil(laneStartRate * rtt.Seconds() / channelWindow))
	return min(max(n, 2), ceiling)
}

// nextLanes decides, from the samples taken so far (in the order taken, each with more
// lanes than the one before), how many lanes to use next; settled means the rule has
// found its count and takes no more samples.
func nextLanes(rtt time.Duration, ceiling int, tried []laneSample) (lanes int, settled bool) {
	if len(tried) == 0 {
		return firstLanes(rtt, ceiling), false
	}
	cur := tried[len(tried)-1]
	if len(tried) > 1 {
		prev := tried[len(tried)-2]
		if cur.lanes <= prev.lanes {
			return cur.lanes, true // no more lanes could be had
		}
		if cur.rate < prev.rate*laneGainMin {
			return prev.lanes, true // the growth did not pay
		}
	}
	bound := float64(cur.lanes) * channelWindow / max(rtt.Seconds(), 1e-6)
	if cur.lanes >= ceiling || cur.rate < windowBound*bound {
		return cur.lanes, true // at the ceiling, or something other than the windows limits
	}
	return min(2*cur.lanes, ceiling), false
}

// laneMemory is what a Client remembers of the lane counts its transfers settled
// on, one for each direction, so that the next transfer starts there instead of
// ramping from scratch: a count, shifted left by one, with the low bit set once it
// is settled. 0: nothing known.
type laneMemory struct {
	down, up atomic.Int32
}

func (m *laneMemory) of(upload bool) *atomic.Int32 {
	if upload {
		return &m.up
	}
	return &m.down
}

// laneCtl runs the rule for one transfer: it is fed the bytes the transfer
// completes and the rounds of the lane opener, from the transfer's own goroutine.
type laneCtl struct {
	on      bool // taking samples
	rtt     time.Duration
	ceiling int
	target  int  // lanes asked for
	round   bool // the opener is opening lanes for target
	tried   []laneSample
	memory  *atomic.Int32
	clock   func() time.Time // time.Now; tests step it by hand

	from  time.Time // start of the sample under way; zero until the lanes are in
	bytes int64
}

func (lc *laneCtl) now() time.Time {
	if lc.clock != nil {
		return lc.clock()
	}
	return time.Now()
}

// measureFor is how long one sample lasts: a few round trips, so that a sample
// covers several turns of every lane's window, and long enough that scheduling
// noise on a short link does not decide.
func measureFor(rtt time.Duration) time.Duration { return max(3*rtt, 60*time.Millisecond) }

// start picks the lane count a transfer begins with: what the last transfer of the
// Client in the same direction reached, else what the round trip suggests.
func (lc *laneCtl) start(rtt time.Duration, ceiling int, memory *atomic.Int32) int {
	lc.rtt, lc.ceiling, lc.memory = rtt, ceiling, memory
	lc.on = true
	lc.target = firstLanes(rtt, ceiling)
	if m := memory.Load(); m > 0 {
		lc.target = min(max(int(m>>1), 1), ceiling)
		lc.on = m&1 == 0
	}
	lc.round = true
	return lc.target
}

// roundDone notes that the opener has done what it could for the target: with the
// lanes now working (have), a sample can start, after a round trip in which the new
// lanes fill their windows.
func (lc *laneCtl) roundDone(have int) {
	lc.round = false
	if have < lc.target { // the server gave no more: that is the ceiling
		lc.ceiling, lc.target = have, have
	}
	lc.from, lc.bytes = lc.now().Add(lc.rtt), 0
}

// moved counts n bytes completed with have lanes working. It returns the lane count
// to grow to (0: none), and the lanes the transfer should use.
func (lc *laneCtl) moved(n int, have int) (grow int) {
	if !lc.on || lc.round {
		return 0
	}
	now := lc.now()
	if now.Before(lc.from) {
		return 0
	}
	lc.bytes += int64(n)
	elapsed := now.Sub(lc.from)
	if elapsed < measureFor(lc.rtt) {
		return 0
	}
	lc.tried = append(lc.tried, laneSample{lanes: have, rate: float64(lc.bytes) / elapsed.Seconds()})
	next, settled := nextLanes(lc.rtt, lc.ceiling, lc.tried)
	bit := int32(0)
	if settled {
		lc.on = false
		bit = 1
	}
	lc.memory.Store(int32(next)<<1 | bit)
	if next > have && !settled {
		lc.target, lc.round = next, true
		return next
	}
	lc.target = next
	lc.from, lc.bytes = now, 0
	return 0
}
