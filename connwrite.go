package sftp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The write side of a channel. One goroutine per channel, the writer, owns the
// transport's Write; everything else only queues packets for it. That is what lets a
// call leave whatever the transport does:
//
//   - x/crypto's channel Write blocks while the server grants no window, and nothing
//     on our side can wake it: (*ssh.channel).Close only sends CHANNEL_CLOSE, and a
//     blocked writer is released only when the server's CLOSE arrives or the SSH
//     connection ends. A call that wrote inline would be held past its ctx by a server
//     that stops reading, and so would NewClientPipe's INIT on a peer that never reads.
//   - A call queues its packet and waits for the reply. When its ctx ends first, a
//     packet the writer has not started is withdrawn (the request never went out, so
//     nothing waits for it, and its id leaves pending), unless it is a CLOSE, which
//     must reach the server whoever waits; a packet in the middle of a Write cannot be
//     cut out of the stream without breaking the framing, so the call leaves it to the
//     writer and returns. If the Write under way when a call gave up (its own packet's
//     or one ahead of it) is still blocked a grace period later (writeStallGrace),
//     the server has stopped taking data: the channel is given up (failed with
//     errWriteStalled), which a transfer treats like any dead lane and the Client, for
//     its main channel, reports through Done and Err.
//   - A goroutine left blocked in x/crypto's Write (the writer, and the reader, which
//     waits for the server's CLOSE) ends when the SSH connection closes: Close does
//     not wait for it (conn.shutdown). For NewClient that is the caller's ssh.Client.
//
// Packets of at most copyMax bytes are copied into the queue, so the caller's buffer
// is free once the request is started (conn.startInto), and consecutive ones go out
// in one Write (a window of READs costs one write(2) and, on SSH, one encrypted
// message instead of dozens).
// Longer packets are written from the caller's buffer: a caller that reuses it passes
// a packetRef, which the writer tells when it is done with the buffer (after the Write
// returns, or at once when the packet is withdrawn or the channel failed before it
// went out), never earlier. A buffer a stuck Write still reads is thus never reused,
// whatever the call that sent it did since.
//
// Why one writer per channel, rather than a goroutine per call that may be left
// behind: the writer keeps the channel's order for free (INIT before a data channel's
// first OPEN, a handle's requests before its CLOSE: File.hmu relies on it), allocates
// nothing per packet, batches small packets, and is what an upload's lanes need
// anyway: each channel's writer parks alone on its exhausted window, so the
// scheduler needs no sender goroutine per lane. The cost is one goroutine hand-off
// per batch, which measured within noise (BenchmarkStat, BenchmarkTestServerStat).
//
// The queue is two slices swapped between the senders and the writer, each with an
// arena for the copied packets: once they have grown to the traffic, queuing
// allocates nothing.

// copyMax is the longest packet the queue copies: every request but a WRITE's data (a READ
// is some 40 bytes, an OPEN with a long path a few hundred).
const copyMax = smallBuf

// packetRef is told when the writer no longer needs a packet it did not copy.
// writeDone runs on the writer's goroutine or on one withdrawing the packet, possibly
// with the conn's mu held: it must not block or take a conn's locks.
type packetRef interface{ writeDone() }

// tell tells ref, if any, that its packet will not be written.
func tell(ref packetRef) {
	if ref != nil {
		ref.writeDone()
	}
}

// pooledPacket is a packetRef for a pooled buffer that goes back to its pool once
// everyone holding it (refs) has let go.
type pooledPacket struct {
	bp   *[]byte
	pool *sync.Pool
	refs atomic.Int32
}

func (p *pooledPacket) writeDone() {
	if p.refs.Add(-1) == 0 {
		p.pool.Put(p.bp)
	}
}

// wentry is one packet queued for the writer.
type wentry struct {
	off, n int       // copied: where its bytes are in the queue's arena
	pkt    []byte    // not copied: the caller's packet
	ref    packetRef // for pkt; may be nil when the caller never reuses it
	gone   bool      // withdrawn: its call gave up before the writer started it
	keep   bool      // a CLOSE: it goes out even when nobody waits for it any more
}

func (e *wentry) copied() bool { return e.pkt == nil }

// wqueue is a run of queued packets, in the order they were sent.
type wqueue struct {
	base    uint64 // seq of entries[0]
	entries []wentry
	arena   []byte
}

func (q *wqueue) reset() {
	clear(q.entries) // drop the references to callers' packets
	q.entries, q.arena = q.entries[:0], q.arena[:0]
	// A burst (a tree's thousands of small requests) must not leave a large queue
	// behind for the life of the channel.
	if cap(q.entries) > maxKeptEntries {
		q.entries = nil
	}
	if cap(q.arena) > maxKeptEntries*64 {
		q.arena = nil
	}
}

// maxKeptEntries is how many queue entries (and 64 times that in bytes of copied
// packets) a queue keeps between bursts: a window of requests and then some.
const maxKeptEntries = 1024

// at returns the entry of seq, or nil when q does not hold it.
func (q *wqueue) at(seq uint64) *wentry {
	if seq < q.base || seq-q.base >= uint64(len(q.entries)) {
		return nil
	}
	return &q.entries[seq-q.base]
}

