package testserver

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// itemKind says what the reader is telling the writer.
type itemKind uint8

const (
	itemReply itemKind = iota // a reply to send
	itemFlush                 // no request is waiting: release the Reorder group
	itemEnd                   // the reader has stopped: send what's left, then close
)

// item travels from the reader to the writer by value, so queuing a reply
// allocates nothing.
type item struct {
	kind     itemKind
	buf      []byte   // the encoded reply; a recycled buffer, returned after sending
	pkts     [][]byte // what Corrupt asked to send instead, when replaced is set
	replaced bool
	counted  bool      // answers a request MaxInflight counts (anything but INIT)
	due      time.Time // earliest send time under Latency
}

// session is one client connection. Two goroutines serve it:
//
//   - the reader reads each request, executes it inline (so requests take
//     effect in arrival order) and passes the reply to the writer through
//     items, a bounded channel that gives back-pressure;
//   - the writer owns the Reorder group and the Latency queue and writes
//     each reply with a single Write.
//
// Shutdown: whoever ends the session closes the request direction (in), so
// the reader stops; the reader then sends itemEnd, waits for the writer,
// cleans up and finally closes the reply direction (out). The writer stops
// writing (but keeps draining items until itemEnd) once done is closed, a
// write fails or DropAfterBytes cuts the connection.
type session struct {
	srv *Server
	cfg *config
	fs  backend

	in  *pipe // requests, client -> server
	out *pipe // replies, server -> client

	items      chan item
	free       chan []byte   // reply buffers the writer has finished with
	done       chan struct{} // closed by kill
	readerDone chan struct{} // closed once the reader has stopped and cleaned up
	killOnce   sync.Once
	writerDone chan struct{}
	release    chan struct{} // nudges the writer to pick up released stalls

	// Reader-goroutine state.
	hdr        [4]byte
	inbuf      []byte
	req        request
	handles    map[string]*handle
	lastHandle *handle // the handle appendHandle registered last
	seq        int
	held       heldWrites // HoldWrites

	// Writer-goroutine state.
	sent int64
	rng  *rand.Rand

	mu          sync.Mutex // guards stalled, stalledReqs and released
	stalled     []item
	stalledReqs []Request // what each of stalled answers, for ReleaseStalledWhere
	released    []item

	initSeen bool // under in.mu: the first packet (INIT) isn't counted

	outstanding int  // under srv.statsMu: counted requests not yet answered
	ended       bool // under srv.statsMu
}

func newSession(srv *Server, in, out *pipe, n uint64) *session {
	ss := &session{
		srv:        srv,
		cfg:        &srv.cfg,
		fs:         srv.fs,
		in:         in,
		out:        out,
		items:      make(chan item, 16),
		free:       make(chan []byte, 128),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		readerDone: make(chan struct{}),
		release:    make(chan struct{}, 1),
		handles:    make(map[string]*handle),
		rng:        rand.New(rand.NewPCG(uint64(srv.cfg.Reorder)^srv.cfg.Seed, n)),
	}
	ss.held.rng = rand.New(rand.NewPCG(uint64(srv.cfg.HoldWrites)^srv.cfg.Seed, n^0x5eed))
	in.onPacket = ss.requestWritten
	out.onMark = ss.replyRead
	return ss
}

// requestWritten runs in the client's Write, before the request is visible
// to the server, so the count can never lag behind the reply.
func (ss *session) requestWritten() {
	if !ss.initSeen {
		ss.initSeen = true
		return
	}
	s := ss.srv
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if ss.ended {
		return
	}
	ss.outstanding++
	s.inflight++
	s.maxInflight = max(s.maxInflight, s.inflight)
}

// replyRead runs in the client's Read once it has consumed a whole reply.
func (ss *session) replyRead() {
	s := ss.srv
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if ss.ended || ss.outstanding == 0 {
		return
	}
	ss.outstanding--
	s.inflight--
}

func (ss *session) kill() {
	ss.killOnce.Do(func() { close(ss.done) })
	ss.in.closeRead()
	ss.out.closeWrite()
}

func (ss *session) getBuf() []byte {
	select {
	case b := <-ss.free:
		return b[:0]
	default:
		return make([]byte, 0, 512)
	}
}

func (ss *session) recycle(b []byte) {
	if b == nil {
		return
	}
	select {
	case ss.free <- b:
	default:
	}
}

