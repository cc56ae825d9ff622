package sftp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Reconnecting is a Client that outlives its connection: made from a dial function,
// it dials again when the connection dies (a reset, a server restart, a link the
// keepalive found silent), starts a new Client on the new connection, and lets the
// work that can safely go on, go on. It is opt-in, and a wrapper rather than a mode
// of Client, because what may be repeated after a drop is a property of each
// operation, and a Client's methods promise one attempt each:
//
//   - Get, Put, GetAll and PutAll continue from proven points: a retry runs with
//     Resume, so each file in flight continues from its part file under Resume's
//     proofs, with a Journal (KeepJournal) so that an upload whose part could not be
//     cut (the connection was gone) continues from what the server acknowledged, and
//     with SkipFiles leaving out the files an earlier try put in place. A transfer is
//     idempotent in its outcome: the destination is replaced whole, once.
//   - Stat, Lstat, ReadDir, ReadFile, RealPath, Open, Chmod, Chtimes, Truncate,
//     MkdirAll and RemoveAll are retried: running them twice leaves what running them
//     once does.
//   - Rename, Remove, Mkdir, Symlink and Link are not repeated blindly: when the
//     connection died after the request went out, the server may or may not have
//     carried it out, and a second try could fail for the first one's success (a
//     Rename whose source is gone) or undo other work (a Remove of a file made since).
//     They return an error matching ErrOutcomeUnknown (and net.ErrClosed). A request
//     made when the connection was already known dead never went out: it goes on the
//     next connection.
//   - A File or Dir belongs to the connection it was opened on: the server forgets
//     its handle with the session. After a drop its methods fail with an error
//     matching net.ErrClosed, and the program reopens it by name (Open) or, to
//     continue a transfer, uses Get or Put, which carry the proofs a part file needs.
//
// Retries are bounded by ReconnectPolicy: a call gives up after MaxFailures failures
// in a row without progress (a dial that failed, or a try that moved nothing before
// its connection died). After a try that made progress the next goes at once; after
// one without, the call waits Backoff, doubling up to MaxBackoff, so a server that is
// down is not hammered. A failure the server reports on a live connection (permission
// denied, no space) is not retried: it would only repeat.
//
// Concurrent calls share one connection and, when it dies, one redial. It is safe for
// concurrent use. Close ends it: the calls under way end with an error matching
// net.ErrClosed, a redial under way is abandoned.
type Reconnecting struct {
	// connectFn makes a Client on a new connection, and the function that closes both.
	connectFn func(ctx context.Context) (*Client, func() error, error)
	policy    ReconnectPolicy
	// journal carries what failed uploads had acknowledged from one try to the next
	// (KeepJournal), for every transfer of this Reconnecting that does not bring its own.
	journal *Journal

	// life ends when Close is called: backoff pauses and dials under way stop on it.
	life     context.Context
	stopLife context.CancelFunc

	mu      sync.Mutex
	cur     *rcSession // nil after Close, or while none could be made
	last    *Client    // the Client of the last connection made: a new one inherits from it
	dialing *rcDial    // the redial under way, nil when none is
	closed  bool
	dials   sync.WaitGroup // redials under way, which Close waits for

	reconnects atomic.Int64
}

// ReconnectPolicy bounds what a Reconnecting retries. The zero value is the default.
type ReconnectPolicy struct {
	// MaxFailures is how many failures in a row without progress a call may have
	// before it returns the last one: a dial that failed, or a try that moved nothing
	// before its connection died. Progress (a try that got further than every try
	// before it, or an operation that succeeded) starts the count again. 0 means 5.
	MaxFailures int
	// Backoff is the pause after the first failure without progress; each next one
	// doubles it, up to MaxBackoff. 0 means 1 s, and MaxBackoff 0 means 30 s. After a
	// failure that followed progress, the next try goes at once: the connection was
	// moving data until it died.
	Backoff, MaxBackoff time.Duration
	// OnRetry, if set, is told of each failure a call will retry, with the pause
	// before the retry and the count of failures in a row without progress (the
	// failure included), before the pause. It must not block for long: the call
	// waits for it. Calls that fail at the same time tell it at the same time.
	OnRetry func(err error, pause time.Duration, failures int)
	// Wait, if set, waits out each pause instead of a timer: for a program with a
	// clock of its own, or a test. It must return once ctx is done (Close ends ctx
	// too); an error ends the call.
	Wait func(ctx context.Context, d time.Duration) error
}

