package sftp

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The transfer engine. A readStream keeps a window of READs in flight over one
// channel and yields the data in offset order; a writeStream keeps a window of WRITEs in
// flight. Neither starts goroutines: each registers one reply channel, with room for
// every request it keeps in flight, for all of its requests, and the caller's goroutine
// sends and collects. So the channel's reader never blocks, and memory is bounded by
// the window whatever the file size.

// segment is received data not yet consumed; it keeps the reply (and so its pooled
// buffer) alive until then.
type segment struct {
	data []byte
	resp response
}

type readReq struct {
	off int64
	n   int
	// capGuess is set on a READ for the rest of a short DATA: the length that DATA
	// had. If this READ gets data too, the short one was the server's read cap, not
	// the end of the file.
	capGuess int
}

// readStream reads a file sequentially from an offset.
//
// Window rule: requests in flight plus segments held never exceed win, so a slow or
// missing reply cannot make held data grow without bound.
type readStream struct {
	f     *File
	cn    *conn
	ch    chan response
	size  int   // bytes per READ; lowered when the server returns less than asked
	next  int64 // offset of the next byte to yield
	issue int64 // offset of the next READ to send
	limit int64 // end of the range to read, or -1 for "to EOF"
	win   int   // current window; grows by one per segment yielded, up to max
	max   int

	reqs map[uint32]readReq
	segs map[int64]segment
	cur  segment // segment being consumed

	eof    int64 // lowest offset a READ got EOF for, or -1
	err    error // first failure other than EOF, at errAt
	errAt  int64
	hint   int64  // file size from FSTAT, or -1: past it one READ at a time
	statID uint32 // FSTAT in flight, or 0
	pkt    []byte // encoding buffer for READs, reused (the channel copies it)
}