// writeState is the part of a conn the write side keeps, guarded by conn.mu.
type writeState struct {
	queued  wqueue // what senders added and the writer has not taken
	batch   wqueue // what the writer took and is working through
	nextSeq uint64 // seq of the next packet queued; seqs start at 1
	started uint64 // every packet up to this seq was handed to Write or withdrawn
	written uint64 // every packet up to this seq has left Write
	idle    bool   // the writer waits for wake

	wake       chan struct{} // capacity 1: the queue is no longer empty
	writerDone chan struct{} // closed when the writer has ended

	// The stall watch: once a call gave up on a packet mid-Write, the channel is given
	// up unless that Write has returned by watchAt.
	watchSeq   uint64
	watchAt    time.Time
	watchTimer *time.Timer
	stalled    bool // given up on: its goroutines may stay in the transport
}

// errWriteStalled is why a channel was given up: a Write was still blocked a grace
// period after the call that sent it had ended.
type errWriteStalled struct{ grace time.Duration }

func (e *errWriteStalled) Error() string {
	return fmt.Sprintf("the server stopped taking data: a write was still blocked %v after a call waiting on it gave up", e.grace.Round(time.Millisecond))
}

// startWriter starts the writer goroutine.
func (c *conn) startWriter() {
	c.ws.wake = make(chan struct{}, 1)
	c.ws.writerDone = make(chan struct{})
	c.ws.nextSeq = 1
	go c.writeLoop()
}

// queueLocked adds pkt to the queue and returns its seq. The caller holds mu and
// wakes the writer after unlocking it (wakeWriter).
func (c *conn) queueLocked(pkt []byte, ref packetRef) uint64 {
	q := &c.ws.queued
	seq := c.ws.nextSeq
	c.ws.nextSeq++
	if len(q.entries) == 0 {
		q.base = seq
	}
	// A CLOSE is never withdrawn: a handle the client stops caring about must still
	// be closed, or it stays open at the server as long as the session.
	keep := len(pkt) > 4 && sshfx.PacketType(pkt[4]) == sshfx.TypeClose
	if len(pkt) <= copyMax {
		q.entries = append(q.entries, wentry{off: len(q.arena), n: len(pkt), keep: keep})
		q.arena = append(q.arena, pkt...)
		if ref != nil {
			defer ref.writeDone() // copied: the caller's buffer is free already
		}
	} else {
		q.entries = append(q.entries, wentry{pkt: pkt, ref: ref, keep: keep})
	}
	return seq
}

// wakeWriter tells an idle writer that the queue is not empty.
func (c *conn) wakeWriter(wake bool) {
	if wake {
		select {
		case c.ws.wake <- struct{}{}:
		default:
		}
	}
}

// queueRaw queues a packet that has no reply to wait for (INIT). False once the conn
// has failed.
func (c *conn) queueRaw(pkt []byte) bool {
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return false
	}
	c.queueLocked(pkt, nil)
	wake := c.ws.idle
	c.mu.Unlock()
	c.wakeWriter(wake)
	return true
}

// writeLoop is the only caller of c.w.Write. It takes what is queued, a batch at a
// time, and writes it in order: each run of copied packets in one Write, each other
// packet in one Write of its own.
func (c *conn) writeLoop() {
	defer close(c.ws.writerDone)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.ws.queued.entries) == 0 && c.pending != nil {
			c.ws.idle = true
			c.mu.Unlock()
			select {
			case <-c.ws.wake:
			case <-c.done:
			}
			c.mu.Lock()
			c.ws.idle = false
		}
		if c.pending == nil {
			c.releaseQueuedLocked()
			return
		}
		c.ws.batch, c.ws.queued = c.ws.queued, c.ws.batch
		if !c.writeBatchLocked() {
			return
		}
	}
}

// writeBatchLocked writes the batch the writer took; mu is held on entry and on
// return, and let go during each Write. It reports false once the conn has failed,
// after letting go of what it did not write.
func (c *conn) writeBatchLocked() bool {
	b := &c.ws.batch
	for i := 0; ; {
		if c.pending == nil {
			c.releaseQueuedLocked()
			return false
		}
		for i < len(b.entries) && b.entries[i].gone {
			i++
		}
		if i == len(b.entries) {
			b.reset()
			return true
		}
		j := i // the run is entries[i..j]
		if b.entries[i].copied() {
			for j+1 < len(b.entries) && b.entries[j+1].copied() && !b.entries[j+1].gone {
				j++
			}
		}
		c.ws.started = b.base + uint64(j)
		c.mu.Unlock()
		c.writing(b, i, j)

		e := &b.entries[i]
		var err error
		if e.copied() {
			last := &b.entries[j]
			_, err = c.w.Write(b.arena[e.off : last.off+last.n])
		} else {
			_, err = c.w.Write(e.pkt)
			if e.ref != nil {
				e.ref.writeDone()
			}
		}
		if err != nil {
			// fail delivers the error to every request waiting for a reply.
			c.fail(fmt.Errorf("write: %w", err))
		}
		c.mu.Lock()
		c.ws.written = c.ws.started
		i = j + 1
	}
}

