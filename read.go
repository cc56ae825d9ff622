package sftp

import (
	"context"
	"io"
	"slices"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The read side. A readStream keeps a window of READs in flight over its lanes and
// files each DATA by the offset it covers. How the data leaves depends on the caller:
//
//   - Read and ReadAt take it in order from the caller's goroutine (read), which also
//     drives the stream: they return between calls, so no goroutine may outlive them;
//   - WriteTo writes w in offset order from the caller's goroutine (a bounded
//     reorder); when w is an io.WriterAt it runs the stream under an errgroup with
//     workers that write each piece at its offset the moment it arrives (no reorder,
//     no head-of-line blocking).
//
// READs are queued from the stream's goroutine for each channel's writer (connwrite.go),
// which sends consecutive ones in one Write.
//
// The end: a READ's EOF ends the stream at its offset, but the stream reports it only
// once every READ still out has answered, since DATA past a reported end contradicts
// it whichever came first (readEnds): the stream then fails at that end. What it hands
// over is always one run from its start: no reader returns a shorter or holed result
// with a nil error.
//
// The size an FSTAT gives (the hint) is not proof of the end: the file may have grown
// or shrunk since, and a server's attributes may be wrong. It only steers: READs go
// out up to it, then the READ at it (the probe, sent with the last of them, so its
// answer comes with theirs rather than a round trip later), and past it one at a
// time. The end is proven only by the probe's EOF with nothing answered past it.
// WriteTo hands w the piece that reaches the hint once the probe has answered
// (awaitEnd): the data is safe to give at any time, but a caller that stops once it
// has the bytes it expected (an HTTP client with Content-Length, whose going away
// closes the File) must find the call already able to return nil, with nothing left
// to wait for.
//
// Span rule (WriteTo into an io.WriterAt, whose pieces land at their offsets in any
// order): no READ is sent whose end is more than W (maxSpan) past what the writers
// have reported written in one run from the start (wrote.prefix), not merely what has
// arrived. So whatever stops the download, the process killed included, nothing is
// written W or more past a prefix that is whole: Resume relies on it (resume.go). The
// other readers hand data over in order and need no bound.
//
// Window rule: requests in flight plus segments held (waiting in order, or handed to
// writers and not yet written) never exceed win, with one exception: when nothing is
// in flight and the window is full of data waiting behind a short DATA's missing
// rest (the bytes at next), the READ for that rest goes out anyway, since nothing
// else would move. Its answer is the segment at next, which leaves the window when it
// is consumed or written, before the exception can apply again: so what a slow
// writer or a missing reply can hold is at most win+1 buffers.

// writeAtWorkers is how many goroutines write an io.WriterAt: enough to keep writing
// while one is in a system call.
const writeAtWorkers = 2

// writtenPiece is a writer's report that it is done with the segment at off: n of its
// bytes reached w.
type writtenPiece struct {
	off int64
	n   int
}

// readStream reads a file from an offset; see the window rule above.
type readStream struct {
	lanes
	op    string // the entry point the errors of writeTo and writeAt name
	size  int    // bytes per READ; lowered when the server returns less than asked
	next  int64  // offset of the next byte to yield
	issue int64  // offset of the next READ to send
	limit int64  // end of the range to read, or -1 for "to EOF"
	win   int    // current window; grows by one per segment yielded, up to max
	max   int

	reqs map[uint32]chunk
	segs map[int64]segment // received and not yet yielded, by offset
	redo []chunk           // rests of short DATAs still to ask for
	cur  segment           // segment being consumed by read

	ends         readEnds // where the replies say the file ends (s.ends.eof: -1, or the lowest EOF)
	firstFailure          // other than EOF
	hint         int64    // file size from FSTAT, or -1: past it one READ at a time
	statID       uint32   // FSTAT in flight, or 0
	pkt          []byte   // encoding buffer for READs, reused (the channel copies it)

	// On a link slow enough to stripe, each lane keeps only readLaneCap READs at the
	// server.
	capped  bool
	laneCap int

	// With writer goroutines (WriteTo to an io.WriterAt).
	span    int64             // W (maxSpan): no READ reaches span past wrote.prefix
	out     chan segment      // to the writers
	written chan writtenPiece // from the writers
	held    int               // segments handed to writers and not yet reported
	direct  bool              // w is an io.WriterAt: segments go out as they arrive
	arrived prefixTracker     // direct: what has arrived, by offset; next is its prefix
	wrote   prefixTracker     // what the writers reported, by offset
	// sum, with Verify, hashes what the writers wrote, in offset order (sumfeed.go): a
	// piece is reported written once hashed too.
	sum *sumFeed

	// mem is the stream's part of the Client's transfer memory (transfermemory.go): a
	// slot for each buffer counted by slotsInUse.
	mem memShare
}

// newReadStream starts reading at off. With stat, an FSTAT goes out alongside the first
// READ: its size keeps small files from being read far past their end and tells
// whether to stripe, at no extra round trip; a server that refuses it just leaves the
// hint unknown.
func (f *File) newReadStream(ctx context.Context, off, limit int64, win int, stat bool) *readStream {
	window := f.window()
	size := f.c.readSize()
	if limit >= 0 {
		// A range never has more READs in flight than it has chunks (the rest of a
		// short DATA takes its chunk's place), so a small ReadAt needs no window's
		// worth of maps and channel: iotest.TestReader's 40,000 one-byte ReadAts
		// allocated 26 KiB each before (192 KiB each where the Client stripes).
		window = int(min(int64(window), (limit-off+int64(size)-1)/int64(size)+1))
	}
	s := &readStream{
		lanes: f.newLanes(ctx, window, sshfx.FlagRead, false),
		size:  size, next: off, issue: off, limit: limit,
		win: min(win, window), max: window,
		reqs: make(map[uint32]chunk, window),
		segs: make(map[int64]segment, window),
		ends: newReadEnds(), hint: -1, op: "writeto",
	}
	s.mem.join(f.c)
	if f.c.stripes() {
		s.capped = true
		s.laneCap = readLaneCap(s.size)
	}
	if stat {
		id := f.cn.newID()
		s.pkt = appendString1(s.pkt[:0], sshfx.TypeFstat, id, f.handle) // copied: reused for READs
		if err := f.startInto(ctx, f.cn, s.pkt, nil, s.ch); err != nil {
			s.fail(off, err)
		} else {
			s.statID = id
		}
	}
	if limit-off >= f.c.minStripe() {
		s.stripe()
	}
	return s
}

// readSize is the READ length to start a transfer with.
func (c *Client) readSize() int {
	n := c.limits.MaxRead
	if learned := int(c.readCap.Load()); learned > 0 && learned < n {
		n = learned
	}
	return n
}

// stopAt is the offset past which nothing is asked for.
func (s *readStream) stopAt() int64 {
	end := int64(1<<63 - 1)
	if s.limit >= 0 {
		end = s.limit
	}
	if s.ends.eof >= 0 {
		end = min(end, s.ends.eof)
	}
	if s.err != nil {
		end = min(end, s.errAt)
	}
	return end
}

// inWindow counts what the window rule bounds.
func (s *readStream) inWindow() int { return len(s.reqs) + len(s.segs) + s.held }

// slotsInUse counts the buffers the stream holds, for its share of the Client's
// transfer memory: what the window bounds, and the segment being consumed.
func (s *readStream) slotsInUse() int {
	n := s.inWindow()
	if s.cur.resp.buf != nil {
		n++
	}
	return n
}

// roomFor reports whether the Client's transfer memory has a slot for one more READ.
func (s *readStream) roomFor() bool { return s.mem.ensure(s.slotsInUse() + 1) }

// gaveBack returns to the Client's transfer memory the slots of buffers consumed.
func (s *readStream) gaveBack() { s.mem.trim(s.slotsInUse()) }

// fill sends READs while the window has room: first the rests of short DATAs, then
// new ranges.
func (s *readStream) fill() {
	if s.fillRedo() {
		s.fillNew()
	}
}

// fillRedo sends the rests of short DATAs and what dead siblings owed, under the
// window rule. It reports false when a send failed the stream.
func (s *readStream) fillRedo() bool {
	for len(s.redo) > 0 {
		i := 0
		if s.inWindow() >= s.win || !s.roomFor() {
			// The exception of the window rule: only the rest that the data held is
			// waiting for, and only with nothing in flight or at a writer that could
			// free room. The same goes when the Client's transfer memory has no slot
			// for it: the segments held wait for this one.
			i = slices.IndexFunc(s.redo, func(c chunk) bool { return c.off == s.next })
			if len(s.reqs) > 0 || s.held > s.parked() || i < 0 {
				return true
			}
		}
		req := s.redo[i]
		s.redo = slices.Delete(s.redo, i, i+1)
		if req.off >= s.stopAt() {
			continue
		}
		if !s.send(req) {
			return false
		}
	}
	return true
}

// fillNew sends READs of new ranges while the window has room.
func (s *readStream) fillNew() {
	for s.inWindow() < s.win && s.issue < s.stopAt() {
		if s.sizeUnsure() && len(s.reqs) > 0 && !s.probeDue() {
			return // until the FSTAT answers, and past the size it gave, one READ at a time
		}
		n := int(min(int64(s.size), s.stopAt()-s.issue))
		if s.hint > s.issue {
			n = int(min(int64(n), s.hint-s.issue)) // the last one ends at the hint: the probe follows it
		}
		if s.capped && s.pick().out >= s.laneCap {
			return // every lane has what keeps its window full; more would only queue
		}
		if s.direct && s.issue+int64(n) > s.wrote.prefix+s.span {
			return // the span bound: see maxSpan
		}
		if !s.roomFor() {
			return // the Client's transfer memory: asked again at the next event
		}
		if !s.send(chunk{off: s.issue, n: n}) {
			return
		}
		s.issue += int64(n)
		if s.issue-s.next >= s.f.c.minStripe() && s.hint < 0 {
			s.stripe() // no size known, but it is turning out large
		}
	}
}

// sizeUnsure reports whether the stream is reading where it does not know the file
// goes on: before the FSTAT has answered, or past the size it gave.
func (s *readStream) sizeUnsure() bool {
	return s.statID != 0 || (s.hint >= 0 && s.issue >= s.hint)
}

// probeDue reports whether the next READ is the probe: the one at the size the FSTAT
// gave, which should find EOF. It goes out with the READs before it.
func (s *readStream) probeDue() bool {
	return s.statID == 0 && s.hint >= 0 && s.issue == s.hint
}

// awaitEnd is called by WriteTo when the segment it is about to hand over ends at the
// size the FSTAT gave: it waits for the probe's answer first (see the package
// comment), or for DATA at that size, or for a failure, so that once the last byte is
// handed over the call returns at once. It proves nothing itself: what step returns
// next is decided by readEnds exactly as without it, so nil still needs the probe's
// EOF and every READ past the end answered without DATA.
func (s *readStream) awaitEnd() {
	if s.hint < 0 || s.next != s.hint {
		return
	}
	for s.ends.eof < 0 && s.err == nil {
		if _, ok := s.segs[s.next]; ok {
			return // the file goes on past the hint
		}
		s.fill()
		if !s.more() {
			return
		}
	}
}

func (s *readStream) send(req chunk) bool {
	for {
		req.lane = s.pick()
		cn := req.lane.cn
		id := cn.newID()
		s.pkt = appendRead(s.pkt[:0], id, req.lane.handle, uint64(req.off), uint32(req.n))
		err := s.f.startInto(s.ctx, cn, s.pkt, nil, s.ch)
		if err == nil {
			req.lane.out++
			s.reqs[id] = req
			return true
		}
		if !s.survives(req.lane, err) || !s.dropLane(req.lane) {
			s.fail(req.off, err)
			return false
		}
		// A sibling that died: the lanes left take the READ.
	}
}

// more waits for one event (a reply, a new lane, a writer's report, or the end of
// s.ctx) and handles it. It reports false when nothing is outstanding, so waiting
// would block forever.
func (s *readStream) more() bool {
	if len(s.reqs) == 0 && s.statID == 0 && s.held == 0 {
		return false
	}
	select {
	case r := <-s.ch:
		s.onReply(r)
	case l := <-s.joins:
		s.join(l)
	case w := <-s.written:
		s.held--
		s.wrote.done(w.off, w.n)
	case <-s.parkedWake():
		// A piece parked for hashing: the window rule's exception may apply now.
	case <-s.ctx.Done():
		s.fail(s.next, ctxError(s.ctx, ""))
		s.abandon()
	}
	s.gaveBack()
	return true
}

// onReply files one reply of the stream: the FSTAT's, or a READ's.
func (s *readStream) onReply(r response) {
	if r.id == s.statID {
		s.onStat(r)
		return
	}
	req, ok := s.reqs[r.id]
	if !ok { // cannot happen: only this stream's ids are registered on s.ch
		r.release()
		return
	}
	delete(s.reqs, r.id)
	req.lane.out--
	if s.unproven(req, &r) { // reopen.go
		return
	}
	switch {
	case r.err != nil:
		s.onLaneDied(req, r.err)
	case r.typ != sshfx.TypeData:
		s.onNotData(req, r)
	default:
		s.onData(req, r)
	}
}

// onStat takes the FSTAT's answer as the hint of the file's size.
func (s *readStream) onStat(r response) {
	defer r.release()
	s.statID = 0
	if r.err != nil {
		return
	}
	a, err := decodeAttrs("FSTAT", &r)
	if err != nil || !a.Has(sshfx.AttrSize) {
		s.f.c.noteFstatRefused(err) // serveropts.go
		s.f.cn.check(err)           // a refused FSTAT is fine; a malformed one is not
		return
	}
	s.hint = int64(min(a.Size, 1<<62))
	if a.Has(sshfx.AttrPermissions) && a.Permissions&unixTypeMask == unixDir {
		// A directory opened as a file (OpenSSH allows it): what its READs fail with
		// (a bare FAILURE) says nothing, so the read fails as os.File's would.
		if s.err == nil || s.errAt > s.next {
			s.err, s.errAt = syscall.EISDIR, s.next
		}
		return
	}
	if s.hint-s.next >= s.f.c.minStripe() {
		s.stripe()
	}
}

// onLaneDied handles a READ whose channel died before it was answered.
func (s *readStream) onLaneDied(req chunk, err error) {
	if !s.survives(req.lane, err) {
		s.fail(req.off, err)
		return
	}
	// A sibling: the transfer goes on without it, asking again on the lanes left
	// for what it owed (fill sends it, under the window rule).
	s.dropLane(req.lane)
	s.redo = append(s.redo, chunk{off: req.off, n: req.n})
}

// onNotData handles a READ answered by something other than DATA: EOF, a failure,
// or a reply of the wrong type (which fails the channel).
func (s *readStream) onNotData(req chunk, r response) {
	err := otherReply("READ", &r, sshfx.TypeData)
	r.release()
	if err == io.EOF {
		s.ends.sawEOF(req.off)
		s.checkEnd()
		return
	}
	s.fail(req.off, req.lane.cn.check(err))
}

// onData files the DATA answering req.
func (s *readStream) onData(req chunk, r response) {
	data, err := decodeData(&r)
	if err == nil && len(data) > req.n {
		err = protoErr("READ", "DATA of %d bytes for a READ of %d", len(data), req.n)
	} else if err == nil && len(data) == 0 {
		err = protoErr("READ", "empty DATA for a READ of %d bytes", req.n)
	}
	if err != nil {
		r.release()
		s.fail(req.off, req.lane.cn.check(err))
		return
	}
	if req.capGuess > 0 && req.capGuess < s.size {
		// The READ before this one came back short, yet the file went on: that was
		// the server's read cap (32 KiB rclone, 64512 MINA, 64 KiB old OpenSSH).
		// Later READs ask for no more, so they are not cut short again.
		s.size = max(req.capGuess, minDataSize)
		s.f.c.learnReadCap(int64(s.size))
	}
	s.moved(len(data))
	s.ends.sawData(req.off, int64(len(data)))
	s.checkEnd()
	if got := len(data); got < req.n {
		// Ask for the rest (fill does, under the window rule). Whether this was a cap
		// or the end of the file is known only from that READ's answer, so nothing
		// is learned yet.
		s.redo = append(s.redo, chunk{off: req.off + int64(got), n: req.n - got, capGuess: got})
	}
	s.file(segment{off: req.off, data: data, resp: r})
}

// checkEnd fails the stream at the reported end of the file if DATA came from past it
// (readEnds): everything before that end is handed over first, then the error.
func (s *readStream) checkEnd() {
	if err := s.ends.conflict(); err != nil {
		s.fail(s.ends.eof, err)
	}
}

// file keeps a segment until it can be yielded; a direct stream hands it to the
// writers at once.
func (s *readStream) file(seg segment) {
	if !s.direct {
		s.segs[seg.off] = seg
		return
	}
	if seg.off >= s.stopAt() { // past a failure: not wanted
		seg.resp.release()
		return
	}
	s.arrived.done(seg.off, len(seg.data))
	s.next = s.arrived.prefix
	s.held++
	s.out <- seg // never blocks: out has room for the whole window
}

// read copies the next bytes in order into p; it returns io.EOF at the end of the file
// (or of the range), and the failure once the data before it has been yielded.
func (s *readStream) read(p []byte) (int, error) {
	if len(s.cur.data) == 0 {
		if err := s.advance(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.cur.data)
	s.cur.data = s.cur.data[n:]
	if len(s.cur.data) == 0 {
		s.cur.resp.release()
		s.gaveBack()
	}
	return n, nil
}

// advance makes s.cur the segment at s.next, waiting for it if need be.
func (s *readStream) advance() error {
	for {
		if seg, ok := s.segs[s.next]; ok {
			delete(s.segs, s.next)
			s.next += int64(len(seg.data))
			s.cur = seg
			if s.win < s.max {
				s.win++
			}
			return nil
		}
		if err := s.step(); err != nil {
			return err
		}
	}
}

// step is one turn of the stream once the segment at next is not there: the outcome
// if the stream is over, else it sends what the window allows and waits for an event.
func (s *readStream) step() error {
	if s.err != nil && s.next >= s.errAt {
		return s.err
	}
	if s.next >= s.stopAt() {
		if len(s.reqs) == 0 {
			return io.EOF
		}
		// The end is reached, but READs past it are still out (a window sent before
		// the EOF came back): their answers are awaited, since DATA in any of them
		// contradicts that end (checkEnd).
		s.more()
		return nil
	}
	s.fill()
	if !s.more() {
		// Nothing in flight and nothing to yield: only a failure to send gets here.
		if s.err != nil {
			return s.err
		}
		return io.ErrNoProgress
	}
	return nil
}

// writeTo hands the data to w in offset order, from the stream's own goroutine: it
// returns the bytes w took, and w's error bare. Handing the data to a writer goroutine
// instead costs two channel hops per piece, which measured slower (bench_server_test's
// WriteTo against the in-process server) for the writers this path mostly meets
// (io.Discard, a bytes.Buffer, a pipe), and a file goes to writeAt anyway.
func (s *readStream) writeTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := s.advance(); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, s.f.err(s.op, err)
		}
		s.awaitEnd()
		n, err := w.Write(s.cur.data)
		total += int64(n)
		if err == nil && n < len(s.cur.data) {
			err = io.ErrShortWrite
		}
		s.cur.data = nil
		s.cur.resp.release()
		s.gaveBack()
		if err != nil {
			return total, err
		}
	}
}