// newReadStream starts reading at off. With stat, an FSTAT goes out alongside the first
// READ: its size keeps small files from being read far past their end, at no extra
// round trip; a server that refuses it just leaves the hint unknown.
func (f *File) newReadStream(cn *conn, off, limit int64, win int, stat bool) *readStream {
	s := &readStream{
		f: f, cn: cn, size: f.c.readSize(), next: off, issue: off, limit: limit,
		win: win, max: f.c.opts.maxInflight,
		ch:   make(chan response, f.c.opts.maxInflight+1),
		reqs: make(map[uint32]readReq, f.c.opts.maxInflight),
		segs: make(map[int64]segment, f.c.opts.maxInflight),
		eof:  -1, hint: -1,
	}
	if stat {
		id := cn.newID()
		if err := cn.send(id, appendString1(nil, sshfx.TypeFstat, id, f.handle), s.ch); err != nil {
			s.fail(off, err)
		} else {
			s.statID = id
		}
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

func (s *readStream) fail(at int64, err error) {
	if s.err == nil || at < s.errAt {
		s.err, s.errAt = err, at
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
		if !s.sendRead(s.issue, n) {
			return
		}
		s.issue += int64(n)
	}
}

func (s *readStream) sendRead(off int64, n int) bool {
	return s.sendReadReq(readReq{off: off, n: n})
}

func (s *readStream) sendReadReq(req readReq) bool {
	id := s.cn.newID()
	s.pkt = appendRead(s.pkt[:0], id, s.f.handle, uint64(req.off), uint32(req.n))
	if err := s.cn.send(id, s.pkt, s.ch); err != nil {
		s.fail(req.off, err)
		return false
	}
	s.reqs[id] = req
	return true
}

// more waits for one reply and files it. It reports false when nothing is in flight.
func (s *readStream) more() bool {
	if len(s.reqs) == 0 && s.statID == 0 {
		return false
	}
	select {
	case r := <-s.ch:
		s.handle(r)
	case <-s.cn.done:
		select {
		case r := <-s.ch:
			s.handle(r)
		default:
			s.fail(s.next, s.cn.err)
			s.forget()
		}
	case <-s.f.ctx.Done():
		s.fail(s.next, errFileClosed)
		s.forget()
	}
	return true
}

var errFileClosed = fmt.Errorf("sftp: file closed during the transfer: %w", fs.ErrClosed)

func (s *readStream) handle(r response) {
	if r.id == s.statID {
		s.statID = 0
		if a, err := decodeAttrs("FSTAT", &r); err == nil && a.Has(sshfx.AttrSize) {
			s.hint = int64(min(a.Size, 1<<62))
		} else {
			s.cn.check(err) // a refused FSTAT is fine; a malformed one is not
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
	if r.typ != sshfx.TypeData {
		err := otherReply("READ", &r, sshfx.TypeData)
		r.release()
		if err == io.EOF {
			if s.eof < 0 || req.off < s.eof {
				s.eof = req.off
			}
			return
		}
		s.fail(req.off, s.cn.check(err))
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
		s.fail(req.off, s.cn.check(err))
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
			s.sendReadReq(readReq{off: end, n: req.n - got, capGuess: got})
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

// forget abandons everything in flight: late replies are dropped by the reader.
func (s *readStream) forget() {
	ids := make([]uint32, 0, len(s.reqs)+1)
	for id := range s.reqs {
		ids = append(ids, id)
	}
	if s.statID != 0 {
		ids = append(ids, s.statID)
	}
	clear(s.reqs)
	s.statID = 0
	s.cn.forget(ids, s.ch)
}

// close releases what the stream holds. It does not wait for replies in flight.
func (s *readStream) close() {
	s.forget()
	s.cur.resp.release()
	s.cur = segment{}
	for off, seg := range s.segs {
		seg.resp.release()
		delete(s.segs, off)
	}
}

// writeStream writes sequentially from an offset with a window of WRITEs in flight.
type writeStream struct {
	f     *File
	cn    *conn
	ch    chan response
	start int64
	reqs  map[uint32]readReq
	err   error // first failed WRITE (lowest offset), at errAt
	errAt int64
}

func (f *File) newWriteStream(cn *conn, off int64) *writeStream {
	return &writeStream{
		f: f, cn: cn, start: off,
		ch:   make(chan response, f.c.opts.maxInflight),
		reqs: make(map[uint32]readReq, f.c.opts.maxInflight),
	}
}

// copyFrom reads src straight into WRITE packets (the header is reserved in front, so
// the payload is never copied again) until src ends or a WRITE fails. It returns the
// bytes the server acknowledged from the start offset, all before the first failure.
func (ws *writeStream) copyFrom(src io.Reader) (int64, error) {
	c := ws.f.c
	size := c.limits.MaxWrite
	off := ws.start
	var srcErr error
	for ws.err == nil {
		if len(ws.reqs) >= c.opts.maxInflight && !ws.more() {
			break
		}
		if ws.err != nil {
			break
		}
		bp := c.dataBuf()
		id := ws.cn.newID()
		hdr := len(appendWriteHeader((*bp)[:0], id, ws.f.handle, uint64(off), size))
		n, err := io.ReadFull(src, (*bp)[hdr:hdr+size])
		if n > 0 {
			if n < size { // the last piece: rewrite the header for its real length
				appendWriteHeader((*bp)[:0], id, ws.f.handle, uint64(off), n)
			}
			if serr := ws.cn.send(id, (*bp)[:hdr+n], ws.ch); serr != nil {
				ws.fail(off, serr)
			} else {
				ws.reqs[id] = readReq{off: off, n: n}
			}
			off += int64(n)
		}
		c.dataPool.Put(bp)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			srcErr = err
			break
		}
	}
	for ws.more() {
	}
	if ws.err != nil {
		return ws.errAt - ws.start, ws.f.err("write", ws.err)
	}
	return off - ws.start, srcErr
}

func (ws *writeStream) fail(at int64, err error) {
	if ws.err == nil || at < ws.errAt {
		ws.err, ws.errAt = err, at
	}
}

// more waits for one acknowledgement; false when nothing is in flight.
func (ws *writeStream) more() bool {
	if len(ws.reqs) == 0 {
		return false
	}
	var r response
	select {
	case r = <-ws.ch:
	case <-ws.cn.done:
		select {
		case r = <-ws.ch:
		default:
			ws.abort(ws.cn.err)
			return false
		}
	case <-ws.f.ctx.Done():
		ws.abort(errFileClosed)
		return false
	}
	req := ws.reqs[r.id]
	delete(ws.reqs, r.id)
	if err := expectStatus("WRITE", &r); err != nil {
		ws.fail(req.off, ws.cn.check(err))
	}
	r.release()
	return true
}

// abort gives up on every WRITE in flight. Whether they landed is unknown, so the
// failure is placed at the lowest of them: nothing from there on is reported written.
func (ws *writeStream) abort(err error) {
	ids := make([]uint32, 0, len(ws.reqs))
	for id, req := range ws.reqs {
		ids = append(ids, id)
		ws.fail(req.off, err)
	}
	clear(ws.reqs)
	ws.cn.forget(ids, ws.ch)
}
