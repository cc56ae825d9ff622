package sftp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Channel sources. The channelPool (channelpool.go) keeps the SFTP channels a Client stripes
// over; a channel source is where it gets a new one, whatever the transport:
//
//   - sshChannels: a session on an SSH connection: the caller's, and with WithDialer more
//     connections the Client dials to the same server, when the server refuses another
//     session on the ones it has (sshd MaxSessions) and to spread the channels so that each
//     connection's cipher stream (and sshd process) carries only a few of them;
//   - pipeChannels: a fresh pair of pipes from WithPipeOpener (another `ssh -s sftp`).
//
// Channels are kept by the channelPool across transfers and closed with the Client; the
// source closes what else it owns (the dialled connections) after them.

// defaultChannelsPerConn is how many channels share one SSH connection before the
// Client dials another (with WithDialer). Each connection is one cipher stream, run by
// one goroutine here and one sshd process there. It was measured on the project's
// 2-core machine at RTT 50 ms (see docs/design.md, "Channels and where they come
// from").
const defaultChannelsPerConn = 8

// maxDialing bounds the dials one Client has under way. sshd drops connections that
// have not logged in yet past its MaxStartups (10 by default), and a failed dial ends
// the Client's striping growth.
const maxDialing = 4

// maxChannelAttempts bounds how often one open moves on to another connection after a
// refused session or a dead connection.
const maxChannelAttempts = 3

// channelSource opens the extra SFTP channels of a Client.
type channelSource interface {
	// open starts one more SFTP channel. An error while ctx is live means the source
	// cannot give more channels (the server refused, the dialer or opener failed), and the
	// Client stops asking.
	open(ctx context.Context) (*conn, error)
	// close cancels opens under way and closes what the source owns. It runs after
	// the channelPool has closed every channel.
	close()
}

var errNoMoreSessions = errors.New("sftp: the server refuses more sessions and no dialer was given")

// sshChannels opens channels as sessions on SSH connections.
type sshChannels struct {
	c    *Client
	dial func(context.Context) (*ssh.Client, error) // nil: the caller's connection only
	// pipeline: the server is known to take a session's requests and data in order,
	// so the subsystem request goes out without waiting for its reply (see session).
	pipeline bool
	life     context.Context // ends with close: stops opens under way
	stop     context.CancelFunc
	dialing  chan struct{} // a token per dial under way (maxDialing)

	base *sshLink // the caller's connection, once the main channel is open on it

	mu       sync.Mutex
	links    []*sshLink // links[0] is the caller's connection until it is given up
	perConn  int        // most channels on one connection; lowered when a server refuses
	closed   bool
	watchers sync.WaitGroup // one per dialled connection, until it is closed
}

// sshLink is one SSH connection and the channels on it.
type sshLink struct {
	sc       *ssh.Client   // set once ready is closed, if err is nil
	ready    chan struct{} // closed when the dial is over
	err      error         // why the dial failed
	owned    bool          // dialled by the Client, which closes it
	channels int           // channels open or being opened on it
	live     int           // channels open on it
	full     bool          // the server refused a session on it
	dead     bool
	num      int64 // its number in logged events: 0 the caller's, then each dialled (observe.go)

	life  *lifeClock         // when it last showed life (keepalive.go); nil when off
	alive *sshKeepalive      // its keepalive; nil when off
	conns map[*conn]struct{} // the channels open on it, given up if it goes silent
}

func newSSHChannels(c *Client, base *ssh.Client) *sshChannels {
	ready := make(chan struct{})
	close(ready)
	s := &sshChannels{c: c, dial: c.opts.dial, perConn: c.opts.channelsPerConn,
		links: []*sshLink{newSSHLink(base, ready, c.opts.keepalive)}, dialing: make(chan struct{}, maxDialing)}
	s.life, s.stop = context.WithCancel(context.Background())
	return s
}

