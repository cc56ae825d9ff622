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
	// acct, for a reply longer than the reply cap (bigreply.go), is the memory
	// account body is charged to until release.
	acct *budget
}

func (r *response) release() {
	if r.pool != nil {
		r.pool.Put(r.buf)
		r.pool, r.buf, r.body = nil, nil, nil
	}
	if r.acct != nil {
		r.acct.release(int64(len(r.body)))
		r.acct, r.body = nil, nil
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
//   - exactly one goroutine (writeLoop, connwrite.go) writes to w, whole packets in
//     the order they were queued; a request enters pending under mu as its packet is
//     queued, and leaves it again if its waiter gives up before the writer started it,
//     so one that never went out is never waited for. No call waits for the writer: a
//     Write blocked by a server that stopped taking data holds no caller past its ctx,
//     and if it stays blocked a grace period after its call gave up, the conn fails;
//   - fail runs once: it sets err, delivers a response carrying err to every pending
//     channel (each has room, by the rule above), closes done, then closes the
//     transport. So a waiter that collects replies from several conns on one channel
//     learns of any of them dying without selecting on each done.
//
// Lock order: mu is the innermost lock.
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
	// stallGraceSet, when not 0, replaces writeStallGrace (tests).
	stallGraceSet atomic.Int64

	mu      sync.Mutex
	pending map[uint32]waiter // guarded by mu; nil once failed
	ws      writeState        // guarded by mu: the writer's queue (connwrite.go)

	bg         sync.WaitGroup // goroutines started by background (waitWithin)
	done       chan struct{}  // closed by fail
	err        error          // set before done is closed; read only after <-done
	failOnce   sync.Once
	readerDone chan struct{}
}

// waiter is a request waiting for its reply: the channel the reply goes to (nil once
// the waiter gave up: the reply is dropped) and the seq of its packet in the write
// queue. acct, for a READDIR, is the memory account of the call that asked: a NAME
// reply longer than the reply cap is read within it (bigreply.go).
type waiter struct {
	ch   chan<- response
	seq  uint64
	acct *budget
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

// newConn does INIT/VERSION on the transport and starts the reader and the writer.
// ctx bounds it all, the write of INIT included: a peer that never reads cannot hold
// it. On error the transport is closed.
func newConn(ctx context.Context, r io.Reader, w io.Writer, closer func() error, waitRd bool, dataPool *sync.Pool) (*conn, error) {
	c := makeConn(r, w, closer, waitRd, dataPool)
	if err := ctx.Err(); err != nil {
		closer()
		return nil, fmt.Errorf("sftp: init: %w", err)
	}
	versionc := make(chan error, 1)
	sent := time.Now()
	go c.readLoop(versionc)
	c.startWriter()
	c.queueRaw(appendInit(nil))
	select {
	case err := <-versionc:
		if err != nil {
			c.shutdown(err)
			return nil, err
		}
		c.sawRTT(time.Since(sent))
		return c, nil
	case <-c.done: // INIT could not be written; the reader may not learn of it
		c.shutdown(nil)
		return nil, c.err
	case <-ctx.Done():
		// Closing the transport ends the reader and the writer where it can; the call
		// returns now either way.
		c.fail(fmt.Errorf("init: %w", ctx.Err()))
		return nil, ctxError(ctx, "init")
	}
}

func makeConn(r io.Reader, w io.Writer, closer func() error, waitRd bool, dataPool *sync.Pool) *conn {
	c := &conn{
		r: r, w: w, closer: closer, waitRd: waitRd,
		dataPool:   dataPool,
		pending:    make(map[uint32]waiter),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.ids = &c.ownIDs
	c.smallPool.New = func() any { b := make([]byte, smallBuf); return &b }
	c.maxPacket.Store(defaultMaxReply)
	return c
}

// startConn is newConn without the wait for VERSION, for a lane of a server whose
// first channel has already shown that it speaks SFTP: INIT is queued first, so
// requests the caller sends at once go out behind it, and the server, which handles
// a channel's packets in order, answers INIT before them. The reader takes VERSION
// before any reply; if it never comes, or is malformed, the conn fails and so does
// every request sent on it. Setting up a lane
// then costs one round trip less, and the lane's first request rides along with INIT.
// versioned receives, once, nil when VERSION has arrived or the error that failed the
// conn before it.
func startConn(r io.Reader, w io.Writer, closer func() error, waitRd bool, dataPool *sync.Pool) (c *conn, versioned <-chan error) {
	c = makeConn(r, w, closer, waitRd, dataPool)
	versionc := make(chan error, 1)
	go c.readLoop(versionc)
	c.startWriter()
	c.queueRaw(appendInit(nil))
	return c, versionc
}

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
			if !c.readOversized(hdr[:], n) { // a READDIR's NAME may be longer: bigreply.go
				return
			}
			continue
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
	w, ok := c.pending[resp.id]
	if ok {
		delete(c.pending, resp.id)
	}
	failed := c.pending == nil
	c.mu.Unlock()
	ch := w.ch
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
			c.closeLater(h)
			return true
		}
		resp.release()
		return true
	}
	ch <- resp
	return true
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

// newID returns a fresh request id.
func (c *conn) newID() uint32 { return c.ids.Add(1) }

// send registers ch for id and queues pkt for the writer; it never waits. ch must
// have room for the reply; a nil ch means nobody waits and the reply is dropped. An
// error means the request did not go out (ctx had ended, or the conn is dead) and
// nothing will arrive on ch for it; after nil, the reply or the conn's failure will.
// pkt is copied when it is short (copyMax); a longer one is written from the
// caller's buffer, which must then not be reused: see sendRef.
func (c *conn) send(ctx context.Context, id uint32, pkt []byte, ch chan<- response) error {
	return c.sendRef(ctx, id, pkt, ch, nil)
}

// sendRef is send for a packet whose buffer the caller will reuse: ref (if not nil)
// is told once when nothing will read the buffer any more, on every path, an error
// returned by sendRef included.
func (c *conn) sendRef(ctx context.Context, id uint32, pkt []byte, ch chan<- response, ref packetRef) error {
	return c.enqueue(ctx, id, pkt, waiter{ch: ch}, ref)
}

// enqueue is sendRef for the waiter w (its seq is set here).
func (c *conn) enqueue(ctx context.Context, id uint32, pkt []byte, w waiter, ref packetRef) error {
	if err := ctxError(ctx, ""); err != nil {
		tell(ref)
		return err
	}
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		tell(ref)
		return c.err
	}
	w.seq = c.queueLocked(pkt, ref)
	c.pending[id] = w
	wake := c.ws.idle
	c.mu.Unlock()
	c.wakeWriter(wake)
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
		return response{}, false, ctxError(ctx, "")
	}
}