// releaseQueuedLocked lets go of every packet that will never be written, once the
// conn has failed.
func (c *conn) releaseQueuedLocked() {
	for _, q := range []*wqueue{&c.ws.batch, &c.ws.queued} {
		for k := range q.entries {
			e := &q.entries[k]
			if !e.gone && q.base+uint64(k) > c.ws.started && e.ref != nil {
				e.ref.writeDone()
			}
		}
		q.reset()
	}
}

// withdrawLocked takes back the packet of seq if the writer has not started it, and
// reports whether it did. Its caller holds mu and drops the request from pending: a
// request that never went out is never waited for.
func (c *conn) withdrawLocked(seq uint64) bool {
	if seq <= c.ws.started {
		return false
	}
	e := c.ws.batch.at(seq)
	if e == nil {
		e = c.ws.queued.at(seq)
	}
	if e == nil || e.gone || e.keep {
		return false
	}
	e.gone = true
	if e.ref != nil {
		e.ref.writeDone()
	}
	return true
}

// giveUpLocked is what a waiter that gave up on its request does: it withdraws the
// packet if the writer has not started it, and reports whether it did. Either way,
// if its packet is not out yet (withdrawn, or in the middle of a Write), the Write
// under way is watched: a call that could not even get its request out is as good a
// sign of a server that stopped taking data as one whose packet is stuck.
func (c *conn) giveUpLocked(seq uint64) bool {
	withdrawn := c.withdrawLocked(seq)
	if seq > c.ws.written && c.ws.started > c.ws.written {
		c.watchStallLocked()
	}
	return withdrawn
}

// watchStallLocked arms the stall watch on the Write under way, unless a watch on it
// (or on one before it that is still blocked) is armed already.
func (c *conn) watchStallLocked() {
	if c.ws.watchSeq > c.ws.written {
		return
	}
	grace := c.stallGrace()
	c.ws.watchSeq = c.ws.started
	c.ws.watchAt = time.Now().Add(grace)
	if c.ws.watchTimer == nil {
		c.ws.watchTimer = time.AfterFunc(grace, func() { c.checkStall(time.Now()) })
	} else {
		c.ws.watchTimer.Reset(grace)
	}
}

// writeStallGrace is how long a channel's Write may stay blocked after the call that
// sent the packet gave up (its ctx ended) before the channel is given up as one whose
// server stopped taking data; it also bounds how long closing a channel
// waits for its goroutines. It must not kill a healthy channel whose user merely
// cancelled an upload: that Write is blocked on the channel's flow-control window,
// behind at most a window of data (channelWindow, 2 MiB, against sshd) plus what the
// server's pipes buffer, and the window comes back as the server writes that data and
// the window adjustment crosses the link. stallGraceBase lets a server that takes 1
// MiB/s (a slow disk or link; slower than that we call stalled) drain a window, and
// 4 minimum round trips let the adjustment come back even queued behind replies. A
// longer grace only delays the report: the call has returned at its ctx either way.
func writeStallGrace(minRTT time.Duration) time.Duration {
	return stallGraceBase + 4*minRTT
}

// stallGraceBase is writeStallGrace without the round trips: a window at 1 MiB/s.
const stallGraceBase = channelWindow / (1 << 20) * time.Second

// stallGrace is how long a Write may stay blocked after its call gave up.
func (c *conn) stallGrace() time.Duration {
	if d := time.Duration(c.stallGraceSet.Load()); d > 0 {
		return d
	}
	return writeStallGrace(time.Duration(c.minRTT.Load()))
}

// checkStall gives the channel up if the Write the watch is on has not returned by
// its time (now, for the timer; tests pass a later time).
func (c *conn) checkStall(now time.Time) {
	c.mu.Lock()
	if c.pending == nil || c.ws.watchSeq <= c.ws.written {
		c.mu.Unlock()
		return
	}
	if left := c.ws.watchAt.Sub(now); left > 0 { // a timer set for an earlier watch
		c.ws.watchTimer.Reset(left)
		c.mu.Unlock()
		return
	}
	c.ws.stalled = true
	grace := c.stallGrace()
	c.mu.Unlock()
	c.fail(&errWriteStalled{grace: grace})
}

// stopStallWatch stops the watch's timer once the conn is closed.
func (c *conn) stopStallWatch() {
	c.mu.Lock()
	if c.ws.watchTimer != nil {
		c.ws.watchTimer.Stop()
	}
	c.mu.Unlock()
}

// givenUp reports whether the conn was given up on a stalled Write.
func (c *conn) givenUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.stalled
}

// lingers reports whether c's reader or writer is still running.
func (c *conn) lingers() bool {
	select {
	case <-c.readerDone:
	default:
		return true
	}
	select {
	case <-c.ws.writerDone:
		return false
	default:
		return true
	}
}

// isStalled reports whether err is a channel given up on a stalled Write.
func isStalled(err error) bool {
	var se *errWriteStalled
	return errors.As(err, &se)
}