const (
	defaultReconnectFailures = 5
	defaultReconnectBackoff  = time.Second
	defaultReconnectMax      = 30 * time.Second
)

// ErrOutcomeUnknown is matched (errors.Is) by the error of a Reconnecting's
// operation that is not repeated blindly (Rename, Remove, Mkdir, Symlink, Link) when
// its connection died after the request went out: the server may or may not have
// carried it out. The program looks (Stat) and decides. The error matches
// net.ErrClosed too, and unwraps to the Client's error.
var ErrOutcomeUnknown = errors.New("sftp: the connection was lost after the request went out: whether the server carried it out is unknown")

type outcomeUnknownError struct{ err error }

func (e *outcomeUnknownError) Error() string {
	return e.err.Error() + " (outcome unknown: the connection was lost after the request went out)"
}
func (e *outcomeUnknownError) Unwrap() error        { return e.err }
func (e *outcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// errReconnectingClosed is what calls get once Close was called.
var errReconnectingClosed = &closedError{cause: errors.New("the Reconnecting was closed")}

// rcSession is one connection and the Client on it.
type rcSession struct {
	c       *Client
	closeFn func() error // closes c and its connection
}

func (s *rcSession) dead() bool {
	select {
	case <-s.c.Done():
		return true
	default:
		return false
	}
}

func (s *rcSession) close() { _ = s.closeFn() }

// inherit starts c, a new Client on a new connection to old's server, from what old
// learned that the connection does not change: the lane counts its transfers settled
// on (a transfer resumed on c starts with them rather than ramping up again from
// two, on channels opened at once), the server's read cap, and that it writes out of
// order across channels.
func (c *Client) inherit(old *Client) {
	lanes := 0
	for _, upload := range []bool{false, true} {
		if m := old.laneMemory.of(upload).Load(); m > 0 {
			c.laneMemory.of(upload).CompareAndSwap(0, m)
			lanes = max(lanes, int(m>>1))
		}
	}
	if lanes > 1 && c.source != nil {
		// The transfers striped: their channels (and the connections dialled for them)
		// open now, in the background, while the transfer that was cut proves where
		// to resume, rather than after.
		c.dataOpener.open(c, min(lanes, c.opts.channels))
	}
	if n := old.readCap.Load(); n > 0 {
		c.readCap.CompareAndSwap(0, n)
	}
	if old.knownReadWrite.Load() {
		c.knownReadWrite.Store(true)
	}
}

// rcDial is one redial, which the calls that found the connection dead meanwhile wait
// for and share.
type rcDial struct {
	done chan struct{}
	err  error // set before done closes
}

// NewReconnecting dials with dial and starts a Client on the connection with opts,
// as NewClient does; when a connection dies, the next call that needs one dials again
// (see Reconnecting). dial must return a new, authenticated connection to the same
// server and account each time, and give up once its ctx is done. The Reconnecting
// owns the connections it dials, and closes them. dial also serves the Client's
// extra connections for striping (WithDialer), unless opts give another. The first
// connection is made once, not retried: a failure here (a wrong host, a refused key)
// is returned as it is. ctx bounds this first connection only.
//
// Keepalive (WithKeepalive) is what finds a connection that went silent; its
// default is on. opts apply to every Client made.
func NewReconnecting(ctx context.Context, dial func(ctx context.Context) (*ssh.Client, error), policy ReconnectPolicy, opts ...Option) (*Reconnecting, error) {
	if dial == nil {
		return nil, errors.New("sftp: NewReconnecting: nil dial function")
	}
	if _, err := newClient(opts); err != nil {
		return nil, err // a bad Option fails here, not at the first redial
	}
	opts = append([]Option{WithDialer(dial)}, opts...)
	return NewReconnectingFrom(ctx, func(ctx context.Context) (*Client, func() error, error) {
		sc, err := dial(ctx)
		if err != nil {
			return nil, nil, err
		}
		if sc == nil {
			return nil, nil, errors.New("sftp: Reconnecting: dial returned a nil *ssh.Client")
		}
		c, err := NewClient(ctx, sc, opts...)
		if err != nil {
			_ = sc.Close()
			return nil, nil, err
		}
		// The connection first, so that everything waiting on it (a black-holed one's
		// writers) ends at once, then the Client.
		return c, func() error { _ = sc.Close(); return c.Close() }, nil
	}, policy)
}

// NewReconnectingFrom is NewReconnecting for a program that reaches the server some
// other way (through jump hosts, over a local server's pipes with NewClientPipe):
// connect makes a Client on a new connection to the same server and account, and
// returns it with the function that closes it and everything under it, which the
// Reconnecting calls once it is done with it. connect must give up once its ctx is
// done. The first connection is made here, once, as NewReconnecting makes it.
func NewReconnectingFrom(ctx context.Context, connect func(ctx context.Context) (c *Client, closeAll func() error, err error), policy ReconnectPolicy) (*Reconnecting, error) {
	if connect == nil {
		return nil, errors.New("sftp: NewReconnectingFrom: nil connect function")
	}
	if policy.MaxFailures < 0 || policy.Backoff < 0 || policy.MaxBackoff < 0 {
		return nil, fmt.Errorf("sftp: NewReconnecting: negative policy %+v", policy)
	}
	r := &Reconnecting{connectFn: connect, policy: policy, journal: NewJournal()}
	r.life, r.stopLife = context.WithCancel(context.Background())
	s, err := r.connect(ctx)
	if err != nil {
		r.stopLife()
		return nil, err
	}
	r.cur, r.last = s, s.c
	return r, nil
}

// connect makes a connection and its Client, within ctx and the Reconnecting's life.
func (r *Reconnecting) connect(ctx context.Context) (*rcSession, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.life, cancel)()
	c, closeAll, err := r.connectFn(ctx)
	if err != nil {
		return nil, r.lifeErr(err)
	}
	if c == nil || closeAll == nil {
		return nil, errors.New("sftp: Reconnecting: connect returned no Client or no close function")
	}
	return &rcSession{c: c, closeFn: closeAll}, nil
}

