package sftp

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The write side: uploads. Two kinds of goroutine work under one errgroup, whose
// context (derived from the File's life) is the only way either is stopped:
//
//   - producers read the source straight into pooled WRITE buffers, behind room left
//     for the header: one goroutine for a plain io.Reader, or readAtWorkers reading
//     disjoint chunks with ReadAt when the source has a known size;
//   - the scheduler gives each filled chunk a request id and a lane, puts the header
//     in front of the data and queues the WRITE on the lane's channel, and files every
//     acknowledgement by offset, so the bytes known written are always the contiguous
//     prefix of acknowledged chunks, whatever order they complete in.
//
// Each channel's own writer goroutine (connwrite.go) writes what is queued on it.
// x/crypto's Write blocks while the channel's window is exhausted; that blocks that
// channel's writer alone, and the scheduler, which never writes, queues at most
// maxUnsent WRITEs on a lane before they are written, so new ones go to the others.
//
// A window slot is taken before a chunk is read and given back when its reply is
// filed, so memory stays within the window whatever the file size. The window does
// not bound how far out of order the upload writes (a WRITE late at the prefix lets
// later ones complete and free their slots), so a chunk goes out only while it ends
// at most W (maxSpan) past the acknowledged prefix (inSpan): whatever stops the
// upload, nothing lands W or more past a prefix the server has confirmed, and Resume
// relies on it (resume.go).

// dataOff is where the data of a WRITE starts in its buffer. The header goes right
// in front of it, so the source can be read before the lane (whose handle is part of
// the header) is chosen.
const dataOff = packetSlack

// readAtWorkers is how many goroutines read a sized source in parallel. Reading a
// chunk costs a fraction of encrypting it, so two keep a writer fed even while one
// waits on a disk; more only add wake-ups (and buffers, see writeBuffers) on the
// two cores this is measured on.
const readAtWorkers = 2

// filledChunk is a piece of the source read into a pooled buffer, or a failure to
// read it.
type filledChunk struct {
	off int64
	n   int
	buf *[]byte
	eof bool  // the source ends right after this chunk
	err error // reading the source failed at off

	untokened bool // a copy to resend that took over no place among the buffers
	ownLane   bool // goes on the File's own lane: a chunk held for a proof (reopen.go)
}

// heldBuf is a WRITE's buffer and who still needs it. Its channel's writer does,
// until the WRITE is written (writeDone: a Write blocked by a stalled server may hold
// it past the end of the transfer); for a WRITE on a sibling lane the scheduler does
// too, until the reply: if the sibling dies first, the data goes out again on another
// lane (a WRITE at an offset can be repeated). The last to let go recycles the buffer
// (writeStream.release); the atomic count orders the writer's use of the buffer
// before its reuse. heldBufs are recycled too (writeStream.heldFree), so a chunk
// allocates nothing.
type heldBuf struct {
	buf   *[]byte
	refs  atomic.Int32
	token bool // holds one of writeStream.bufs; moves to the copy when resent
	ws    *writeStream
	lane  *lane // whose channel writes it
}

// writeDone is the writer's letting go (packetRef). It may run after the transfer
// has ended; then it only recycles the buffer.
func (h *heldBuf) writeDone() {
	ws, l := h.ws, h.lane // h may be reused once released
	ws.release(h)
	if l.unsent.Add(-1) == maxUnsent-1 {
		select { // the lane can take another: let the scheduler know
		case ws.kick <- struct{}{}:
		default:
		}
	}
}

