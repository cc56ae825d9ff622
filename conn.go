package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// response is one reply as the reader hands it over: the type and id it read, and the
// body after them. body aliases a buffer that may be pooled: the receiver owns it and
// calls release once it no longer needs body.
type response struct {
	typ  sshfx.PacketType
	id   uint32
	body []byte
	buf  *[]byte
	pool *sync.Pool
	err  error // set (and typ 0) when the connection died before the reply came
}

func (r *response) release() {
	if r.pool != nil {
		r.pool.Put(r.buf)
		r.pool, r.buf, r.body = nil, nil, nil
	}
}

// conn is one SFTP session on one channel (or one pair of pipes).
//
// Invariants:
//   - exactly one goroutine (readLoop) reads from r; every reply goes to the channel
//     registered for its id in pending, which always has room for it (a call registers a
//     channel of capacity 1, a transfer one with capacity for all it keeps in flight), so
//     the reader never blocks on a slow consumer;
//   - a nil channel in pending marks a request whose waiter gave up: its late reply is
//     dropped. A reply whose id is not in pending at all was never asked for, and is a
//     protocol error;
//   - packets are written whole while holding wsem, so concurrent senders never
//     interleave; a request is entered in pending under wsem too, just before its
//     write, so one that never went out is never waited for. Waiting for wsem honours
//     ctx; a write already under way cannot be interrupted (x/crypto's channel Write
//     takes no context) and ends only when the peer drains it or the conn is closed;
//   - fail runs once: it sets err, delivers a response carrying err to every pending
//     channel (each has room, by the rule above), closes done, then closes the
//     transport. So a waiter that collects replies from several conns on one channel
//     learns of any of them dying without selecting on each done.
//
// Lock order: wsem before mu.
type conn struct {
	r      io.Reader
	w      io.Writer
	closer func() error // closes the transport so the reader and any blocked Write return
	waitRd bool         // whether Close may wait for the reader: only when closer unblocks it

	exts      map[string]string // from VERSION; read-only after newConn
	maxPacket atomic.Uint32     // longest reply accepted, checked before allocating
	// minRTT is the shortest round trip seen on a small request (ns): the link's
	// latency without queueing behind bulk data. It decides whether striping pays.
	minRTT atomic.Int64

	smallPool sync.Pool // *[]byte of cap smallBuf, for STATUS, HANDLE, ATTRS replies and small requests
	dataPool  *sync.Pool
	// replyChans recycles the one-reply channels of calls. A channel goes back only
	// once its reply has been taken from it, so no late reply can land in a channel
	// another call is using.
	replyChans sync.Pool

	// ids hands out request ids. A Client points every conn it owns at one counter,
	// so ids are unique across its channels and a striped transfer can collect
	// replies from several channels on one Go channel. Set before the first request.
	ids    *atomic.Uint32
	ownIDs atomic.Uint32
	wsem   chan struct{} // capacity 1: the right to write; see the invariants

	mu      sync.Mutex
	pending map[uint32]chan<- response // guarded by mu; nil once failed

	bg         sync.WaitGroup // closeOrphan goroutines started by the reader
	done       chan struct{}  // closed by fail
	err        error          // set before done is closed; read only after <-done
	failOnce   sync.Once
	readerDone chan struct{}
}

const (
	smallBuf = 1 << 10
	// defaultMaxReply accepts the largest packet OpenSSH's server sends (its
	// SFTP_MAX_MSG_LENGTH), which also covers a DATA reply to a 261120-byte READ.
	defaultMaxReply = 256 << 10
)

// closedError is what every call gets once the channel is dead. It matches
// net.ErrClosed so callers can test for "connection gone" without knowing the cause,
// and unwraps to the cause.
type closedError struct{ cause error }

func (e *closedError) Error() string {
	return "sftp: connection closed: " + strings.TrimPrefix(e.cause.Error(), "sftp: ")
}
func (e *closedError) Unwrap() error        { return e.cause }
func (e *closedError) Is(target error) bool { return target == net.ErrClosed }

var (
	errClientClosed = errors.New("closed by the client")
	errServerClosed = errors.New("server closed the connection")
)