// lifeErr is err, or the closed error when Close ended what failed.
func (r *Reconnecting) lifeErr(err error) error {
	if r.life.Err() != nil {
		return errReconnectingClosed
	}
	return err
}

// Client returns the Client on the current connection, dialling a new one (once,
// without retrying) if that has died. The Client is for work the methods of
// Reconnecting do not cover; it does not reconnect: once its connection dies, its
// calls fail with an error matching net.ErrClosed, and Client returns another. The
// program must not Close it (Reconnecting.Close does).
func (r *Reconnecting) Client(ctx context.Context) (*Client, error) {
	s, err := r.session(ctx)
	if err != nil {
		return nil, err
	}
	return s.c, nil
}

// Reconnects counts the connections made to replace one that died.
func (r *Reconnecting) Reconnects() int64 { return r.reconnects.Load() }

// Close closes the current connection and its Client, abandons a redial under way
// and waits for it to end. Every call under way or made later fails with an error
// matching net.ErrClosed. Close is idempotent.
func (r *Reconnecting) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.stopLife()
	s := r.cur
	r.cur = nil
	r.mu.Unlock()
	if s != nil {
		s.close()
	}
	r.dials.Wait()
	return nil
}

// session returns the current connection when it is alive; else it dials once, or
// waits for the redial another call started and shares its outcome.
func (r *Reconnecting) session(ctx context.Context) (*rcSession, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errReconnectingClosed
	}
	if s := r.cur; s != nil && !s.dead() {
		r.mu.Unlock()
		return s, nil
	}
	if d := r.dialing; d != nil {
		r.mu.Unlock()
		return r.await(ctx, d)
	}
	d := &rcDial{done: make(chan struct{})}
	r.dialing = d
	old, prev := r.cur, r.last
	r.cur = nil
	r.dials.Add(1)
	r.mu.Unlock()
	defer r.dials.Done()

	if old != nil {
		old.close()
	}
	s, err := r.connect(ctx)
	r.mu.Lock()
	r.dialing = nil
	switch {
	case r.closed:
		if s != nil {
			s.close()
		}
		s, err = nil, errReconnectingClosed
	case err == nil:
		r.cur, r.last = s, s.c
		if prev != nil {
			s.c.inherit(prev)
			s.c.noteReconnect(prev) // its Stats go on from prev's
			r.reconnects.Add(1)
		}
	}
	d.err = err
	close(d.done)
	r.mu.Unlock()
	return s, err
}

// drop closes s when it is the current connection and dead, so that it (and the
// connections its Client dialled) is not held through the pause before a retry.
func (r *Reconnecting) drop(s *rcSession) {
	r.mu.Lock()
	if r.cur != s || !s.dead() {
		r.mu.Unlock()
		return
	}
	r.cur = nil
	r.mu.Unlock()
	s.close()
}

// await waits for another call's redial, and takes its connection.
func (r *Reconnecting) await(ctx context.Context, d *rcDial) (*rcSession, error) {
	select {
	case <-d.done:
	case <-ctx.Done():
		return nil, ctxError(ctx, "")
	}
	if d.err != nil {
		return nil, d.err
	}
	return r.session(ctx)
}

