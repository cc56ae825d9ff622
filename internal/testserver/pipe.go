package testserver

import (
	"encoding/binary"
	"io"
	"sync"
)

// pipe is a one-way in-memory byte stream with a bounded buffer, used instead
// of io.Pipe for three reasons:
//   - a Write returns once the bytes are buffered, like a socket or an SSH
//     channel within its window, so a client can queue many requests without
//     the server reading each one first (io.Pipe would hand bytes over
//     synchronously and hide whether the client really pipelines);
//   - the server can ask whether a whole request is already waiting
//     (packetReady), which is what lets Reorder group replies without
//     ever stalling;
//   - it can count complete requests as the client writes them and replies
//     as the client finishes reading them, which is what MaxInflight reports.
//
// The buffer is a ring that starts small and grows up to max bytes.
type pipe struct {
	mu       sync.Mutex
	readable sync.Cond // data arrived or the pipe closed
	writable sync.Cond // space freed or the pipe closed

	buf  []byte // ring storage
	max  int
	head int // index of the first unread byte
	n    int // bytes buffered

	rerr error // set once the read side is closed: both ends fail
	werr error // set once the write side is closed: reads drain, then get it

	written, consumed int64 // stream totals, for marks

	// onPacket, if set, is called (with mu held) for every complete packet
	// written, before its last byte becomes readable, so the count is always
	// ahead of anything the reader can do with it.
	onPacket func()
	frame    framer

	// marks are stream offsets at which a counted reply ends; onMark is
	// called (with mu held) when the reader has consumed up to one.
	marks    []int64
	markHead int
	onMark   func()
}

func newPipe(max int) *pipe {
	p := &pipe{max: max}
	p.readable.L = &p.mu
	p.writable.L = &p.mu
	return p
}

func (p *pipe) Write(b []byte) (int, error) { return p.write(b, false) }

// write copies b into the ring, blocking while it is full. With mark set,
// the end of b is recorded as the end of a counted reply.
func (p *pipe) write(b []byte, mark bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := 0
	for {
		if p.rerr != nil || p.werr != nil {
			return done, io.ErrClosedPipe
		}
		if len(b) == 0 {
			break
		}
		if p.n == len(p.buf) && len(p.buf) < p.max {
			p.grow(len(b))
		}
		free := len(p.buf) - p.n
		if free == 0 {
			p.writable.Wait()
			continue
		}
		k := min(free, len(b))
		tail := (p.head + p.n) % len(p.buf)
		c := copy(p.buf[tail:], b[:k])
		copy(p.buf, b[c:k])
		if p.onPacket != nil {
			p.frame.feed(b[:k], p.onPacket)
		}
		p.n += k
		p.written += int64(k)
		b = b[k:]
		done += k
		p.readable.Signal()
	}
	if mark {
		if p.consumed >= p.written && p.onMark != nil {
			p.onMark() // an empty reply: nothing left for the reader to consume
		} else {
			p.marks = append(p.marks, p.written)
		}
	}
	return done, nil
}

// grow enlarges the ring (only when full, so the data is at most wrapped
// once) and lays the buffered bytes out from index 0.
func (p *pipe) grow(want int) {
	size := min(p.max, max(2*len(p.buf), p.n+want, 64<<10))
	buf := make([]byte, size)
	c := copy(buf, p.buf[p.head:])
	copy(buf[c:], p.buf[:p.head])
	p.buf = buf
	p.head = 0
}

func (p *pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.n == 0 {
		if p.rerr != nil {
			return 0, io.ErrClosedPipe
		}
		if p.werr != nil {
			return 0, p.werr
		}
		if len(b) == 0 {
			return 0, nil
		}
		p.readable.Wait()
	}
	k := min(p.n, len(b))
	c := copy(b[:k], p.buf[p.head:])
	copy(b[c:k], p.buf)
	p.head = (p.head + k) % len(p.buf)
	p.n -= k
	p.consumed += int64(k)
	for p.markHead < len(p.marks) && p.marks[p.markHead] <= p.consumed {
		p.markHead++
		if p.onMark != nil {
			p.onMark()
		}
	}
	if p.markHead == len(p.marks) {
		p.marks, p.markHead = p.marks[:0], 0
	}
	p.writable.Signal()
	return k, nil
}

// packetReady reports whether a whole packet (by its length field) is
// buffered, or the pipe is closed, i.e. whether a read of the next packet
// will return without waiting for the client.
func (p *pipe) packetReady() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr != nil || p.werr != nil {
		return true
	}
	if p.n < 4 {
		return false
	}
	var hdr [4]byte
	for i := range hdr {
		hdr[i] = p.buf[(p.head+i)%len(p.buf)]
	}
	return uint64(p.n-4) >= uint64(binary.BigEndian.Uint32(hdr[:]))
}

// closeRead closes the reading end: buffered data is dropped, and blocked
// or later Writes and Reads fail with io.ErrClosedPipe.
func (p *pipe) closeRead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = io.ErrClosedPipe
	}
	p.n = 0
	p.readable.Broadcast()
	p.writable.Broadcast()
}

// closeWrite closes the writing end: the reader gets what is buffered and
// then io.EOF; blocked or later Writes fail.
func (p *pipe) closeWrite() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil {
		p.werr = io.EOF
	}
	p.readable.Broadcast()
	p.writable.Broadcast()
}

// framer finds packet boundaries in a byte stream from the length fields
// alone, a few operations per packet whatever its size.
type framer struct {
	hdr  [4]byte
	hdrN int
	left uint32 // body bytes still to come in the current packet
}

func (f *framer) feed(b []byte, complete func()) {
	for len(b) > 0 {
		if f.hdrN < 4 {
			c := copy(f.hdr[f.hdrN:], b)
			f.hdrN += c
			b = b[c:]
			if f.hdrN < 4 {
				return
			}
			f.left = binary.BigEndian.Uint32(f.hdr[:])
		}
		take := uint32(min(uint64(f.left), uint64(len(b))))
		f.left -= take
		b = b[take:]
		if f.left == 0 {
			f.hdrN = 0
			complete()
		}
	}
}

// clientReader and clientWriter are the ends handed to the client; closing
// them is how the client hangs up.
type clientReader struct{ p *pipe }

func (r clientReader) Read(b []byte) (int, error) { return r.p.Read(b) }
func (r clientReader) Close() error               { r.p.closeRead(); return nil }

type clientWriter struct{ p *pipe }

func (w clientWriter) Write(b []byte) (int, error) { return w.p.Write(b) }
func (w clientWriter) Close() error                { w.p.closeWrite(); return nil }
