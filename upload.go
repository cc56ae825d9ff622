package sftp

import (
	"io"
	"os"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// writeStream writes sequentially from an offset with a window of WRITEs in flight,
// spread over the transfer's lanes.
type writeStream struct {
	lanes
	start        int64
	max          int
	reqs         map[uint32]chunk
	firstFailure // the failed WRITE at the lowest offset
}

func (f *File) newWriteStream(off int64) *writeStream {
	max := f.window()
	return &writeStream{
		// Siblings open WRITE only: the caller's open already created or truncated the
		// file, and a second TRUNC would destroy what other lanes wrote.
		lanes: f.newLanes(max, sshfx.FlagWrite),
		start: off, max: max,
		reqs: make(map[uint32]chunk, max),
	}
}

// sizeOf guesses how much src will yield, to stripe from the first byte when it is
// large; -1 when unknown (then striping starts once the transfer has gone far enough).
func sizeOf(src io.Reader) int64 {
	switch r := src.(type) {
	case *sliceReader:
		return int64(len(r.b))
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

// copyFrom reads src straight into WRITE packets (the header is reserved in front, so
// the payload is never copied again) until src ends or a WRITE fails. It returns the
// bytes the server acknowledged from the start offset, all before the first failure;
// remote failures come back as *fs.PathError, src's bare.
func (ws *writeStream) copyFrom(src io.Reader) (int64, error) {
	c := ws.f.c
	size := c.limits.MaxWrite
	off := ws.start
	if sizeOf(src) >= stripeMin {
		ws.stripe()
	}
	var srcErr error
	for ws.err == nil {
		if ws.f.ctx.Err() != nil { // closed: stop at once, not when the window is full
			ws.abort(errFileClosed)
			ws.fail(off, errFileClosed)
			break
		}
		if len(ws.reqs) >= ws.max && !ws.more() {
			break
		}
		if ws.err != nil {
			break
		}
		// Take in lanes that finished opening, without waiting for them.
		for done := false; !done; {
			select {
			case l := <-ws.joins:
				ws.join(l)
			default:
				done = true
			}
		}
		l := ws.pick()
		for len(ws.all) > 1 && l.out >= ws.laneCap(size) && ws.more() {
			l = ws.pick()
		}
		if ws.err != nil {
			break
		}
		bp := c.dataBuf()
		id := l.cn.newID()
		hdr := len(appendWriteHeader((*bp)[:0], id, l.handle, uint64(off), size))
		n, err := io.ReadFull(src, (*bp)[hdr:hdr+size])
		if n > 0 {
			if n < size { // the last piece: rewrite the header for its real length
				appendWriteHeader((*bp)[:0], id, l.handle, uint64(off), n)
			}
			if serr := ws.f.send(l.cn, id, (*bp)[:hdr+n], ws.ch); serr != nil {
				ws.fail(off, serr)
			} else {
				l.out++
				ws.reqs[id] = chunk{off: off, n: n, lane: l}
			}
			off += int64(n)
			if off-ws.start >= channelWindow {
				// Size unknown, but more than one window already: on a long link one
				// channel is now the limit, so it is worth opening more.
				ws.stripe()
			}
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
	// A failed CLOSE of a sibling handle may be the only report of a lost write.
	if err := ws.finish(); err != nil {
		ws.fail(ws.start, err)
	}
	if ws.err != nil {
		return ws.errAt - ws.start, ws.f.err("write", ws.err)
	}
	return off - ws.start, srcErr
}

// laneCap is how many WRITEs of size one lane may have in flight when there are
// several: what fits in the server's channel window. x/crypto's Write blocks once a
// channel's window is used up, and one goroutine sends for every lane, so a lane past
// its window would hold back all the others.
func (ws *writeStream) laneCap(size int) int {
	return max(1, (channelWindow-64<<10)/(size+packetSlack))
}

// more waits for one acknowledgement (taking in new lanes meanwhile); false when
// nothing is in flight.
func (ws *writeStream) more() bool {
	for len(ws.reqs) > 0 {
		select {
		case r := <-ws.ch:
			ws.ack(r)
			return true
		case l := <-ws.joins:
			ws.join(l)
		case <-ws.f.ctx.Done():
			ws.abort(errFileClosed)
			return false
		}
	}
	return false
}

// ack files one WRITE's reply.
func (ws *writeStream) ack(r response) {
	req, ok := ws.reqs[r.id]
	if !ok {
		r.release()
		return
	}
	delete(ws.reqs, r.id)
	req.lane.out--
	if r.err != nil {
		ws.fail(req.off, r.err)
	} else if err := expectStatus("WRITE", &r); err != nil {
		ws.fail(req.off, req.lane.cn.check(err))
	}
	r.release()
}

// abort gives up on every WRITE in flight. Whether they landed is unknown, so the
// failure is placed at the lowest of them: nothing from there on is reported written.
func (ws *writeStream) abort(err error) {
	// Acknowledgements already delivered still count: collect them first, so n does
	// not under-report what the server confirmed.
	for len(ws.reqs) > 0 {
		select {
		case r := <-ws.ch:
			ws.ack(r)
			continue
		default:
		}
		break
	}
	ids := make(map[*lane][]uint32, len(ws.all))
	for id, req := range ws.reqs {
		ids[req.lane] = append(ids[req.lane], id)
		ws.fail(req.off, err)
	}
	clear(ws.reqs)
	ws.forget(ids)
}