// writeStream is one upload from an offset.
type writeStream struct {
	lanes
	op    string // the entry point its errors name: "write", "writeat", "readfrom"
	start int64
	size  int   // data bytes per WRITE
	max   int   // the window
	span  int64 // W (maxSpan): nothing is written span or more past acked.prefix

	g      *errgroup.Group
	halt   context.CancelFunc // stops the producers (a WRITE failed: read no further)
	slots  chan struct{}      // one per chunk between being read and being filed
	bufs   chan struct{}      // one per chunk between being read and being written out
	filled chan filledChunk   // from the producers; closed when they are done
	kick   chan struct{}      // a lane that was full has had one written
	// heldFree recycles heldBufs. Each WRITE in flight or queued has one, and one may
	// outlive its slot briefly (the reply can overtake the writer's letting go), so
	// it holds twice the window; past that they are left to the collector.
	heldFree chan *heldBuf

	ready    map[int64]filledChunk // read, waiting for their turn, by offset
	resend   []filledChunk         // WRITEs a dead sibling owed, to go out again first
	nextOff  int64                 // offset of the next chunk to hand to a lane
	reqs     map[uint32]chunk      // WRITEs given a lane, by request id
	acked    prefixTracker         // acknowledged WRITEs by offset
	end      int64                 // where the source ended, once a producer saw it
	halted   bool
	aborting bool

	firstFailure              // the failed WRITE (or the abort) at the lowest offset
	srcFail      firstFailure // reading the source failed

	// The proof that siblings are on the File's file (reopen.go): the nonce's WRITE in
	// flight and the round it is for, and the chunk held back until the round is over.
	nonceID  uint32
	nonceFor *roundProof
	heldBack *filledChunk
	heldFor  *roundProof // the held chunk waits for its siblings' READs to be answered

	// sum, with Verify, hashes each chunk as it is handed out in offset order
	// (sumfeed.go, verify.go sumChunk).
	sum *sumFeed

	// mem is the upload's part of the Client's transfer memory (transfermemory.go): a
	// slot goes with each of bufs' tokens.
	mem memShare
}

// newWriteStream starts an upload at off for op, the entry point its errors name,
// while ctx lasts.
func (f *File) newWriteStream(ctx context.Context, op string, off int64) *writeStream {
	window := f.window()
	ws := &writeStream{
		// Siblings open without CREAT or TRUNC: the caller's open already created or
		// truncated the file, and a second TRUNC would destroy what other lanes wrote.
		// READ, for the proof that they are on the File's file (reopen.go).
		lanes: f.newLanes(ctx, window, sshfx.FlagRead|sshfx.FlagWrite, true),
		start: off, size: f.c.maxWrite(), max: window, span: f.c.span(),
		slots:    make(chan struct{}, window),
		bufs:     make(chan struct{}, writeBuffers(f.c, window)),
		filled:   make(chan filledChunk, window),
		kick:     make(chan struct{}, 1),
		heldFree: make(chan *heldBuf, 2*window),
		ready:    make(map[int64]filledChunk, window),
		nextOff:  off,
		reqs:     make(map[uint32]chunk, window),
		acked:    newPrefixTracker(off, window),
		end:      math.MaxInt64,
		op:       op,
	}
	ws.mem.join(f.c)
	return ws
}

// sizedReaderAt reports whether src can be read in parallel: an io.ReaderAt and
// io.Seeker whose size is known (*os.File on a regular file, *bytes.Reader,
// *io.SectionReader, and wrappers that keep those methods). base is src's position,
// size what lies after it.
func sizedReaderAt(src io.Reader) (ra io.ReaderAt, base, size int64, ok bool) {
	ra, isAt := src.(io.ReaderAt)
	sk, isSeeker := src.(io.Seeker)
	if !isAt || !isSeeker {
		return nil, 0, 0, false
	}
	var total int64
	switch s := src.(type) {
	case interface{ Size() int64 }:
		total = s.Size()
	case interface{ Stat() (fs.FileInfo, error) }:
		st, err := s.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return nil, 0, 0, false
		}
		total = st.Size()
	default:
		return nil, 0, 0, false
	}
	base, err := sk.Seek(0, io.SeekCurrent)
	if err != nil || base < 0 {
		return nil, 0, 0, false
	}
	return ra, base, max(total-base, 0), true
}

// sizeOf guesses how much a sequential src will yield, to stripe from the first byte
// when it is large; -1 when unknown (then striping starts once the transfer has gone
// far enough).
func sizeOf(src io.Reader) int64 {
	switch r := src.(type) {
	case *io.LimitedReader:
		return r.N
	case *os.File:
		if st, err := r.Stat(); err == nil && st.Mode().IsRegular() {
			if off, err := r.Seek(0, io.SeekCurrent); err == nil {
				return st.Size() - off
			}
		}
	}
	return -1
}