// writeAt hands each piece to writer goroutines the moment it arrives, to be written
// at its offset in wa (base is where the stream's start goes): no reorder, no
// head-of-line blocking. It returns the bytes written in one run from the start, and
// wa's error bare.
func (s *readStream) writeAt(wa io.WriterAt, base int64) (int64, error) {
	start := s.next
	g, gctx := errgroup.WithContext(s.ctx)
	s.ctx = gctx
	s.out = make(chan segment, s.max+1)
	s.written = make(chan writtenPiece, s.max+1)
	s.wrote = newPrefixTracker(start, s.max)
	s.direct, s.arrived = true, newPrefixTracker(start, s.max)
	s.span = s.f.c.span()
	s.startSum(wa)
	for range writeAtWorkers {
		g.Go(func() error { return s.writePieces(gctx, wa, base-start) })
	}
	var err error
	for err == nil {
		err = s.step()
	}
	close(s.out)
	werr := g.Wait()
	if s.sum != nil {
		s.sum.close() // what it held is reported now
	}
	for seg := range s.out { // never taken by a writer
		seg.resp.release()
		s.held--
	}
	for s.held > 0 {
		w := <-s.written
		s.held--
		s.wrote.done(w.off, w.n)
	}
	n := s.wrote.prefix - start
	if werr != nil {
		return n, werr
	}
	if err == io.EOF {
		return n, nil
	}
	return n, s.f.err(s.op, err)
}

