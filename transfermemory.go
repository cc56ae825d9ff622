package sftp

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Transfer memory: one byte budget per Client for the data buffers of its transfers.
//
// Each transfer's window (flow.go) bounds what that transfer holds; on its own that
// bounds nothing for a service that runs many transfers on one Client at once. So
// every buffer a transfer holds is also charged to the Client's budget:
//
//   - a download takes a slot before a READ goes out (its reply lands in a pooled
//     buffer) and gives it back once the data has been consumed (read by the caller,
//     written to WriteTo's writer) or dropped;
//   - an upload takes one before it reads the source into a buffer and gives it back
//     when the buffer is freed (written to its channel, or, on a sibling lane,
//     acknowledged; see heldBuf).
//
// Slots are taken one at a time as the transfer needs them, so a transfer never holds
// more than its file needs. Beyond its floor a transfer takes a slot only while the
// budget has one free and it holds less than its fair share (the budget over the
// transfers under way), so a transfer that starts while others hold everything gets
// room as they give back theirs, and one alone may take the whole budget.
//
// The floor is the guarantee of progress: every transfer may hold floorSlots whatever
// the budget says, so no transfer ever waits on another's memory. A download never
// waits for a slot at all: it sends what its slots allow and asks again at its next
// event. An upload's producer waits only while its own buffers are all taken, until
// one of them is freed (or its ctx ends): which its scheduler always brings about
// without reading more of the source. No wait for a slot depends on another transfer,
// so transfers feeding each other (a download written into an upload on the same
// Client) cannot lock up either.

// defaultTransferMemory is a Client's budget for transfer data when WithTransferMemory
// is not given: more than the window of one striped transfer (windowBudget), so a
// transfer alone keeps the window it would keep without the budget, and enough that
// many transfers on a long link keep their channels busy (an upload's WRITE on a
// sibling lane holds its buffer for a round trip) while the process stays well
// within 100 MiB.
const defaultTransferMemory = 48 << 20

// minTransferMemory keeps the budget above a few buffers of the largest request.
const minTransferMemory = 1 << 20

// floorSlots is how many buffers a transfer may always hold, budget or not: one lets
// it make progress (the window rule's exception, read.go, may add one more).
const floorSlots = 1

// WithTransferMemory sets the most memory the data buffers of the Client's transfers
// hold at once, summed over every transfer under way on the Client (default 48 MiB,
// at least 1 MiB). Concurrent transfers (File.ReadFrom and WriteTo, Read, ReadAt, Write,
// WriteAt, Get, Put, ReadFile, WriteFile, Hash's reads) share it: each takes buffers
// as it needs them, up to its window (WithMaxInflight, WithChannels), while the budget
// has room and it holds less than its fair share of it; one transfer alone may use it
// all. A transfer never waits for another to free memory: it runs with less in
// flight, down to one buffer.
//
// What it bounds: a download's READ replies (in flight, and arrived but not yet
// consumed) and an upload's WRITE buffers (read from the source and not yet written
// to its channel, and on a sibling channel not yet acknowledged), each a buffer of
// the negotiated request size plus 1 KiB.
//
// What it does not bound: the one buffer every transfer may hold whatever the budget
// (so N transfers beyond the budget hold N buffers, as any client's would), the one
// extra READ a download may send to fill a gap, the copies Verify makes for hashing,
// a single Write or ReadFile small enough for one request, replies to other calls
// (listings are bounded by WithMemoryLimit), and what the Go runtime keeps around
// freed buffers: with the default GOGC a process's memory stays within about twice
// the budget plus what the rest of the program holds.
func WithTransferMemory(bytes int64) Option {
	return func(o *options) error {
		if bytes < minTransferMemory {
			return fmt.Errorf("sftp: WithTransferMemory(%d): want at least %d", bytes, minTransferMemory)
		}
		o.transferMemory = bytes
		return nil
	}
}

// transferMemory is a Client's budget (see above). free may go below zero: floors are
// taken without asking.
type transferMemory struct {
	limit  atomic.Int64 // bytes; set once the options are known
	free   atomic.Int64 // bytes not charged to any transfer
	active atomic.Int64 // transfers under way (memShares joined and not left)
	low    atomic.Int64 // the least free has been, for tests and measurements

	idle idleBuffers // empties the buffer pool once transfers have stopped
}

// Buffers of transfers that have stopped. The data buffers go back to the Client's
// sync.Pool, which keeps them through one garbage collection and frees them at the
// next; an idle service may not collect for minutes (the runtime forces one every
// two), so a burst of transfers would hold its budget's worth for two of them. Once
// no transfer has run for buffersIdleAfter, the pool is emptied instead: what it held
// is freed at the next collection. Only then: a service moving one file after another
// keeps reusing the same buffers.

// buffersIdleAfter is how long no transfer must run before the pool is emptied.
const buffersIdleAfter = 10 * time.Second

// idleBuffers empties a Client's buffer pool once its transfers have been idle.
type idleBuffers struct {
	joins atomic.Uint64 // transfers started, ever
	fresh atomic.Int64  // buffers the pool's New made, ever: tells an empty pool

	mu     sync.Mutex
	timer  *time.Timer   // armed once the last transfer under way has ended
	fired  chan struct{} // closed once the timer's function has returned
	closed bool
	pool   *sync.Pool
}

// arm starts the wait once no transfer runs.
func (b *idleBuffers) arm(tm *transferMemory) {
	b.mu.Lock()
	b.armLocked(tm)
	b.mu.Unlock()
}