// copyFrom writes everything src yields from the stream's offset until src ends or a
// WRITE fails. It returns the bytes the server acknowledged from the start offset, all
// before the first failure; remote failures come back as *fs.PathError, src's bare.
// A sized io.ReaderAt source is read in parallel and left positioned after what was
// written.
func (ws *writeStream) copyFrom(src io.Reader) (int64, error) {
	// The errgroup's ctx, derived from the transfer's, ends on the first error too.
	g, gctx := errgroup.WithContext(ws.ctx)
	ws.ctx, ws.g = gctx, g
	pctx, halt := context.WithCancel(gctx)
	ws.halt = halt
	ra, base, size, parallel := sizedReaderAt(src)
	if !parallel {
		size = sizeOf(src)
	}
	if size >= ws.f.c.minStripe() {
		ws.stripe()
	}
	if parallel {
		g.Go(func() error { return ws.readAt(pctx, ra, base) })
	} else {
		g.Go(func() error { return ws.readSeq(pctx, src) })
	}
	ws.startSum(src)
	g.Go(ws.schedule)
	g.Wait() // every failure is filed by offset in ws; the group's error adds nothing
	halt()
	ws.endSum()
	ws.cleanup()
	ws.mem.leave() // buffers still at a channel's writer give theirs back as they are freed
	// A failed CLOSE of a sibling handle may be the only report of a lost write: a
	// server's answer puts the failure at the start. A CLOSE that failed with its
	// channel says nothing of the WRITEs the server acknowledged: the failure goes
	// past them, so that what is known written stays known (Resume, KeepJournal).
	if err := ws.finish(); err != nil {
		at := ws.start
		if channelLost(err) {
			at = ws.acked.prefix
		}
		ws.fail(at, err)
	}
	n := min(ws.acked.prefix, ws.end) - ws.start
	if parallel {
		if _, err := src.(io.Seeker).Seek(base+n, io.SeekStart); err != nil && ws.err == nil {
			ws.srcFail.fail(ws.start+n, err)
		}
	}
	if ws.err != nil {
		return min(n, ws.errAt-ws.start), ws.f.err(ws.op, ws.err)
	}
	return n, ws.srcFail.err
}

// readSeq is the producer for a plain io.Reader: one chunk after another.
func (ws *writeStream) readSeq(ctx context.Context, src io.Reader) error {
	defer close(ws.filled)
	off := ws.start
	for {
		if !ws.acquire(ctx) {
			return nil
		}
		bp := ws.f.c.dataBuf()
		n, err := io.ReadFull(src, (*bp)[dataOff:dataOff+ws.size])
		c := filledChunk{off: off, n: n, buf: bp}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			c.eof = true
		default:
			c.err = err
		}
		off += int64(n)
		ws.filled <- c // never blocks: filled has room for every slot
		if c.eof || c.err != nil {
			return nil
		}
	}
}

// readAt is the producer for a sized io.ReaderAt: workers claim chunks in offset order
// and read them in parallel. The first short read marks the end of the source (it may
// have shrunk or grown since its size was taken: the end is where reading found it).
func (ws *writeStream) readAt(ctx context.Context, ra io.ReaderAt, base int64) error {
	defer close(ws.filled)
	var next, end atomic.Int64 // relative to the stream's start
	end.Store(math.MaxInt64)
	var workers errgroup.Group
	for range readAtWorkers {
		workers.Go(func() error {
			for {
				// Slot and buffer first, then the offset: a claimed chunk can always
				// be read, so the chunk dispatch waits for is never starved of either.
				if !ws.acquire(ctx) {
					return nil
				}
				rel := next.Add(int64(ws.size)) - int64(ws.size)
				if rel >= end.Load() {
					ws.putToken()
					<-ws.slots
					return nil
				}
				bp := ws.f.c.dataBuf()
				n, err := ra.ReadAt((*bp)[dataOff:dataOff+ws.size], base+rel)
				c := filledChunk{off: ws.start + rel, n: n, buf: bp}
				switch {
				case n == ws.size:
				case err == io.EOF || err == nil: // nil: a ReaderAt that breaks its contract
					c.eof = true
					storeMin(&end, rel+int64(n), math.MinInt64) // end is never MinInt64: any value counts
				default:
					c.err = err
				}
				ws.filled <- c
				if c.eof || c.err != nil {
					return nil
				}
			}
		})
	}
	workers.Wait()
	return nil
}

