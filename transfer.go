package sftp

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The transfer engine. A readStream keeps a window of READs in flight and yields the
// data in offset order; a writeStream (upload.go) keeps a window of WRITEs in flight.
// Neither starts goroutines to move data: each collects every reply of the transfer,
// from every lane (stripe.go), on one Go channel with room for all it keeps in flight,
// and the caller's goroutine sends and collects. So no channel's reader ever blocks,
// and memory is bounded by the window whatever the file size.

// segment is received data not yet consumed; it keeps the reply (and so its pooled
// buffer) alive until then.
type segment struct {
	data []byte
	resp response
}

// chunk is one READ or WRITE in flight: its place in the file and its lane.
type chunk struct {
	off  int64
	n    int
	lane *lane
	// capGuess is set on a READ for the rest of a short DATA: the length that DATA
	// had. If this READ gets data too, the short one was the server's read cap, not
	// the end of the file.
	capGuess int
}

var errFileClosed = fmt.Errorf("sftp: file closed during the transfer: %w", fs.ErrClosed)

// window is how many requests a transfer keeps in flight: the configured depth, and
// enough per lane to fill a 2 MiB channel window when striping.
func (c *Client) window() int {
	w := c.opts.maxInflight
	if c.stripes() {
		w = max(w, c.opts.channels*12)
	}
	return w
}

// readStream reads a file sequentially from an offset.
//
// Window rule: requests in flight plus segments held never exceed win, so a slow or
// missing reply cannot make held data grow without bound.
type readStream struct {
	lanes
	size  int   // bytes per READ; lowered when the server returns less than asked
	next  int64 // offset of the next byte to yield
	issue int64 // offset of the next READ to send
	limit int64 // end of the range to read, or -1 for "to EOF"
	win   int   // current window; grows by one per segment yielded, up to max
	max   int

	reqs map[uint32]chunk
	segs map[int64]segment
	cur  segment // segment being consumed

	eof          int64  // lowest offset a READ got EOF for, or -1
	firstFailure        // other than EOF
	hint         int64  // file size from FSTAT, or -1: past it one READ at a time
	statID       uint32 // FSTAT in flight, or 0
	pkt          []byte // encoding buffer for READs, reused (the channel copies it)

	// On a link slow enough to stripe, each lane keeps only about 1.5 windows of READs
	// at the server: enough to keep its window full, while a deeper queue on the first
	// lane would hold back, in offset order, everything the lanes joining later bring.
	capped  bool
	laneCap int
}