// writePieces is a writer of writeAt: it writes each piece it takes at its offset
// plus shift in wa, and reports it (with Verify, the sum feed does, once it is hashed
// too), until out is closed or ctx ends.
func (s *readStream) writePieces(ctx context.Context, wa io.WriterAt, shift int64) error {
	for {
		var seg segment
		select {
		case seg = <-s.out:
		case <-ctx.Done():
			return nil
		}
		if seg.data == nil { // out was closed
			return nil
		}
		n, err := wa.WriteAt(seg.data, seg.off+shift)
		if s.sum != nil && err == nil {
			s.sum.put(sumPiece{off: seg.off, data: seg.data, seg: seg, n: n}) // reports it once hashed
			continue
		}
		seg.resp.release()
		s.written <- writtenPiece{off: seg.off, n: n} // room: one per segment
		if err != nil {
			return err
		}
	}
}

// startSum starts hashing what the writers write when wa carries a running sum
// (Verify): a piece is then reported written once it is hashed too.
func (s *readStream) startSum(wa io.WriterAt) {
	if rs := sumOf(wa); rs != nil {
		s.sum = startSumFeed(rs, s.max+1, func(p sumPiece) {
			p.seg.resp.release()
			s.written <- writtenPiece{off: p.off, n: p.n}
		})
	}
}