// lost reports whether err, from a call on s, means the connection (or one of the
// call's channels) was lost, so that the call may go on on a connection: not when
// ctx ended or the Reconnecting was closed.
func (r *Reconnecting) lost(ctx context.Context, s *rcSession, err error) bool {
	if err == nil || ctx.Err() != nil || r.life.Err() != nil {
		return false
	}
	return errors.Is(err, net.ErrClosed) || s.dead()
}

// retryCount counts one call's failures in a row without progress, and says the
// pause before its next try (see ReconnectPolicy).
type retryCount struct {
	p      *ReconnectPolicy
	fails  int // failures in a row without progress, the last one included
	stalls int // of those, the ones that followed no progress at all
}

// failed records a failure and returns the pause before the next try, or ok false
// when the call has had its failures.
func (n *retryCount) failed(progressed bool) (pause time.Duration, ok bool) {
	if progressed {
		n.fails, n.stalls = 0, 0
	}
	n.fails++
	if n.fails > cmp.Or(n.p.MaxFailures, defaultReconnectFailures) {
		return 0, false
	}
	if progressed {
		return 0, true
	}
	n.stalls++
	d, limit := cmp.Or(n.p.Backoff, defaultReconnectBackoff), cmp.Or(n.p.MaxBackoff, defaultReconnectMax)
	for i := 1; i < n.stalls && d < limit; i++ {
		d = min(d, limit/2) * 2 // no overflow, whatever the policy
	}
	return min(d, limit), true
}

// pause tells OnRetry of err and waits d, or until ctx ends or Close is called; it
// returns why it stopped early.
func (r *Reconnecting) pause(ctx context.Context, err error, d time.Duration, n *retryCount) error {
	if r.policy.OnRetry != nil {
		r.policy.OnRetry(err, d, n.fails)
	}
	if d == 0 {
		return r.stopped(ctx)
	}
	if r.policy.Wait != nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(r.life, cancel)()
		if err := r.policy.Wait(wctx, d); err != nil {
			if serr := r.stopped(ctx); serr != nil {
				return serr
			}
			return err
		}
		return r.stopped(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
	case <-r.life.Done():
	}
	return r.stopped(ctx)
}

// stopped is why a call must not go on: ctx ended or Close was called; else nil.
func (r *Reconnecting) stopped(ctx context.Context) error {
	if r.life.Err() != nil {
		return errReconnectingClosed
	}
	if ctx.Err() != nil {
		return ctxError(ctx, "")
	}
	return nil
}

// retry runs op on a live connection until it succeeds, fails for a reason that is
// not a lost connection, or has had its failures; progressed says whether the try
// that just failed moved further than every one before it.
func (r *Reconnecting) retry(ctx context.Context, op func(c *Client) error, progressed func() bool) error {
	n := retryCount{p: &r.policy}
	for {
		moved := false
		s, err := r.session(ctx)
		switch {
		case err == nil:
			if err = op(s.c); !r.lost(ctx, s, err) {
				return err
			}
			moved = progressed()
			r.drop(s)
		case r.stopped(ctx) != nil:
			return err
		}
		d, ok := n.failed(moved)
		if !ok {
			return err
		}
		if perr := r.pause(ctx, err, d, &n); perr != nil {
			return fmt.Errorf("%w, waiting to retry after: %w", perr, err)
		}
	}
}

// idempotent runs op with retries: running it again after a drop leaves what running
// it once does.
func (r *Reconnecting) idempotent(ctx context.Context, op func(c *Client) error) error {
	return r.retry(ctx, op, func() bool { return false })
}

// once runs op once on a live connection, dialling one first if needed (a request
// made on a connection known dead never goes out), and does not repeat it: when the
// connection is lost after that, its error matches ErrOutcomeUnknown. A connection
// that dies between the look and the request makes an error that says unknown of a
// request that did not go out: never the other way round.
func (r *Reconnecting) once(ctx context.Context, op func(c *Client) error) error {
	var c *Client
	if err := r.idempotent(ctx, func(cl *Client) error { c = cl; return nil }); err != nil {
		return err
	}
	err := op(c)
	if errors.Is(err, net.ErrClosed) && ctx.Err() == nil && r.life.Err() == nil {
		return &outcomeUnknownError{err: err}
	}
	return err
}

// The operations that are retried.