// abandon forgets a request whose reply is still due, so the reader drops it. If the
// reader already took it out of pending, the reply is on its way to ch: take it and
// release its buffer. Either way a HANDLE that comes back is closed (closeLater).
func (c *conn) abandon(id uint32, ch <-chan response) {
	c.mu.Lock()
	if w, ok := c.pending[id]; ok {
		if c.giveUpLocked(w.seq) {
			delete(c.pending, id) // it never went out: no reply will come
		} else {
			c.pending[id] = waiter{seq: w.seq, acct: w.acct}
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	select {
	case r := <-ch:
		if r.err == nil && r.typ == sshfx.TypeHandle {
			if h, err := decodeHandle("OPEN", &r); err == nil {
				c.closeLater(h)
			} else {
				c.fail(err)
			}
		}
		r.release()
	case <-c.done:
	}
}

// forget abandons requests: those the writer has not started are withdrawn, the
// others marked so the reader drops their replies. It returns how many of them the
// reader had already taken out of pending: those replies are on their way to their
// channel (the reader sends right after), and the caller must drain that many to
// recycle their buffers.
func (c *conn) forget(ids []uint32) (inTransit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return 0 // failed: the error replies were delivered already
	}
	for _, id := range ids {
		w, ok := c.pending[id]
		switch {
		case !ok:
			inTransit++
		case c.giveUpLocked(w.seq):
			delete(c.pending, id)
		default:
			c.pending[id] = waiter{seq: w.seq, acct: w.acct}
		}
	}
	return inTransit
}

// call sends pkt as request id and waits for its reply.
func (c *conn) call(ctx context.Context, id uint32, pkt []byte) (response, error) {
	if err := ctxError(ctx, ""); err != nil {
		return response{}, err
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
	storeMin(&c.minRTT, int64(d), 0) // 0: no round trip seen yet
}

// fail kills the connection once: every waiter, present and future, gets err.
func (c *conn) fail(cause error) {
	c.failOnce.Do(func() {
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		c.err = &closedError{cause: cause}
		for id, w := range pending {
			if w.ch != nil {
				w.ch <- response{id: id, err: c.err}
			}
		}
		close(c.done)
		c.mu.Unlock()
		c.closeTransport()
	})
}

// closeTransport runs closer, waiting for it at most the stall grace. Closing an SSH
// session sends CHANNEL_CLOSE, which waits for the channel's write lock, and a writer
// blocked on a stalled TCP connection holds it; a pipe's Close may block likewise. The
// closer then finishes when the connection does.
func (c *conn) closeTransport() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.closer()
	}()
	limit := time.NewTimer(c.stallGrace())
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C:
	}
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

// close shuts the connection down and waits for its goroutines, within limits (see
// shutdown).
func (c *conn) close() { c.shutdown(errClientClosed) }

// shutdown fails the connection with cause, closing the transport, and waits for its
// reader (when closing the transport ends its Read, waitRd), its writer and the
// goroutines it started. A transport whose server does not answer may keep the reader
// or the writer blocked: x/crypto's channel Write and Read end only when the server's
// CLOSE arrives or the SSH connection closes, and OpenSSH's sshd answers CLOSE only
// once it has handed the server process what it buffered for it, which a server that
// stopped reading never takes. So shutdown waits for them at most the stall grace
// (one round trip and a process exit are what a healthy server needs), and not at all
// for a conn given up on a stalled Write: they then end with the transport (for
// NewClient, when the caller closes the ssh.Client), holding nothing of the Client.
func (c *conn) shutdown(cause error) {
	c.fail(cause)
	c.stopStallWatch()
	if !c.givenUp() {
		c.waitTransport()
	}
	c.bg.Wait() // they end once the conn has failed
}

// waitTransport waits for the reader (if closing the transport ends it) and the
// writer, at most the stall grace.
func (c *conn) waitTransport() {
	limit := time.NewTimer(c.stallGrace())
	defer limit.Stop()
	if c.waitRd {
		select {
		case <-c.readerDone:
		case <-limit.C:
			return
		}
	}
	select {
	case <-c.ws.writerDone:
	case <-limit.C:
	}
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

// storeMin lowers v to x if x is smaller. While v holds none, it holds no value yet
// and any x replaces it.
func storeMin(v *atomic.Int64, x, none int64) {
	for old := v.Load(); old == none || x < old; old = v.Load() {
		if v.CompareAndSwap(old, x) {
			return
		}
	}
}

// storeMax raises v to x if x is larger.
func storeMax(v *atomic.Int64, x int64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}