// readPacket returns the next packet's type and body (without the type
// byte). The body aliases a buffer reused for the next packet. ok is false
// when the connection ended or the length field is 0 or over MaxPacket, in
// which case the connection is dropped without a reply, as OpenSSH does.
func (ss *session) readPacket() (typ uint8, body []byte, ok bool) {
	if _, err := io.ReadFull(ss.in, ss.hdr[:]); err != nil {
		return 0, nil, false
	}
	n := binary.BigEndian.Uint32(ss.hdr[:])
	if n == 0 || uint64(n) > uint64(ss.cfg.maxPacket) {
		return 0, nil, false
	}
	if cap(ss.inbuf) < int(n) {
		ss.inbuf = make([]byte, max(int(n), min(2*cap(ss.inbuf), ss.cfg.maxPacket)))
	}
	b := ss.inbuf[:n]
	if _, err := io.ReadFull(ss.in, b); err != nil {
		return 0, nil, false
	}
	ss.srv.requests[b[0]].Add(1)
	return b[0], b[1:], true
}

func (ss *session) readLoop() {
	defer ss.srv.wg.Done()
	defer close(ss.readerDone)
	defer ss.finish()
	typ, body, ok := ss.readPacket()
	// Anything before INIT is fatal, as in OpenSSH. The client's version
	// and extension pairs are ignored: the answer is always 3.
	if !ok || typ != TypeInit || len(body) < 4 {
		return
	}
	ss.version(time.Now())
	idle := ss.idleTimer()
	defer idle.Stop()
	for {
		if (ss.cfg.Reorder > 1 || ss.cfg.HoldWrites > 0) && !ss.in.packetReady() {
			ss.applyHeld(0) // nothing is waiting: the client may be waiting for these
			if ss.cfg.Reorder > 1 {
				ss.items <- item{kind: itemFlush}
			}
		}
		typ, body, ok := ss.readPacket()
		if !ok {
			return
		}
		ss.seq++
		idle.Reset(ss.idleTimeout())
		if ss.cfg.DropAfterRequests > 0 && ss.seq == ss.cfg.DropAfterRequests {
			return
		}
		if !ss.serve(typ, body) {
			return
		}
	}
}

// idleTimer ends the session after Quirks.IdleTimeout without a request; without
// one it never fires.
func (ss *session) idleTimer() *time.Timer {
	t := time.AfterFunc(ss.idleTimeout(), ss.kill)
	if ss.idleTimeout() == never {
		t.Stop()
	}
	return t
}

// never stands for "no idle timeout": a timer set to it does not fire in a test's life.
const never = time.Duration(1<<63 - 1)

func (ss *session) idleTimeout() time.Duration {
	if q := ss.cfg.Quirks; q != nil && q.IdleTimeout > 0 {
		return q.IdleTimeout
	}
	return never
}

// finish runs when the reader stops, for whatever reason.
func (ss *session) finish() {
	ss.in.closeRead()
	ss.items <- item{kind: itemEnd}
	<-ss.writerDone

	// Released stalls were taken off the server's count by ReleaseStalled;
	// the ones still withheld are dropped here.
	ss.mu.Lock()
	dropped := len(ss.stalled)
	ss.stalled, ss.stalledReqs, ss.released = nil, nil, nil
	ss.mu.Unlock()
	ss.srv.stallDelta(-dropped)

	ss.held.drop() // read, never carried out: a killed server process's
	ss.srv.openHandles.Add(-int64(len(ss.handles)))
	for _, h := range ss.handles {
		ss.forgetQuirks(h)
		h.release()
	}
	clear(ss.handles)

	s := ss.srv
	s.statsMu.Lock()
	ss.ended = true
	s.inflight -= ss.outstanding
	ss.outstanding = 0
	s.statsMu.Unlock()

	s.removeSession(ss)
	// Closing the reply direction last means a client that reads io.EOF
	// knows the session is gone: its handles are closed and the stats
	// settled, so tests can assert on them without waiting.
	ss.out.closeWrite()
}

// emit hands a finished reply to the writer, applying Corrupt and Stall.
func (ss *session) emit(r *request, b []byte) {
	it := item{kind: itemReply, buf: b, counted: r.typ != TypeInit}
	if ss.cfg.Latency > 0 {
		it.due = r.arrival.Add(ss.cfg.Latency)
	}
	stall := false
	var pub Request
	if ss.cfg.Stall != nil || ss.cfg.Corrupt != nil {
		pub = r.public()
		stall = ss.cfg.Stall != nil && ss.cfg.Stall(pub)
		if ss.cfg.Corrupt != nil {
			if pkts := ss.cfg.Corrupt(pub, b); pkts != nil {
				it.pkts, it.replaced = pkts, true
			}
		}
	}
	if stall {
		ss.mu.Lock()
		ss.stalled = append(ss.stalled, it)
		ss.stalledReqs = append(ss.stalledReqs, pub)
		ss.mu.Unlock()
		ss.srv.stallDelta(1)
		return
	}
	ss.items <- it
}