func (b *idleBuffers) armLocked(tm *transferMemory) {
	if b.closed || b.timer != nil || b.pool == nil {
		return
	}
	joins := b.joins.Load()
	fired := make(chan struct{})
	b.fired = fired
	b.timer = time.AfterFunc(buffersIdleAfter, func() {
		defer close(fired)
		expired := b.expire(tm, joins)
		b.mu.Lock()
		b.timer = nil
		if !expired && tm.active.Load() == 0 {
			b.armLocked(tm) // transfers ran in between and are over: wait from now
		}
		b.mu.Unlock()
	})
}

// expire empties the pool if no transfer has started since joins was read and none
// runs, and reports whether it did. Get takes what another P keeps only from its
// shared part, so a few buffers may stay: they go with the next collections.
func (b *idleBuffers) expire(tm *transferMemory, joins uint64) bool {
	if tm.active.Load() != 0 || b.joins.Load() != joins {
		return false
	}
	for range 1 << 16 { // a bound: other calls may Put while this empties
		made := b.fresh.Load()
		b.pool.Get()
		if b.fresh.Load() != made {
			break // the pool was empty: New made that one
		}
	}
	return true
}

// stop ends the waits (Client.Close), waiting for one under way.
func (b *idleBuffers) stop() {
	b.mu.Lock()
	b.closed = true
	timer, fired := b.timer, b.fired
	b.mu.Unlock()
	if timer == nil {
		return
	}
	if timer.Stop() {
		b.mu.Lock()
		b.timer = nil
		b.mu.Unlock()
	} else {
		<-fired // its function is under way: it arms nothing once closed
	}
}

func (tm *transferMemory) init(limit int64) {
	tm.limit.Store(limit)
	tm.free.Store(limit)
	tm.low.Store(limit)
}

// peak is the most the Client's transfers have held at once.
func (tm *transferMemory) peak() int64 { return tm.limit.Load() - tm.low.Load() }

// charge takes n bytes whether free or not (a floor).
func (tm *transferMemory) charge(n int64) { storeMin(&tm.low, tm.free.Add(-n), math.MinInt64) }

// take charges n bytes if they are free.
func (tm *transferMemory) take(n int64) bool {
	for {
		f := tm.free.Load()
		if f < n {
			return false
		}
		if tm.free.CompareAndSwap(f, f-n) {
			storeMin(&tm.low, f-n, math.MinInt64)
			return true
		}
	}
}

func (tm *transferMemory) give(n int64) { tm.free.Add(n) }

// memShare is one transfer's part of its Client's budget, in slots of one data
// buffer. It is safe for concurrent use: an upload's producers take slots while the
// channels' writers and the scheduler give them back.
type memShare struct {
	mu    sync.Mutex
	tm    *transferMemory
	unit  int64 // bytes per slot: one pooled data buffer
	have  int   // slots charged to tm
	inUse int   // an upload's buffers held (put and take)
	left  bool  // the transfer is over: late puts give their slots straight back
	// wake, made on the first wait only, tells a waiting producer a buffer was freed.
	wake chan struct{}
}

// join starts a transfer's share with its floor. It allocates nothing.
func (m *memShare) join(c *Client) {
	m.tm, m.unit = &c.mem, int64(c.dataSize.Load())+packetSlack
	m.have = floorSlots
	m.tm.charge(floorSlots * m.unit)
	m.tm.idle.joins.Add(1)
	m.tm.active.Add(1)
}

// fair is the most slots the transfer may hold: its share of the budget over the
// transfers under way, and never less than the floor.
func (m *memShare) fair() int {
	return max(floorSlots, int(m.tm.limit.Load()/m.unit/max(1, m.tm.active.Load())))
}

// grow makes sure the transfer holds n slots, taking what it lacks if the budget has
// it free and n is within the fair share. m.mu must be held.
func (m *memShare) grow(n int) bool {
	if n <= m.have {
		return true
	}
	if m.left || n > m.fair() || !m.tm.take(int64(n-m.have)*m.unit) {
		return false
	}
	m.have = n
	return true
}

// shrinkTo gives back the slots beyond n and the floor. m.mu must be held.
func (m *memShare) shrinkTo(n int) {
	keep := n
	if !m.left {
		keep = max(n, floorSlots)
	}
	if m.have > keep {
		m.tm.give(int64(m.have-keep) * m.unit)
		m.have = keep
	}
}

// ensure is grow for a download, which counts its own slots in use.
func (m *memShare) ensure(n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.grow(n)
}

// trim is shrinkTo for a download: n slots are still in use.
func (m *memShare) trim(n int) {
	m.mu.Lock()
	m.shrinkTo(n)
	m.mu.Unlock()
}

// take takes a slot for one more of an upload's buffers, waiting while the transfer
// holds all it may until one of its buffers is freed; false once ctx ends.
func (m *memShare) take(ctx context.Context) bool {
	for {
		m.mu.Lock()
		if m.grow(m.inUse + 1) {
			m.inUse++
			m.mu.Unlock()
			return true
		}
		// inUse >= have >= floorSlots here: a buffer of this transfer is out, and put
		// wakes the wait when it comes back.
		if m.wake == nil {
			m.wake = make(chan struct{}, 1)
		}
		wake := m.wake
		m.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

// put gives back the slot of an upload's buffer that was freed. It may run after the
// transfer has ended (a channel's writer lets go of a WRITE late).
func (m *memShare) put() {
	m.mu.Lock()
	m.inUse--
	m.shrinkTo(m.inUse)
	wake := m.wake
	m.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// leave ends the transfer's share: every slot not still in use goes back, and the
// ones in use go back as they are put.
func (m *memShare) leave() {
	m.mu.Lock()
	last := false
	if !m.left {
		m.left = true
		last = m.tm.active.Add(-1) == 0
		m.shrinkTo(m.inUse)
	}
	m.mu.Unlock()
	if last {
		m.tm.idle.arm(m.tm)
	}
}
