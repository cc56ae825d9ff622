package delayproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// chunkSize is how much one Read may take. Loopback reads return what has arrived, so
// under load chunks are large and the per-chunk cost (a timer wait, a Write) stays small
// next to the bytes moved.
const chunkSize = 64 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// chunk is one Read's worth of bytes with its arrival time. eof marks the end of the
// stream, which is forwarded (as a half-close) after the same delay as data.
type chunk struct {
	buf   *[]byte
	n     int
	stamp time.Time
	eof   bool
}

// link is one proxied connection: two directions that end together on error.
type link struct {
	a, b     net.Conn
	up, down *queue // a->b and b->a

	once sync.Once
	done chan struct{} // closed by abort; wakes writers waiting for a release time
}

func newLink(a, b net.Conn, maxQueued int) *link {
	return &link{a: a, b: b, up: newQueue(maxQueued), down: newQueue(maxQueued), done: make(chan struct{})}
}

// abort tears the connection down: both sockets closed (unblocking Reads and Writes),
// both queues closed (unblocking push and pop), queued bytes dropped.
func (l *link) abort() {
	l.once.Do(func() {
		close(l.done)
		_ = l.a.Close()
		_ = l.b.Close()
		l.up.close()
		l.down.close()
	})
}

// pump moves one direction from src to dst through q and returns when the direction has
// ended: EOF forwarded, or the link aborted. The caller's goroutine is the reader; the
// writer runs in a second goroutine so that reading never waits on the delay.
func (l *link) pump(src, dst net.Conn, q *queue, delay time.Duration, rate int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := l.release(dst, q, delay, rate); err != nil {
			l.abort()
		}
	}()
	if err := l.read(src, q); err != nil {
		l.abort()
	}
	wg.Wait()
}

// read stamps and queues everything src delivers, then queues the EOF.
func (l *link) read(src net.Conn, q *queue) error {
	for {
		buf := chunkPool.Get().(*[]byte)
		n, err := src.Read(*buf)
		now := time.Now()
		if n > 0 {
			if !q.push(chunk{buf: buf, n: n, stamp: now}) {
				chunkPool.Put(buf)
				return errAborted
			}
		} else {
			chunkPool.Put(buf)
		}
		if errors.Is(err, io.EOF) {
			if !q.push(chunk{stamp: now, eof: true}) {
				return errAborted
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// release writes each queued chunk to dst at its stamp plus delay. With a rate cap the
// direction also behaves like a link of that bandwidth: a chunk cannot start before the
// previous one has finished "transmitting".
func (l *link) release(dst net.Conn, q *queue, delay time.Duration, rate int64) error {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var linkFree time.Time // when a rate-capped link can take the next chunk
	for {
		c, ok := q.pop()
		if !ok {
			return errAborted
		}
		due := c.stamp.Add(delay)
		if rate > 0 {
			if linkFree.After(due) {
				due = linkFree
			}
			linkFree = due.Add(time.Duration(int64(c.n) * int64(time.Second) / rate))
		}
		if wait := time.Until(due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-l.done:
				putChunk(c)
				return errAborted
			}
		}
		if c.eof {
			// Half-close, as the sender did: the peer can still answer on the other
			// direction (an SSH client's EOF does not end the server's reply).
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				return cw.CloseWrite()
			}
			return dst.Close()
		}
		_, err := dst.Write((*c.buf)[:c.n])
		putChunk(c)
		if err != nil {
			return err
		}
	}
}

func putChunk(c chunk) {
	if c.buf != nil {
		chunkPool.Put(c.buf)
	}
}

// queue is the FIFO between one direction's reader and writer, bounded in bytes rather
// than chunks: Reads return anything from one byte to chunkSize, and what matters for
// memory and for back-pressure is bytes.
type queue struct {
	mu     sync.Mutex
	cond   sync.Cond // on mu; signalled on push, pop and close
	items  []chunk   // items[0] is the oldest
	bytes  int       // sum of n over items
	max    int
	closed bool
}

func newQueue(max int) *queue {
	q := &queue{max: max}
	q.cond.L = &q.mu
	return q
}

// push appends c, first waiting while the queue is full. It reports false (and keeps
// nothing) once the queue is closed.
func (q *queue) push(c chunk) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.bytes >= q.max && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return false
	}
	q.items = append(q.items, c)
	q.bytes += c.n
	q.cond.Broadcast()
	return true
}

// pop removes the oldest chunk, waiting while the queue is empty. It reports false once
// the queue is closed; what is still queued then is dropped.
func (q *queue) pop() (chunk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return chunk{}, false
	}
	c := q.items[0]
	q.items[0] = chunk{}
	q.items = q.items[1:]
	q.bytes -= c.n
	q.cond.Broadcast()
	return c, true
}

// close wakes both ends for good and returns queued buffers to the pool.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, c := range q.items {
		putChunk(c)
	}
	q.items, q.bytes = nil, 0
	q.cond.Broadcast()
}