// post queues a WRITE of the chunk h holds on l's channel. A request that cannot go
// out gets its failure posted as its reply, so ack accounts for every request (and
// drops a dead sibling, whose WRITEs go out again on the others).
func (ws *writeStream) post(l *lane, id uint32, off int64, n int, h *heldBuf) {
	l.unsent.Add(1)
	pkt, err := writePacket(*h.buf, id, l.handle, off, n)
	if err == nil {
		err = ws.f.startInto(ws.ctx, l.cn, pkt, h, ws.ch) // lets go of h for the writer
	} else {
		h.writeDone()
	}
	if err != nil {
		ws.ch <- response{id: id, err: err} // room: one reply per request
	}
}

// newHeld returns a heldBuf for buf, to be written on l.
func (ws *writeStream) newHeld(buf *[]byte, token bool, l *lane) *heldBuf {
	var h *heldBuf
	select {
	case h = <-ws.heldFree:
	default:
		h = &heldBuf{ws: ws}
	}
	h.buf, h.token, h.lane = buf, token, l
	return h
}

// writePacket puts the header of a WRITE of n bytes at off in front of the data at
// dataOff in buf and returns the whole packet.
func writePacket(buf []byte, id uint32, handle string, off int64, n int) ([]byte, error) {
	hl := sshfx.HeaderLen + 1 + 4 + 4 + len(handle) + 8 + 4 // length, type, id, handle, offset, data length
	if hl > dataOff {
		return nil, protoErr("WRITE", "handle of %d bytes is too long", len(handle))
	}
	start := dataOff - hl
	appendWriteHeader(buf[start:start], id, handle, uint64(off), n)
	return buf[start : dataOff+n], nil
}

// schedule hands filled chunks to lanes and files replies until the source is done and
// every WRITE answered, or the transfer is stopped.
func (ws *writeStream) schedule() error {
	filledOpen := true
	for {
		ws.proofIdle(filledOpen)
		ws.dispatch()
		if ws.over(filledOpen) {
			return nil
		}
		var in <-chan filledChunk
		if filledOpen {
			in = ws.filled
		}
		select {
		case c, ok := <-in:
			if !ok {
				filledOpen = false
				continue
			}
			ws.take(c)
		case r := <-ws.ch:
			if err := ws.reply(r); err != nil {
				return ws.abort(err)
			}
		case l := <-ws.joins:
			ws.join(l)
			if l == nil {
				ws.roundOver()
			}
		case <-ws.wanted(): // dispatch writes the nonce
		case <-ws.readsDrained():
			ws.releaseHeld()
		case <-ws.kick:
		case <-ws.ctx.Done():
			return ws.abort(ctxError(ws.ctx, ""))
		}
	}
}

// over reports whether the upload is done, once dispatch has sent all it may (after a
// refused WRITE, nothing more): the source read, and every WRITE answered.
func (ws *writeStream) over(filledOpen bool) bool {
	if filledOpen || len(ws.reqs) > 0 || ws.nonceID != 0 {
		return false
	}
	return ws.halted || len(ws.resend) == 0 && ws.heldBack == nil
}

// roomy returns the lane with the fewest WRITEs in flight among those that can take
// another: under their cap, and not parked on an exhausted window (maxUnsent).
func (ws *writeStream) roomy() *lane {
	limit := ws.max
	if ws.active > 1 {
		limit = writeLaneCap(ws.size)
	}
	var best *lane
	for _, l := range ws.all[:ws.active] {
		if l.out >= limit || l.unsent.Load() >= maxUnsent {
			continue
		}
		if best == nil || l.out < best.out {
			best = l
		}
	}
	return best
}

// take files a chunk from the producers until its turn comes, or drops it when it
// is not wanted. Data read before a failure to read further is still sent.
func (ws *writeStream) take(c filledChunk) {
	end := c.off + int64(c.n)
	if c.eof || c.err != nil {
		ws.end = min(ws.end, end)
	}
	if c.err != nil {
		ws.srcFail.fail(end, c.err)
	}
	if c.n == 0 || c.off >= ws.end || ws.halted {
		ws.drop(c.buf)
	} else {
		ws.ready[c.off] = c
	}
	if c.err != nil {
		ws.halt() // read no further; what came before the failure still goes out
	}
}