// Stat is Client.Stat, retried after a drop.
func (r *Reconnecting) Stat(ctx context.Context, name string) (fi fs.FileInfo, err error) {
	err = r.idempotent(ctx, func(c *Client) error { fi, err = c.Stat(ctx, name); return err })
	return fi, err
}

// Lstat is Client.Lstat, retried after a drop.
func (r *Reconnecting) Lstat(ctx context.Context, name string) (fi fs.FileInfo, err error) {
	err = r.idempotent(ctx, func(c *Client) error { fi, err = c.Lstat(ctx, name); return err })
	return fi, err
}

// ReadDir is Client.ReadDir, retried after a drop: the listing is read again whole.
func (r *Reconnecting) ReadDir(ctx context.Context, name string) (es []fs.DirEntry, err error) {
	err = r.idempotent(ctx, func(c *Client) error { es, err = c.ReadDir(ctx, name); return err })
	return es, err
}

// ReadFile is Client.ReadFile, retried after a drop: the file is read again whole.
func (r *Reconnecting) ReadFile(ctx context.Context, name string) (data []byte, err error) {
	err = r.idempotent(ctx, func(c *Client) error { data, err = c.ReadFile(ctx, name); return err })
	return data, err
}

// RealPath is Client.RealPath, retried after a drop.
func (r *Reconnecting) RealPath(ctx context.Context, name string) (p string, err error) {
	err = r.idempotent(ctx, func(c *Client) error { p, err = c.RealPath(ctx, name); return err })
	return p, err
}

// Open is Client.Open, retried after a drop. The File belongs to the connection it was
// opened on: once that dies, its methods fail with an error matching net.ErrClosed,
// and it is to be opened again.
func (r *Reconnecting) Open(ctx context.Context, name string) (f *File, err error) {
	err = r.idempotent(ctx, func(c *Client) error { f, err = c.Open(ctx, name); return err })
	return f, err
}

// Chmod is Client.Chmod, retried after a drop.
func (r *Reconnecting) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return r.idempotent(ctx, func(c *Client) error { return c.Chmod(ctx, name, mode) })
}

// Chtimes is Client.Chtimes, retried after a drop.
func (r *Reconnecting) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return r.idempotent(ctx, func(c *Client) error { return c.Chtimes(ctx, name, atime, mtime) })
}

// Truncate is Client.Truncate, retried after a drop.
func (r *Reconnecting) Truncate(ctx context.Context, name string, size int64) error {
	return r.idempotent(ctx, func(c *Client) error { return c.Truncate(ctx, name, size) })
}

// MkdirAll is Client.MkdirAll, retried after a drop: a directory the first try made
// is there for the second.
func (r *Reconnecting) MkdirAll(ctx context.Context, name string, perm fs.FileMode) error {
	return r.idempotent(ctx, func(c *Client) error { return c.MkdirAll(ctx, name, perm) })
}

// RemoveAll is Client.RemoveAll, retried after a drop: what the first try removed is
// gone for the second.
func (r *Reconnecting) RemoveAll(ctx context.Context, name string) error {
	return r.idempotent(ctx, func(c *Client) error { return c.RemoveAll(ctx, name) })
}

// The operations that are not repeated once sent.

// Rename is Client.Rename. It is not repeated once sent: see ErrOutcomeUnknown.
func (r *Reconnecting) Rename(ctx context.Context, oldname, newname string) error {
	return r.once(ctx, func(c *Client) error { return c.Rename(ctx, oldname, newname) })
}

// Remove is Client.Remove. It is not repeated once sent: see ErrOutcomeUnknown.
func (r *Reconnecting) Remove(ctx context.Context, name string) error {
	return r.once(ctx, func(c *Client) error { return c.Remove(ctx, name) })
}

// Mkdir is Client.Mkdir. It is not repeated once sent: see ErrOutcomeUnknown.
func (r *Reconnecting) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	return r.once(ctx, func(c *Client) error { return c.Mkdir(ctx, name, perm) })
}

// Symlink is Client.Symlink. It is not repeated once sent: see ErrOutcomeUnknown.
func (r *Reconnecting) Symlink(ctx context.Context, oldname, newname string) error {
	return r.once(ctx, func(c *Client) error { return c.Symlink(ctx, oldname, newname) })
}

// Link is Client.Link. It is not repeated once sent: see ErrOutcomeUnknown.
func (r *Reconnecting) Link(ctx context.Context, oldname, newname string) error {
	return r.once(ctx, func(c *Client) error { return c.Link(ctx, oldname, newname) })
}