// newReadStream starts reading at off. With stat, an FSTAT goes out alongside the first
// READ: its size keeps small files from being read far past their end and tells
// whether to stripe, at no extra round trip; a server that refuses it just leaves the
// hint unknown.
func (f *File) newReadStream(off, limit int64, win int, stat bool) *readStream {
	window := f.window()
	s := &readStream{
		lanes: f.newLanes(window, sshfx.FlagRead),
		size:  f.c.readSize(), next: off, issue: off, limit: limit,
		win: min(win, window), max: window,
		reqs: make(map[uint32]chunk, window),
		segs: make(map[int64]segment, window),
		eof:  -1, hint: -1,
	}
	if f.c.stripes() {
		s.capped = true
		s.laneCap = max(2, channelWindow*3/2/(s.size+packetSlack))
	}
	if stat {
		id := f.cn.newID()
		if err := f.send(f.cn, id, appendString1(nil, sshfx.TypeFstat, id, f.handle), s.ch); err != nil {
			s.fail(off, err)
		} else {
			s.statID = id
		}
	}
	if limit-off >= stripeMin {
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

// firstFailure keeps the failure at the lowest offset: everything before it is good,
// and it is what the caller gets once that good part has been handed over.
type firstFailure struct {
	err   error
	errAt int64
}

func (f *firstFailure) fail(at int64, err error) {
	if f.err == nil || at < f.errAt {
		f.err, f.errAt = err, at
	}
}

// stopAt is the offset past which nothing is asked for.
func (s *readStream) stopAt() int64 {
	end := int64(1<<63 - 1)
	if s.limit >= 0 {
		end = s.limit
	}
	if s.eof >= 0 {
		end = min(end, s.eof)
	}
	if s.err != nil {
		end = min(end, s.errAt)
	}
	return end
}

// fill sends READs while the window has room.
func (s *readStream) fill() {
	for len(s.reqs)+len(s.segs) < s.win && s.issue < s.stopAt() {
		// Until the FSTAT answers, and past the size it gave, one READ at a time.
		if (s.statID != 0 || (s.hint >= 0 && s.issue >= s.hint)) && len(s.reqs) > 0 {
			return
		}
		n := int(min(int64(s.size), s.stopAt()-s.issue))
		if s.capped && s.pick().out >= s.laneCap {
			return // every lane has what keeps its window full; more would only queue
		}
		if !s.send(chunk{off: s.issue, n: n}) {
			return
		}
		s.issue += int64(n)
		if s.issue-s.next >= stripeMin && s.hint < 0 {
			s.stripe() // no size known, but it is turning out large
		}
	}
}

func (s *readStream) send(req chunk) bool {
	req.lane = s.pick()
	cn := req.lane.cn
	id := cn.newID()
	s.pkt = appendRead(s.pkt[:0], id, req.lane.handle, uint64(req.off), uint32(req.n))
	if err := s.f.send(cn, id, s.pkt, s.ch); err != nil {
		s.fail(req.off, err)
		return false
	}
	req.lane.out++
	s.reqs[id] = req
	return true
}

// more waits for one event (a reply, a new lane, or Close) and handles it. It reports
// false when nothing is in flight, so waiting would block forever.
func (s *readStream) more() bool {
	if len(s.reqs) == 0 && s.statID == 0 {
		return false
	}
	select {
	case r := <-s.ch:
		s.handle(r)
	case l := <-s.joins:
		s.join(l)
	case <-s.f.ctx.Done():
		s.fail(s.next, errFileClosed)
		s.abandon()
	}
	return true
}

func (s *readStream) handle(r response) {
	if r.id == s.statID {
		s.statID = 0
		if r.err == nil {
			a, err := decodeAttrs("FSTAT", &r)
			if err == nil && a.Has(sshfx.AttrSize) {
				s.hint = int64(min(a.Size, 1<<62))
				if s.hint-s.next >= stripeMin {
					s.stripe()
				}
			} else {
				s.f.cn.check(err) // a refused FSTAT is fine; a malformed one is not
			}
		}
		r.release()
		return
	}
	req, ok := s.reqs[r.id]
	if !ok { // cannot happen: only this stream's ids are registered on s.ch
		r.release()
		return
	}
	delete(s.reqs, r.id)
	req.lane.out--
	cn := req.lane.cn
	if r.err != nil { // the lane's channel died: the transfer fails with it
		s.fail(req.off, r.err)
		return
	}
	if r.typ != sshfx.TypeData {
		err := otherReply("READ", &r, sshfx.TypeData)
		r.release()
		if err == io.EOF {
			if s.eof < 0 || req.off < s.eof {
				s.eof = req.off
			}
			return
		}
		s.fail(req.off, cn.check(err))
		return
	}
	data, err := decodeData(&r)
	if err == nil && len(data) > req.n {
		err = protoErr("READ", "DATA of %d bytes for a READ of %d", len(data), req.n)
	} else if err == nil && len(data) == 0 {
		err = protoErr("READ", "empty DATA for a READ of %d bytes", req.n)
	}
	if err != nil {
		r.release()
		s.fail(req.off, cn.check(err))
		return
	}
	s.segs[req.off] = segment{data: data, resp: r}
	if req.capGuess > 0 && req.capGuess < s.size {
		// The READ before this one came back short, yet the file went on: that was
		// the server's read cap (32 KiB rclone, 64512 MINA, 64 KiB old OpenSSH).
		// Later READs ask for no more, so they are not cut short again.
		s.size = max(req.capGuess, minDataSize)
		s.f.c.readCap.Store(int64(s.size))
	}
	if got := len(data); got < req.n {
		// Ask for the rest at once. Whether this was a cap or the end of the file is
		// known only from that READ's answer, so nothing is learned yet.
		end := req.off + int64(got)
		if end < s.stopAt() {
			s.send(chunk{off: end, n: req.n - got, capGuess: got})
		}
	}
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
		if s.err != nil && s.next >= s.errAt {
			return s.err
		}
		if s.next >= s.stopAt() {
			return io.EOF
		}
		s.fill()
		if !s.more() {
			// Nothing in flight and nothing to yield: only a failure to send gets here.
			if s.err != nil {
				return s.err
			}
			return io.ErrNoProgress
		}
	}
}

// writeTo hands every segment to w in order, without copying.
func (s *readStream) writeTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := s.advance(); err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, s.f.err("read", err)
		}
		n, err := w.Write(s.cur.data)
		total += int64(n)
		s.cur.data = nil
		s.cur.resp.release()
		if err != nil {
			return total, err
		}
	}
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
}