// releaseStalled moves the withheld replies whose request match accepts (all of them
// when match is nil) to the writer's inbox, in the order they were withheld.
func (ss *session) releaseStalled(match func(Request) bool) int {
	ss.mu.Lock()
	n := 0
	keep, keepReqs := ss.stalled[:0], ss.stalledReqs[:0]
	for i, it := range ss.stalled {
		if match == nil || match(ss.stalledReqs[i]) {
			ss.released = append(ss.released, it)
			n++
		} else {
			keep, keepReqs = append(keep, it), append(keepReqs, ss.stalledReqs[i])
		}
	}
	clear(ss.stalled[len(keep):])
	ss.stalled, ss.stalledReqs = keep, keepReqs
	ss.mu.Unlock()
	if n > 0 {
		select {
		case ss.release <- struct{}{}:
		default:
		}
	}
	return n
}

// fifo is the writer's send queue; it reuses its array so a steady stream
// of replies allocates nothing.
type fifo struct {
	q    []item
	head int
}

func (f *fifo) len() int     { return len(f.q) - f.head }
func (f *fifo) front() *item { return &f.q[f.head] }

func (f *fifo) push(it item) {
	if f.head > 0 && len(f.q) == cap(f.q) {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, it)
}

func (f *fifo) pop() item {
	it := f.q[f.head]
	f.q[f.head] = item{}
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	}
	return it
}

func (ss *session) writeLoop() {
	defer ss.srv.wg.Done()
	defer close(ss.writerDone)

	var (
		queue  fifo
		group  []item // held for Reorder
		ending bool   // itemEnd seen: no more items will come
		broken bool   // nothing more can be written
		done   = ss.done
		timer  = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()

	release := func() {
		if len(group) > 1 {
			ss.rng.Shuffle(len(group), func(i, j int) { group[i], group[j] = group[j], group[i] })
		}
		for i, it := range group {
			queue.push(it)
			group[i] = item{}
		}
		group = group[:0]
	}
	discard := func(it item) { ss.recycle(it.buf) }

	for {
		var wait time.Duration
		for !broken && queue.len() > 0 {
			if ss.cfg.Latency > 0 {
				if wait = time.Until(queue.front().due); wait > 0 {
					break
				}
			}
			if !ss.send(queue.pop()) {
				broken = true
			}
		}
		if broken {
			for queue.len() > 0 {
				discard(queue.pop())
			}
			for _, it := range group {
				discard(it)
			}
			group = group[:0]
		}
		if ending && queue.len() == 0 && len(group) == 0 {
			return
		}

		var tick <-chan time.Time
		if queue.len() > 0 && wait > 0 {
			timer.Reset(wait)
			tick = timer.C
		}
		select {
		case it := <-ss.items:
			switch {
			case it.kind == itemEnd:
				ending = true
				release()
			case it.kind == itemFlush:
				release()
			case broken:
				discard(it)
			case ss.cfg.Reorder > 1:
				group = append(group, it)
				if len(group) >= ss.cfg.Reorder {
					release()
				}
			default:
				queue.push(it)
			}
		case <-tick:
		case <-ss.release:
			ss.mu.Lock()
			rel := ss.released
			ss.released = nil
			ss.mu.Unlock()
			for _, it := range rel {
				it.due = time.Time{}
				queue.push(it)
			}
		case <-done:
			done = nil
			broken = true
		}
		if tick != nil {
			timer.Stop()
		}
	}
}

// send writes one reply (or what Corrupt put in its place), each packet with
// a single Write. It reports false once the connection can't take more.
func (ss *session) send(it item) bool {
	ok := true
	if it.replaced {
		for i, p := range it.pkts {
			if ok = ss.put(p, it.counted && i == len(it.pkts)-1); !ok {
				break
			}
		}
	} else {
		ok = ss.put(it.buf, it.counted)
	}
	ss.recycle(it.buf)
	return ok
}

func (ss *session) put(p []byte, mark bool) bool {
	if lim := ss.cfg.DropAfterBytes; lim > 0 && int64(len(p)) >= lim-ss.sent {
		cut := lim - ss.sent
		_, _ = ss.out.write(p[:cut], mark && cut == int64(len(p)))
		ss.sent = lim
		// Stop the reader; finish closes the reply direction after the
		// cleanup, so the client's io.EOF still means the session is gone.
		ss.in.closeRead()
		return false
	}
	n, err := ss.out.write(p, mark)
	ss.sent += int64(n)
	if err != nil {
		// The client hung up its read end: end the session.
		ss.in.closeRead()
		return false
	}
	return true
}