// dispatch hands the chunks that are ready, in offset order, to lanes with room. In
// order, because some servers write only sequentially (rclone without a VFS cache
// refuses a WRITE at any other offset), and ReadAt workers finish out of order. What
// a dead sibling owed goes first.
func (ws *writeStream) dispatch() {
	for !ws.halted {
		var c filledChunk
		resend := len(ws.resend) > 0
		if resend {
			c = ws.resend[0]
		} else {
			var ok bool
			c, ok = ws.ready[ws.nextOff]
			if !ok || c.off >= ws.end || !ws.inSpan(c) {
				return
			}
			if ws.armProof(c) { // held back until the round's siblings are proven
				ws.takeReady(c)
				ws.sumCopy(c)
				continue
			}
		}
		l := ws.laneFor(c)
		if l == nil {
			return
		}
		if resend {
			ws.resend = ws.resend[1:]
		} else {
			ws.takeReady(c)
		}
		held := ws.newHeld(c.buf, !c.untokened, l)
		held.refs.Store(1)
		req := chunk{off: c.off, n: c.n, lane: l}
		if l.sibling {
			held.refs.Store(2)
			req.held = held
		}
		if !resend {
			ws.sumHeld(c, held) // a resend was hashed when it first went out
		}
		id := l.cn.newID()
		ws.reqs[id] = req
		l.out++
		ws.post(l, id, c.off, c.n, held)
		if ws.nextOff-ws.start >= channelWindow {
			// Size unknown, but more than one window already: on a long link one
			// channel is now the limit, so it is worth opening more.
			ws.stripe()
		}
	}
}

// inSpan reports whether c may be written now: it ends no more than W (maxSpan)
// past the acknowledged prefix. Everything sent before it passed the same test
// against a prefix no greater, what a dead sibling owed and the chunk held for a
// proof included, so nothing of the upload lands W or more past the prefix.
func (ws *writeStream) inSpan(c filledChunk) bool {
	return c.off+int64(c.n) <= ws.acked.prefix+ws.span
}

// takeReady takes c, the chunk at nextOff, out of ready.
func (ws *writeStream) takeReady(c filledChunk) {
	delete(ws.ready, c.off)
	ws.nextOff += int64(c.n)
}

// laneFor returns the lane c goes on, or nil when none can take it now.
func (ws *writeStream) laneFor(c filledChunk) *lane {
	if !c.ownLane {
		return ws.roomy()
	}
	own := ws.all[0]
	if own.unsent.Load() >= maxUnsent {
		return nil
	}
	return own
}

// release lets go of h for its writer or for the scheduler; the last one recycles it.
func (ws *writeStream) release(h *heldBuf) {
	if h.refs.Add(-1) != 0 {
		return
	}
	ws.f.c.dataPool.Put(h.buf)
	if h.token {
		ws.putToken()
	}
	h.buf, h.token, h.lane = nil, false, nil
	select {
	case ws.heldFree <- h:
	default:
	}
}

// resendLater takes back a WRITE a dead sibling owed: its data is copied to a fresh
// buffer (the dead lane's writer may still be reading the old one), which takes over
// the old one's place among the buffers, and it goes out again before anything new.
// It keeps its window slot.
func (ws *writeStream) resendLater(req chunk) {
	bp := ws.f.c.dataBuf()
	copy((*bp)[dataOff:dataOff+req.n], (*req.held.buf)[dataOff:dataOff+req.n])
	untokened := !req.held.token
	req.held.token = false // ordered before the last release by the count
	ws.release(req.held)
	ws.resend = append(ws.resend, filledChunk{off: req.off, n: req.n, buf: bp, untokened: untokened})
}

func (ws *writeStream) drop(bp *[]byte) {
	ws.f.c.dataPool.Put(bp)
	ws.putToken()
	<-ws.slots
}

