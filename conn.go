package sftp

import (
	"cmp"
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

// Where a request gets its reply. A conn is one SFTP channel. A request is started
// (start, startInto) by filing the Go channel its reply goes to under its id in
// pending and queueing its packet for the channel's writer (connwrite.go); the
// channel's one reader (readLoop) reads each reply, takes its id out of pending and
// sends the reply on the Go channel filed there (dispatch). The caller takes it from
// that Go channel (call.wait and call.take; a transfer, which shares one Go channel
// among all its requests, selects on it itself), or gives the request up while it
// is in flight (call.abandon, forget), and the reader then drops the reply. When the
// conn dies (fail), every request still in pending gets the conn's error as its
// reply. Nothing else delivers replies: a newcomer reading this file has seen every
// way one arrives.

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
//     dropped. At most maxGivenUp are kept; older ones are forgotten, and a reply to
//     one is dropped too (givenup.go). Any other reply whose id is not in pending was
//     never asked for, and is a protocol error;
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
	given   givenUpIDs        // guarded by mu: requests given up (givenup.go)
	ws      writeState        // guarded by mu: the writer's queue (connwrite.go)
	idle    idleState         // guarded by mu: what tells an idle channel (channelpool.go)

	bg         sync.WaitGroup // goroutines started by background (waitWithin)
	done       chan struct{}  // closed by fail
	err        error          // set before done is closed; read only after <-done
	failOnce   sync.Once
	readerDone chan struct{}
	tag        atomic.Pointer[channelTag] // the Client counting the channel (observe.go)
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

// startConn is newConn without the wait for VERSION, for a data channel of a server
// whose main channel has already shown that it speaks SFTP: INIT is queued first, so
// requests the caller sends at once go out behind it, and the server, which handles a
// channel's packets in order, answers INIT before them. The reader takes VERSION
// before any reply; if it never comes, or is malformed, the conn fails and so does
// every request sent on it. Setting up a channel then costs one round trip less, and
// its first request (a transfer's OPEN) rides along with INIT.
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
		c.sawReply(n, resp.typ, resp.body)
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
	ok = ok || !failed && c.forgottenLocked(resp.id) // a late reply: w.ch is nil
	c.idle.replied(resp.typ)
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

// The request path. Every request but INIT goes out through startInto, which files
// the Go channel its reply goes to under the request's id in pending and queues the
// packet for the writer, without waiting for anything. The rest are its forms:
//
//   - start: a request with a reply channel of its own, from replyChans; the call it
//     returns takes the reply (wait, or take, which also decodes it) or gives it up
//     (abandon);
//   - do: one round trip, start then take, with the packet built in a pooled buffer;
//   - startInto with a channel the caller shares between many requests: a transfer's,
//     which collects every reply of every lane on one Go channel, matches each to its
//     request by id, and gives up the rest with forget;
//   - startInto with no channel: nobody waits, and the reply is dropped (closeLater).
//
// The id is read from the packet itself, so a reply is always filed under the id the
// server saw.

// call is a request sent with start: what wait needs to take its reply or give it up.
// One with err set did not go out; neither did the zero value, whose wait reports
// errNoRequest.
type call struct {
	c   *conn
	id  uint32
	ch  chan response // the call's own, from c.replyChans; nil if it did not go out
	err error         // why it did not go out
}

// start sends pkt and returns the call that waits for its reply. ref, when not nil,
// is told once nothing will read pkt's buffer any more (a packet longer than copyMax
// is written from it; see connwrite.go); nil when the caller never reuses the buffer.
// A request that could not go out (ctx had ended, or the conn is dead) returns a call
// whose wait reports why.
func (c *conn) start(ctx context.Context, pkt []byte, ref packetRef) call {
	return c.startWith(ctx, pkt, ref, nil)
}

// startWith is start with acct, the memory account a READDIR's reply longer than the
// reply cap is read within (bigreply.go); nil for every other request.
func (c *conn) startWith(ctx context.Context, pkt []byte, ref packetRef, acct *budget) call {
	ch, _ := c.replyChans.Get().(chan response)
	if ch == nil {
		ch = make(chan response, 1)
	}
	id, err := c.enqueue(ctx, pkt, ref, waiter{ch: ch, acct: acct})
	if err != nil {
		c.replyChans.Put(ch) // not registered: nothing will come
		return call{err: err}
	}
	return call{c: c, id: id, ch: ch}
}

// startInto sends pkt, its reply to go to into, which must have room for it; with a
// nil into nobody waits and the reply is dropped. An error means the request did not
// go out (ctx had ended, or the conn is dead) and nothing will arrive on into for it;
// after nil, its reply or the conn's failure will. ref is as for start.
func (c *conn) startInto(ctx context.Context, pkt []byte, ref packetRef, into chan<- response) error {
	_, err := c.enqueue(ctx, pkt, ref, waiter{ch: into})
	return err
}

// enqueue files w under pkt's id and queues pkt (w's seq is set here), and returns
// the id. pkt is not read once it is queued: a short packet is copied and its buffer
// handed back to ref's owner at once, to be refilled by another request.
func (c *conn) enqueue(ctx context.Context, pkt []byte, ref packetRef, w waiter) (uint32, error) {
	if err := ctxError(ctx, ""); err != nil {
		tell(ref)
		return 0, err
	}
	if len(pkt) < 9 {
		tell(ref)
		return 0, errNoRequest
	}
	id := packetID(pkt)
	c.mu.Lock()
	if c.pending == nil || c.idle.retired {
		err := c.err
		if c.pending != nil { // retired, and fail is on its way
			err = &closedError{cause: errChannelRetired}
		}
		c.mu.Unlock()
		tell(ref)
		return 0, err
	}
	c.idle.sent(pkt)
	w.seq = c.queueLocked(pkt, ref)
	c.pending[id] = w
	wake := c.ws.idle
	c.mu.Unlock()
	c.wakeWriter(wake)
	return id, nil
}

// errNoRequest is what a call that never had a request gets: a bug, reported rather
// than a panic.
var errNoRequest = errors.New("sftp: internal error: a call without a request")

// packetID is the request id of pkt: after its length and type.
func packetID(pkt []byte) uint32 { return binary.BigEndian.Uint32(pkt[5:9]) }

// wait returns the reply to cl, which the caller releases, or gives up when ctx ends
// (then the reply is dropped, see abandon) or the connection dies. A call whose ctx
// has ended when wait is called gives up, whatever has arrived.
func (cl call) wait(ctx context.Context) (response, error) {
	if cl.ch == nil {
		return response{}, cmp.Or(cl.err, errNoRequest)
	}
	if ctx.Err() == nil {
		select {
		case r := <-cl.ch:
			return cl.got(r)
		case <-cl.c.done:
			select {
			case r := <-cl.ch: // a reply that beat the failure still counts
				return cl.got(r)
			default:
				return response{}, cl.c.err // the reader may still hand it over: ch is not reused
			}
		case <-ctx.Done():
		}
	}
	cl.abandon()
	return response{}, ctxError(ctx, "")
}

// got takes r, which came on cl's channel: the channel is empty for good, and goes
// back to the pool.
func (cl call) got(r response) (response, error) {
	cl.c.replyChans.Put(cl.ch)
	if r.err != nil {
		return response{}, r.err
	}
	return r, nil
}

// take waits for the reply to cl while ctx lasts and hands it to decode, which
// must not keep its body; decode's error goes through check, so a reply that breaks
// the protocol fails the channel. decode gets the reply by value: a pointer handed to
// a function the compiler cannot see would escape, an allocation per round trip.
func (cl call) take(ctx context.Context, decode func(response) error) error {
	r, err := cl.wait(ctx)
	if err != nil {
		return err
	}
	err = decode(r)
	r.release()
	return cl.c.check(err)
}

// abandon gives up on cl: its reply, when it comes, is dropped by the reader. If the
// writer has not started the packet it is withdrawn (unless it is a CLOSE); if the
// reader already took the reply out of pending, it is on its way to cl's channel, and
// is taken and released here. Either way a HANDLE that comes back is closed
// (closeLater). The channel goes back to the pool once it is known to be empty.
func (cl call) abandon() {
	if cl.ch == nil {
		return
	}
	c := cl.c
	c.mu.Lock()
	if w, ok := c.pending[cl.id]; ok {
		if c.giveUpLocked(w.seq) {
			delete(c.pending, cl.id) // it never went out: no reply will come
		} else {
			c.gaveUpLocked(cl.id, w)
		}
		c.mu.Unlock()
		c.replyChans.Put(cl.ch) // nothing will be sent on it any more
		return
	}
	c.mu.Unlock()
	select {
	case r := <-cl.ch:
		if r.err == nil && r.typ == sshfx.TypeHandle {
			if h, err := decodeHandle("OPEN", &r); err == nil {
				c.closeLater(h)
			} else {
				c.fail(err)
			}
		}
		r.release()
		c.replyChans.Put(cl.ch)
	case <-c.done:
	}
}

// forget abandons requests sent with startInto: those the writer has not started are
// withdrawn, the others marked so the reader drops their replies. It returns how many
// of them the reader had already taken out of pending: those replies are on their way
// to their channel (the reader sends right after), and the caller must drain that many
// to recycle their buffers.
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
			c.gaveUpLocked(id, w)
		}
	}
	return inTransit
}

// do sends the request enc builds (in dst, a pooled buffer, with id) and takes its
// reply with decode while ctx lasts: one round trip. A small request's round trip
// counts as a sample of the link's latency (minRTT).
func (c *conn) do(ctx context.Context, enc func(dst []byte, id uint32) []byte, decode func(response) error) error {
	bp := c.smallPool.Get().(*[]byte)
	pkt := enc((*bp)[:0], c.newID())
	small := len(pkt) <= smallBuf
	sent := time.Now()
	cl := c.start(ctx, pkt, nil)
	if small || cap(pkt) != cap(*bp) {
		// Copied by the queue (copyMax), or built elsewhere: bp is free.
		c.smallPool.Put(bp)
	}
	r, err := cl.wait(ctx)
	if err != nil {
		return err
	}
	if small {
		c.sawRTT(time.Since(sent))
	}
	err = decode(r)
	r.release()
	return c.check(err)
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
		c.tag.Load().ended(cause)
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