// parked counts the pieces held that wait for an earlier one to be hashed (Verify):
// no writer can free them, so the window rule's exception counts them as stuck.
func (s *readStream) parked() int {
	if s.sum == nil {
		return 0
	}
	return int(s.sum.parked.Load())
}

// parkedWake is the channel that says a piece was parked for hashing; nil without
// Verify.
func (s *readStream) parkedWake() <-chan struct{} {
	if s.sum == nil {
		return nil
	}
	return s.sum.parkedWake
}

// abandon forgets everything in flight: late replies are dropped by the reader.
func (s *readStream) abandon() {
	ids := make(map[*lane][]uint32, len(s.all))
	for id, req := range s.reqs {
		ids[req.lane] = append(ids[req.lane], id)
	}
	if s.statID != 0 {
		ids[s.all[0]] = append(ids[s.all[0]], s.statID)
	}
	clear(s.reqs)
	s.redo = nil
	s.statID = 0
	s.forget(ids)
}

// close releases what the stream holds and closes the handles it opened.
func (s *readStream) close() {
	s.abandon()
	s.finish() // errors closing a read handle change nothing for the caller
	s.cur.resp.release()
	s.cur = segment{}
	for off, seg := range s.segs {
		seg.resp.release()
		delete(s.segs, off)
	}
	s.mem.leave()
}