// acquire takes a window slot, a buffer and its slot of the Client's transfer memory
// for the next chunk; false once ctx ends.
func (ws *writeStream) acquire(ctx context.Context) bool {
	select {
	case ws.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	select {
	case ws.bufs <- struct{}{}:
	case <-ctx.Done():
		<-ws.slots
		return false
	}
	if !ws.mem.take(ctx) {
		<-ws.bufs
		<-ws.slots
		return false
	}
	return true
}

// putToken gives back a buffer's token and its slot of the Client's transfer memory.
func (ws *writeStream) putToken() {
	<-ws.bufs // never blocks: the token was taken for this buffer
	ws.mem.put()
}

// recycle returns the buffer of a chunk the upload will not send, with its token:
// the stream is over, so only its slot of the Client's transfer memory matters.
func (ws *writeStream) recycle(c filledChunk) {
	ws.f.c.dataPool.Put(c.buf)
	if !c.untokened {
		ws.mem.put()
	}
}

// stop ends reading: after a failure nothing further is sent.
func (ws *writeStream) stop() {
	ws.halted = true
	ws.halt()
}

// reply files a reply of the transfer: the nonce's WRITE's, or a chunk's (ack).
func (ws *writeStream) reply(r response) error {
	if ws.nonceID != 0 && r.id == ws.nonceID {
		ws.nonceDone(r)
		return nil
	}
	return ws.ack(r)
}

// ack files one WRITE's reply by offset. It returns an error only when the transfer
// cannot go on (the lane's channel died, or a WRITE could not be sent).
func (ws *writeStream) ack(r response) error {
	req, ok := ws.reqs[r.id]
	if !ok {
		r.release()
		return nil
	}
	delete(ws.reqs, r.id)
	req.lane.out--
	if r.err != nil && !ws.aborting && ws.survives(req.lane, r.err) {
		// A sibling died: the transfer goes on without it, and what it owed goes out
		// again on the lanes left (the rest of its requests fail the same way).
		ws.dropLane(req.lane)
		ws.resendLater(req)
		return nil
	}
	<-ws.slots
	if req.held != nil {
		ws.release(req.held)
	}
	if r.err != nil {
		if !ws.aborting {
			ws.fail(req.off, r.err)
		}
		return r.err
	}
	err := expectStatus("WRITE", &r)
	r.release()
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) { // check fails the channel: nothing on it counts
			err = req.lane.cn.check(err)
			ws.fail(req.off, err)
			return err
		}
		ws.fail(req.off, err)
		ws.stop() // the server refused a WRITE: let what is in flight finish
		return nil
	}
	before := ws.acked.prefix
	ws.acked.done(req.off, req.n)
	if ws.f.onAcked != nil && ws.acked.prefix > before {
		ws.f.onAcked(ws.acked.prefix - before)
	}
	ws.moved(req.n)
	return nil
}

// abort gives up on every WRITE in flight. Whether they landed is unknown, so the
// failure is placed at the lowest of them: nothing from there on is reported written.
func (ws *writeStream) abort(cause error) error {
	ws.aborting = true
	ws.stop()
	// Acknowledgements already delivered still count: collect them first, so n does
	// not under-report what the server confirmed.
	if len(ws.reqs) > 0 {
		drainReady(ws.ch, func(r response) bool { ws.reply(r); return len(ws.reqs) > 0 })
	}
	ws.fail(ws.acked.prefix, cause) // nothing is acknowledged past prefix
	return cause
}

// cleanup runs once every goroutine of the transfer has ended: it recycles what it
// holds, withdraws the WRITEs the channels' writers have not started, and makes the
// connections drop the replies nobody will collect. A WRITE a writer is in the middle
// of keeps its buffer until that Write returns (heldBuf.writeDone).
func (ws *writeStream) cleanup() {
	for _, c := range ws.resend {
		ws.recycle(c)
	}
	ws.resend = nil
	for c := range ws.filled {
		ws.recycle(c)
	}
	for off, c := range ws.ready {
		ws.recycle(c)
		delete(ws.ready, off)
	}
	if ws.heldBack != nil {
		ws.recycle(*ws.heldBack)
		ws.heldBack = nil
	}
	if len(ws.reqs) > 0 || ws.nonceID != 0 {
		ids := make(map[*lane][]uint32, len(ws.all))
		for id, req := range ws.reqs {
			ids[req.lane] = append(ids[req.lane], id)
		}
		if ws.nonceID != 0 {
			ids[ws.all[0]] = append(ids[ws.all[0]], ws.nonceID)
			ws.nonceID = 0
		}
		ws.forget(ids)
		for _, req := range ws.reqs {
			if req.held != nil {
				ws.release(req.held) // the scheduler's hold on a sibling's WRITE
			}
		}
		clear(ws.reqs)
	}
}