// newSSHLink is a connection's entry, its life counted when the keepalive is on.
func newSSHLink(sc *ssh.Client, ready chan struct{}, ka keepaliveSpec) *sshLink {
	l := &sshLink{sc: sc, ready: ready, conns: map[*conn]struct{}{}}
	if ka.interval > 0 {
		l.life = newLifeClock()
	}
	return l
}

// first opens the main channel on the caller's connection, waiting for each reply so
// that a server that refuses something says what, and starts the connection's
// keepalive.
func (s *sshChannels) first(ctx context.Context) (*conn, error) {
	base := s.links[0]
	cn, err := s.c.startSession(ctx, base.sc, base.life, true, nil)
	if err != nil {
		return nil, err
	}
	base.channels, base.live = 1, 1
	base.conns[cn] = struct{}{}
	s.base = base
	s.keepAlive(base)
	// The main channel proved the subsystem (or command) starts: channels need not wait
	// for its reply where the server is known to keep a session's order.
	s.pipeline = inOrderSessions(base.sc.ServerVersion())
	return cn, nil
}

// inOrderSessions reports whether an SSH server is known to hand a session's data to
// its subsystem only after the requests sent before it, so that INIT may follow the
// subsystem request without waiting for its reply. OpenSSH opens a session channel
// with a zero window and opens it once the subsystem runs, so data cannot arrive
// early; dropbear handles a channel's messages in order and starts the subsystem
// while handling its request. Both are tested striping this way (TestStripe*,
// TestDropbearStriped). Other servers get the wait: one round trip more per channel.
func inOrderSessions(serverVersion []byte) bool {
	v := string(serverVersion)
	return strings.HasPrefix(v, "SSH-2.0-OpenSSH_") || strings.HasPrefix(v, "SSH-2.0-dropbear")
}

func (s *sshChannels) open(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	var err error
	for range maxChannelAttempts {
		var t *channelTicket
		if t, err = s.reserve(ctx); err != nil {
			return nil, err
		}
		var cn *conn
		if cn, err = s.session(ctx, t); err == nil {
			return cn, nil
		}
		t.end()
		if !s.failed(ctx, t.l, err) {
			return nil, err
		}
	}
	return nil, err
}

// channelTicket is a channel's place on a connection, from reserve until the
// channel is closed (or could not be opened).
type channelTicket struct {
	s     *sshChannels
	l     *sshLink
	cn    *conn // the channel, once open
	live  bool  // the channel opened
	ended bool
}

// opened counts cn as open on its connection, unless it has already ended (its
// channel may fail, and be closed, before the open returns).
func (t *channelTicket) opened(cn *conn) {
	t.s.mu.Lock()
	if !t.ended {
		t.live = true
		t.l.live++
		t.cn = cn
		t.l.conns[cn] = struct{}{}
	}
	t.s.mu.Unlock()
}

// end gives the place back; only the first call counts.
func (t *channelTicket) end() {
	t.s.mu.Lock()
	if !t.ended {
		t.ended = true
		t.l.channels--
		if t.live {
			t.l.live--
			delete(t.l.conns, t.cn)
		}
	}
	t.s.mu.Unlock()
}

// reserve picks the connection for a new channel: the first with room, or a new one it
// dials. Several opens may wait for the same dial.
func (s *sshChannels) reserve(ctx context.Context) (*channelTicket, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, &closedError{cause: errClientClosed}
	}
	var l *sshLink
	for _, cand := range s.links {
		if !cand.dead && !cand.full && (s.dial == nil || cand.channels < s.perConn) {
			l = cand
			break
		}
	}
	dialNow := false
	if l == nil {
		if s.dial == nil {
			s.mu.Unlock()
			return nil, errNoMoreSessions
		}
		l = newSSHLink(nil, make(chan struct{}), s.c.opts.keepalive)
		l.owned = true
		s.links = append(s.links, l)
		dialNow = true
	}
	l.channels++
	s.mu.Unlock()
	t := &channelTicket{s: s, l: l}
	if dialNow {
		s.dialLink(ctx, l)
	}
	select {
	case <-l.ready:
		if l.err != nil {
			t.end()
			return nil, l.err
		}
		return t, nil
	case <-ctx.Done():
		t.end()
		return nil, ctxError(ctx, "opening a channel")
	}
}