// newConn does INIT/VERSION on the transport and starts the reader. On error the
// transport is closed.
func newConn(ctx context.Context, r io.Reader, w io.Writer, closer func() error, waitRd bool, dataPool *sync.Pool) (*conn, error) {
	c := makeConn(r, w, closer, waitRd, dataPool)
	if err := ctx.Err(); err != nil {
		closer()
		return nil, fmt.Errorf("sftp: init: %w", err)
	}
	versionc := make(chan error, 1)
	sent := time.Now()
	go c.readLoop(versionc)
	if err := c.write(ctx, appendInit(nil)); err != nil {
		c.fail(fmt.Errorf("sending INIT: %w", err))
		<-versionc
		c.waitReader()
		return nil, c.err
	}
	select {
	case err := <-versionc:
		if err != nil {
			c.waitReader()
			return nil, err
		}
		c.sawRTT(time.Since(sent))
		return c, nil
	case <-ctx.Done():
		c.fail(fmt.Errorf("init: %w", ctx.Err()))
		c.waitReader()
		return nil, fmt.Errorf("sftp: init: %w", ctx.Err())
	}
}

func makeConn(r io.Reader, w io.Writer, closer func() error, waitRd bool, dataPool *sync.Pool) *conn {
	c := &conn{
		r: r, w: w, closer: closer, waitRd: waitRd,
		dataPool:   dataPool,
		pending:    make(map[uint32]chan<- response),
		wsem:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.ids = &c.ownIDs
	c.smallPool.New = func() any { b := make([]byte, smallBuf); return &b }
	c.maxPacket.Store(defaultMaxReply)
	return c
}

// startConn is newConn without the wait for VERSION, for a lane of a server whose
// first channel has already shown that it speaks SFTP: INIT goes out first (it holds
// the right to write until it is written), so requests the caller sends at once queue
// behind it, and the server, which handles a channel's packets in order, answers INIT
// before them. The reader takes VERSION before any reply; if it never comes, or is
// malformed, the conn fails and so does every request sent on it. Setting up a lane
// then costs one round trip less, and the lane's first request rides along with INIT.
// versioned receives, once, nil when VERSION has arrived or the error that failed the
// conn before it.
func startConn(r io.Reader, w io.Writer, closer func() error, waitRd bool, dataPool *sync.Pool) (c *conn, versioned <-chan error) {
	c = makeConn(r, w, closer, waitRd, dataPool)
	c.wsem <- struct{}{} // a fresh conn: nobody else can hold it
	versionc := make(chan error, 1)
	go c.readLoop(versionc)
	c.background(func() {
		defer c.release()
		if _, err := c.w.Write(appendInit(nil)); err != nil {
			c.fail(fmt.Errorf("sending INIT: %w", err))
		}
	})
	return c, versionc
}

// write writes one whole packet, waiting its turn no longer than ctx allows.
func (c *conn) write(ctx context.Context, pkt []byte) error {
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	_, err := c.w.Write(pkt)
	return err
}

func (c *conn) acquire(ctx context.Context) error {
	select {
	case c.wsem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sftp: %w", ctx.Err())
	case <-c.done:
		return c.err
	}
}

func (c *conn) release() { <-c.wsem }

// readLoop is the only reader of c.r. It first reads VERSION and reports the outcome on
// versionc, then dispatches replies until the transport fails.
func (c *conn) readLoop(versionc chan<- error) {
	defer close(c.readerDone)
	var hdr [9]byte
	if err := c.readVersion(hdr[:]); err != nil {
		c.fail(err)
		versionc <- c.err
		return
	}
	versionc <- nil
	for {
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			c.fail(c.readErr(err))
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n < 5 {
			c.fail(protoErr("reply", "length %d is too short for a type and an id", n))
			return
		}
		if max := c.maxPacket.Load(); n > max {
			c.fail(protoErr("reply", "length %d exceeds the limit of %d", n, max))
			return
		}
		resp := response{typ: sshfx.PacketType(hdr[4]), id: binary.BigEndian.Uint32(hdr[5:])}
		resp.body, resp.buf, resp.pool = c.getBuf(int(n - 5))
		if _, err := io.ReadFull(c.r, resp.body); err != nil {
			resp.release()
			c.fail(c.readErr(err))
			return
		}
		if !c.dispatch(resp) {
			return
		}
	}
}

func (c *conn) readVersion(hdr []byte) error {
	if _, err := io.ReadFull(c.r, hdr[:5]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading VERSION: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 5 || n > defaultMaxReply {
		return protoErr("VERSION", "length %d", n)
	}
	if t := sshfx.PacketType(hdr[4]); t != sshfx.TypeVersion {
		return protoErr("VERSION", "got %v first", t)
	}
	body := make([]byte, n-1)
	if _, err := io.ReadFull(c.r, body); err != nil {
		if err == io.EOF { // the header came, so the stream ended inside the packet
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading VERSION: %w", err)
	}
	exts, err := decodeVersion(body)
	if err != nil {
		return err
	}
	c.exts = exts
	return nil
}

// readErr names why reading stopped. A clean EOF between packets is still unexpected
// when requests are waiting for replies.
func (c *conn) readErr(err error) error {
	if err == io.EOF {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n > 0 {
			return fmt.Errorf("%w with %d requests outstanding", io.ErrUnexpectedEOF, n)
		}
		return errServerClosed
	}
	return err
}

// getBuf returns n bytes to read a reply body into, pooled where a pool fits.
func (c *conn) getBuf(n int) ([]byte, *[]byte, *sync.Pool) {
	if n <= smallBuf {
		bp := c.smallPool.Get().(*[]byte)
		return (*bp)[:n], bp, &c.smallPool
	}
	if c.dataPool != nil {
		bp := c.dataPool.Get().(*[]byte)
		if cap(*bp) >= n {
			return (*bp)[:n], bp, c.dataPool
		}
		c.dataPool.Put(bp)
	}
	return make([]byte, n), nil, nil
}

// dispatch hands resp to its waiter. It reports false when the reply was never asked
// for, which fails the connection.
func (c *conn) dispatch(resp response) bool {
	c.mu.Lock()
	ch, ok := c.pending[resp.id]
	if ok {
		delete(c.pending, resp.id)
	}
	failed := c.pending == nil
	c.mu.Unlock()
	switch {
	case failed:
		resp.release()
		return false
	case !ok:
		resp.release()
		c.fail(protoErr("reply", "%v for request id %d, which is not outstanding", resp.typ, resp.id))
		return false
	case ch == nil: // the waiter gave up on it
		if resp.typ == sshfx.TypeHandle {
			h, err := decodeHandle("OPEN", &resp)
			resp.release()
			if err != nil {
				// Which handle to close is unknowable: end the session, which makes
				// the server drop all of them.
				c.fail(err)
				return false
			}
			c.closeOrphanLater(h)
			return true
		}
		resp.release()
		return true
	}
	ch <- resp
	return true
}

// closeOrphanLater closes an orphaned handle from a goroutine that close waits for:
// neither the reader nor a caller giving up on ctx may wait for a write (a full window
// would stall them). Once the session is over there is nothing to do: the server
// forgets its handles with it.
func (c *conn) closeOrphanLater(h string) {
	c.background(func() { c.closeOrphan(h) })
}

// background runs fn on a goroutine that close waits for, and reports whether it did:
// not once the conn has failed. fn must end once the conn fails. The goroutine is
// counted under mu while the conn is alive, so every Add happens before fail, and
// close's Wait after it sees them all.
func (c *conn) background(fn func()) bool {
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return false
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		fn()
	}()
	return true
}

// closeOrphan closes a handle the server opened for a request whose waiter gave up
// (a cancelled OPEN or OPENDIR): without it the server would keep it open for the
// rest of the session. Its reply is dropped.
func (c *conn) closeOrphan(h string) {
	id := c.newID()
	c.send(context.Background(), id, appendString1(nil, sshfx.TypeClose, id, h), nil)
}

// newID returns a fresh request id.
func (c *conn) newID() uint32 { return c.ids.Add(1) }

// send registers ch for id and writes pkt. ch must have room for the reply; a nil ch
// means nobody waits and the reply is dropped. An error means the request did not go
// out (nothing will arrive on ch for it), or the conn failed while writing it.
func (c *conn) send(ctx context.Context, id uint32, pkt []byte, ch chan<- response) error {
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		<-c.done
		return c.err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	if _, err := c.w.Write(pkt); err != nil {
		// fail delivers the error reply to ch: the caller learns of it there.
		c.fail(fmt.Errorf("write: %w", err))
	}
	return nil
}

// wait returns the reply to id, or gives up when ctx ends or the connection dies.
func (c *conn) wait(ctx context.Context, id uint32, ch <-chan response) (response, error) {
	r, _, err := c.waitReply(ctx, id, ch)
	return r, err
}

// waitReply is wait that also reports whether ch is empty for good: true when the
// reply (or the failure standing in for it) was taken from ch.
func (c *conn) waitReply(ctx context.Context, id uint32, ch <-chan response) (r response, clean bool, err error) {
	select {
	case r := <-ch:
		if r.err != nil {
			return response{}, true, r.err
		}
		return r, true, nil
	case <-c.done:
		select {
		case r := <-ch: // a reply that beat the failure still counts
			if r.err != nil {
				return response{}, true, r.err
			}
			return r, true, nil
		default:
			return response{}, false, c.err
		}
	case <-ctx.Done():
		c.abandon(id, ch)
		return response{}, false, fmt.Errorf("sftp: %w", ctx.Err())
	}
}

// abandon forgets a request whose reply is still due, so the reader drops it. If the
// reader already took it out of pending, the reply is on its way to ch: take it and
// release its buffer. Either way a HANDLE that comes back is closed (closeOrphan).
func (c *conn) abandon(id uint32, ch <-chan response) {
	c.mu.Lock()
	if _, ok := c.pending[id]; ok {
		c.pending[id] = nil
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	select {
	case r := <-ch:
		if r.err == nil && r.typ == sshfx.TypeHandle {
			if h, err := decodeHandle("OPEN", &r); err == nil {
				c.closeOrphanLater(h)
			} else {
				c.fail(err)
			}
		}
		r.release()
	case <-c.done:
	}
}

// forget abandons requests: those still pending are marked so the reader drops their
// replies. It returns how many of them the reader had already taken out of pending:
// those replies are on their way to their channel (the reader sends right after), and
// the caller must drain that many to recycle their buffers.
func (c *conn) forget(ids []uint32) (inTransit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return 0 // failed: the error replies were delivered already
	}
	for _, id := range ids {
		if _, ok := c.pending[id]; ok {
			c.pending[id] = nil
		} else {
			inTransit++
		}
	}
	return inTransit
}

// call sends pkt as request id and waits for its reply.
func (c *conn) call(ctx context.Context, id uint32, pkt []byte) (response, error) {
	if err := ctx.Err(); err != nil {
		return response{}, fmt.Errorf("sftp: %w", err)
	}
	ch, _ := c.replyChans.Get().(chan response)
	if ch == nil {
		ch = make(chan response, 1)
	}
	sent := time.Now()
	if err := c.send(ctx, id, pkt, ch); err != nil {
		c.replyChans.Put(ch) // not registered: nothing will come
		return response{}, err
	}
	r, clean, err := c.waitReply(ctx, id, ch)
	if clean {
		c.replyChans.Put(ch)
	}
	if err == nil && len(pkt) <= smallBuf {
		c.sawRTT(time.Since(sent))
	}
	return r, err
}

// roundTripBuf sends the packet enc appends to a pooled scratch buffer, with a fresh
// id, and waits for the reply. The buffer is free again once the packet is written.
func (c *conn) roundTripBuf(ctx context.Context, enc func(dst []byte, id uint32) []byte) (response, error) {
	bp := c.smallPool.Get().(*[]byte)
	id := c.newID()
	pkt := enc((*bp)[:0], id)
	r, err := c.call(ctx, id, pkt)
	if cap(pkt) == cap(*bp) { // not outgrown: the pool keeps one size
		c.smallPool.Put(bp)
	}
	return r, err
}

// sawRTT records a round trip if it is the shortest yet.
func (c *conn) sawRTT(d time.Duration) {
	for {
		old := c.minRTT.Load()
		if old != 0 && old <= int64(d) {
			return
		}
		if c.minRTT.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// fail kills the connection once: every waiter, present and future, gets err.
func (c *conn) fail(cause error) {
	c.failOnce.Do(func() {
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		c.err = &closedError{cause: cause}
		for id, ch := range pending {
			if ch != nil {
				ch <- response{id: id, err: c.err}
			}
		}
		close(c.done)
		c.mu.Unlock()
		c.closer()
	})
}

// check is where a call that met a reply breaking the protocol ends the channel. It
// returns err unchanged unless err holds a *ProtocolError; then it fails the channel
// with it and returns the same kind of error every other call on the channel gets
// from then on: one matching both *ProtocolError and net.ErrClosed. So a caller that
// reconnects on net.ErrClosed need not know which check fired, or where. A STATUS of
// any code is never a protocol error (see otherReply): it fails one request only.
func (c *conn) check(err error) error {
	var pe *ProtocolError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	var ce *closedError
	if errors.As(err, &ce) {
		return err // already a dead channel's error
	}
	c.fail(err)
	// Not c.err: if the channel had died of something else first, that would hide the
	// protocol error this call met.
	return &closedError{cause: err}
}

func (c *conn) waitReader() {
	if c.waitRd {
		<-c.readerDone
	}
}

// close shuts the connection down and waits for the reader, so no goroutine outlives it.
func (c *conn) close() {
	c.fail(errClientClosed)
	c.waitReader()
	c.bg.Wait()
}

// failed reports the error that killed the connection, or nil.
func (c *conn) failed() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}