// dialLink dials the connection l stands for, and watches it: when it dies it is
// dropped, so later channels dial anew.
func (s *sshChannels) dialLink(ctx context.Context, l *sshLink) {
	var sc *ssh.Client
	var err error
	select {
	case s.dialing <- struct{}{}:
		sc, err = s.dialOrGiveUp(ctx)
	case <-ctx.Done():
		err = ctxError(ctx, "dialling another connection")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.closed {
		sc.Close()
		err = &closedError{cause: errClientClosed}
	}
	l.sc, l.err = sc, err
	s.c.obs.dialled(l, err)
	if err != nil {
		l.dead = true
		s.remove(l)
	} else {
		s.keepAlive(l)
		s.watchers.Add(1)
		go func() {
			defer s.watchers.Done()
			s.drop(l, sc.Wait())
			l.alive.halt()
			l.alive.wait(-1) // it ends with the connection
		}()
	}
	close(l.ready)
}

// dialOrGiveUp runs the dialer, holding a place in s.dialing until it returns, but
// waits for it no longer than ctx: a dialer that ignores its ctx must not hold
// Client.Close (which cancels ctx) or a transfer past its ctx. A connection such a
// dialer delivers after the wait ended is closed, as nobody will use it.
func (s *sshChannels) dialOrGiveUp(ctx context.Context) (*ssh.Client, error) {
	const op = "dialling another connection"
	sc, _, err := waitWithin(ctx, op, nil, func() (*ssh.Client, error) {
		sc, err := s.dial(ctx)
		<-s.dialing
		switch {
		case err != nil && sc != nil:
			sc.Close() // a connection that comes with an error is not used
		case err == nil && sc == nil:
			err = errors.New("the dialer returned no connection and no error")
		}
		if err != nil {
			return nil, fmt.Errorf("sftp: %s: %w", op, err)
		}
		return sc, nil
	}, func(sc *ssh.Client) { sc.Close() })
	return sc, err
}

// session opens a channel on t's connection. The channel gives its place back when its
// channel is closed.
func (s *sshChannels) session(ctx context.Context, t *channelTicket) (*conn, error) {
	cn, err := s.c.startSession(ctx, t.l.sc, t.l.life, !s.pipeline, t.end)
	if err == nil {
		t.opened(cn)
	}
	return cn, err
}

// failed handles a session l could not give, and reports whether to try another
// connection: when the server refused a session (there is room for fewer channels on
// each connection than thought) or the connection died, and a dialer can make more.
func (s *sshChannels) failed(ctx context.Context, l *sshLink, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var refused *ssh.OpenChannelError
	if !errors.As(err, &refused) {
		if !l.owned {
			return false // the caller's connection failed: the main channel goes with it
		}
		s.drop(l, err)
		return s.dial != nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l.full = true
	if l.live == 0 && l.channels == 0 {
		return false // not even one session: more connections would not help
	}
	// All connections go to the same server, which allows this many. (Sessions still
	// opening on l may not be counted yet: the count errs low, never to zero.)
	s.perConn = max(1, min(s.perConn, l.live))
	return s.dial != nil
}

// drop forgets a dialled connection that died of cause (or was closed), and closes
// it.
func (s *sshChannels) drop(l *sshLink, cause error) {
	s.mu.Lock()
	gone, closing := l.dead, s.closed
	if !gone {
		l.dead = true
		s.remove(l)
	}
	s.mu.Unlock()
	if !gone {
		l.sc.Close()
		s.c.obs.linkEnded(l, cause, closing)
	}
}

func (s *sshChannels) remove(l *sshLink) {
	for i, cand := range s.links {
		if cand == l {
			s.links = append(s.links[:i], s.links[i+1:]...)
			return
		}
	}
}

func (s *sshChannels) close() {
	s.mu.Lock()
	s.closed = true
	var owned []*ssh.Client
	for _, l := range s.links {
		l.alive.halt()
		if l.owned && l.sc != nil && !l.dead {
			owned = append(owned, l.sc)
		}
	}
	s.mu.Unlock()
	s.stop()
	for _, sc := range owned {
		sc.Close()
	}
	s.watchers.Wait() // the dialled connections' keepalives too
	if s.base != nil {
		s.base.alive.halt() // it may have been given up, and left the links
		s.base.alive.wait(s.c.main.stallGrace())
	}
}

// startSession opens a session channel on sc, starts the SFTP server on it (the
// WithEnv variables, then the subsystem or WithServerCommand's command) and speaks
// INIT: the one way a Client gets a channel on an SSH connection, its main channel
// and its data channels alike. x/crypto's channel calls take no ctx, so they run
// under waitWithin: a session that opens after ctx has ended is closed. onClose, if
// not nil, runs when the channel is closed. life, if not nil, counts what the channel
// reads as the connection's life (keepalive.go).
//
// With confirmed, each request waits for the server's answer, and the conn for
// VERSION (newConn), so that a server that refuses something says what: the main
// channel, and the data channels of a server not known to keep a session's order
// (inOrderSessions). Without, the main channel having shown that the server starts,
// the requests and INIT go out back to back (startConn): should one fail after all,
// the server closes the channel, and the channel fails with the reason it reads.
func (c *Client) startSession(ctx context.Context, sc *ssh.Client, life *lifeClock, confirmed bool, onClose func()) (*conn, error) {
	if err := ctxError(ctx, ""); err != nil {
		return nil, err
	}
	ch, _, err := waitWithin(ctx, "opening a session", nil, func() (ssh.Channel, error) {
		// OpenChannel waits for the server's confirmation: the channel has no number
		// to send on before it.
		ch, reqs, err := sc.OpenChannel("session", nil)
		if err != nil {
			return nil, fmt.Errorf("sftp: opening a session: %w", err)
		}
		go ssh.DiscardRequests(reqs) // exit-status and the like; ends with the channel
		if err = c.startServer(ch, confirmed); err != nil {
			ch.Close()
			return nil, err
		}
		return ch, nil
	}, func(ch ssh.Channel) { ch.Close() })
	if err != nil {
		return nil, err
	}
	stderr := c.opts.stderr
	if stderr == nil {
		stderr = io.Discard
	}
	// The server's stderr shares the channel's window: it must be read.
	go io.Copy(stderr, ch.Stderr())
	var r io.Reader = ch
	var w io.WriteCloser = ch
	if c.opts.wrapStreams != nil {
		r, w = c.opts.wrapStreams(r, w)
	}
	r = life.reader(r) // what arrives shows the connection alive (keepalive.go)
	// Closing the channel makes sshd close its side, which ends the reader's Read with
	// EOF, so Close can wait for the reader.
	closer := ch.Close
	if onClose != nil {
		closer = func() error { defer onClose(); return ch.Close() }
	}
	if confirmed {
		return newConn(ctx, r, w, closer, true, &c.dataPool)
	}
	cn, _ := startConn(r, w, closer, true, &c.dataPool)
	return cn, nil
}

// errRefused is a channel request the server answered with a failure.
var errRefused = errors.New("the server refused")

// startServer sends the WithEnv variables and the subsystem or exec request on ch,
// waiting for each answer when confirmed (a refusal is errRefused).
func (c *Client) startServer(ch ssh.Channel, confirmed bool) error {
	request := func(name string, msg any) error {
		ok, err := ch.SendRequest(name, confirmed, ssh.Marshal(msg))
		if err == nil && confirmed && !ok {
			err = errRefused
		}
		return err
	}
	for _, kv := range c.opts.env {
		if err := request("env", &struct{ Name, Value string }{kv[0], kv[1]}); err != nil {
			return fmt.Errorf("sftp: setting %s (OpenSSH's sshd sets only what AcceptEnv names): %w", kv[0], err)
		}
	}
	if c.opts.command != "" {
		if err := request("exec", &struct{ Command string }{c.opts.command}); err != nil {
			return fmt.Errorf("sftp: running the server command: %w", err)
		}
		return nil
	}
	name := cmp.Or(c.opts.subsystem, "sftp")
	if err := request("subsystem", &struct{ Name string }{name}); err != nil {
		return fmt.Errorf("sftp: starting the %s subsystem: %w", name, err)
	}
	return nil
}

// pipeChannels opens channels as pipe pairs from WithPipeOpener.
type pipeChannels struct {
	c      *Client
	openFn func(context.Context) (io.Reader, io.WriteCloser, error)
	life   context.Context // ends with close: stops opens under way
	stop   context.CancelFunc
	// starting holds a token per pipe from the opener until its server's VERSION
	// arrives (or the pipe fails). A pipe is typically a new `ssh` process, whose
	// login is under way until then, and sshd drops connections that have not
	// logged in yet past its MaxStartups (10 by default): 16 `ssh -s sftp` started at
	// once lost 1 to 3 of them in every trial, and a failed open ends the Client's
	// striping growth. So at most maxDialing pipes start at once, as with dials.
	starting chan struct{}
}

func newPipeChannels(c *Client) *pipeChannels {
	p := &pipeChannels{c: c, openFn: c.opts.openPipe, starting: make(chan struct{}, maxDialing)}
	p.life, p.stop = context.WithCancel(context.Background())
	return p
}

// open runs the opener and starts SFTP on its pipes. A pair that arrives after Close
// is closed by the channelPool, which no longer takes channels.
func (p *pipeChannels) open(ctx context.Context) (*conn, error) {
	if p.life.Err() != nil {
		return nil, &closedError{cause: errClientClosed}
	}
	const op = "opening another pipe"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.life, cancel)()
	select {
	case p.starting <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxError(ctx, op)
	}
	// An opener that ignores its ctx must not hold Client.Close (which cancels ctx) or
	// a transfer past its ctx: a pair it delivers after the wait ended is closed. Its
	// place among the pipes starting is given back when it returns.
	pair, _, err := waitWithin(ctx, op, nil, func() (pipePair, error) {
		r, w, err := p.openFn(ctx)
		if err == nil && (r == nil || w == nil) {
			_ = pipePair{r, w}.close()
			err = errors.New("the pipe opener returned a nil reader or writer")
		}
		if err != nil {
			<-p.starting
			return pipePair{}, fmt.Errorf("sftp: %s: %w", op, err)
		}
		return pipePair{r, w}, nil
	}, func(late pipePair) {
		_ = late.close()
		<-p.starting
	})
	if err != nil {
		return nil, err
	}
	r, w := pair.r, pair.w
	closer, closable := pipeCloser(r, w)
	cn, versioned := startConn(r, w, closer, closable, &p.c.dataPool)
	// The channel is returned at once, so that its first request goes out behind INIT;
	// its token stays taken until the server has answered, or the conn has failed or
	// been closed (its reader may stay blocked on a pipe that cannot be closed).
	go func() {
		select {
		case <-versioned:
		case <-cn.done:
		}
		<-p.starting
	}()
	return cn, nil
}

func (p *pipeChannels) close() { p.stop() }

// pipePair is what a pipe opener returns.
type pipePair struct {
	r io.Reader
	w io.WriteCloser
}

// close closes what of the pair is there: w, and r if it is an io.Closer. It returns
// the first error.
func (pp pipePair) close() error {
	var err error
	if pp.w != nil {
		err = pp.w.Close()
	}
	if rc, ok := pp.r.(io.Closer); ok {
		if e := rc.Close(); err == nil {
			err = e
		}
	}
	return err
}

// pipeCloser closes a pipe pair: w, and r too if it is an io.Closer. closable reports
// whether it is, that is whether closing ends the reader's Read.
func pipeCloser(r io.Reader, w io.WriteCloser) (closer func() error, closable bool) {
	_, closable = r.(io.Closer)
	return pipePair{r, w}.close, closable
}
