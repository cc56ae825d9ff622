package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Keepalive: learning that a server went silent.
//
// A connection can die without a word: a cable pulled, a NAT or firewall that forgot
// the flow, a Wi-Fi roam. No FIN or RST arrives, and TCP's own keepalive (if on at all)
// waits hours. Every call waiting on such a connection would wait for ever, and the
// Client would look alive. So the Client asks each SSH connection it uses, every
// interval, for a sign of life, and gives the connection up when none has come for
// count intervals:
//
//   - The probe is an SSH global request, keepalive@openssh.com with want-reply, as
//     OpenSSH's ServerAliveInterval sends. Every SSH server must answer a global
//     request it does not know (RFC 4254 4: SSH_MSG_REQUEST_FAILURE), and the answer
//     comes from the SSH layer, whatever the SFTP server is doing: a CLOSE the server
//     spends minutes on (an upload flushed to an object store) holds up that request's
//     reply, never the keepalive's. So the probe tells a slow server from a dead
//     connection, where a probe through the SFTP server (which answers in order on
//     most servers) could not.
//   - Anything the server sends on the connection's SFTP channels counts as life too
//     (lifeClock), as any packet does for OpenSSH: on a slow link with many lanes the
//     keepalive's reply may queue behind megabytes of DATA, and must not be taken for
//     silence while that data keeps arriving.
//   - Given up, the connection's channels fail with errServerSilent, so every call
//     waiting on them returns the package's dead-channel error (net.ErrClosed, the
//     cause inside). The main channel's connection failing fails the Client (Done,
//     Err); a dialled connection (WithDialer) failing drops its lanes, and a transfer
//     goes on over the others, as for a lane whose connection was reset. The Client
//     closes a connection it dialled; the caller's it leaves to the caller.
//
// x/crypto's SendRequest blocks until the reply and takes no context, so each
// connection has one goroutine that sends the probe and waits in it, and a timer
// (sshKeepalive.judge) that gives the connection up when the wait has gone on too
// long. On a connection given up the goroutine ends when the connection closes.
//
// A pipe (NewClientPipe) has no SSH layer: the only probe there is an SFTP request,
// and an in-order server answers it only after whatever was sent before it, however
// long that takes. So on a pipe the Client judges silence only while its probe is the
// oldest request the server has not answered (sftpKeepalive): the server then has
// nothing else to do, and silence cannot be a slow reply to something else. A pipe
// whose server is busy with a long request when the link goes silent is not given
// up by the Client: the transport's own keepalive (ssh -o ServerAliveInterval) is
// what can see that.

// keepaliveRequest is the global request a probe sends: OpenSSH's client sends it, and
// servers that do not know it answer with a failure, which is just as alive.
// The keepalive's default (WithKeepalive): a probe every 10 s, and a connection with
// nothing from it for 3 of them given up. A silent link is noticed within about 30 s,
// sooner than most callers give up on a request, and within the idle limits of the
// servers that drop quiet sessions (Files.com 60 s, Azure Blob Storage 2 minutes);
// each probe is one small message each way.
const (
	defaultKeepaliveInterval = 10 * time.Second
	defaultKeepaliveCount    = 3
)

const keepaliveRequest = "keepalive@openssh.com"

// keepaliveSpec is what WithKeepalive set.
type keepaliveSpec struct {
	interval time.Duration // 0: off
	count    int
	set      bool // given by the caller (a pipe probes only then)
}

// silence is how long a connection may stay silent before it is given up.
func (k keepaliveSpec) silence() time.Duration { return time.Duration(k.count) * k.interval }

// WithKeepalive sets how the Client learns that the server went silent (the link
// dropped without a word: no FIN, no reset). Every interval it sends a keepalive on
// each SSH connection it uses (the SSH global request keepalive@openssh.com, as
// OpenSSH's ServerAliveInterval does), and when count intervals pass with neither an
// answer nor anything else from the server on that connection, it gives the
// connection up: every call waiting on it fails with an error matching net.ErrClosed
// that says the server stopped answering. On the main channel's connection that ends
// the Client (Done is closed, Err says why); a connection dialled for lanes
// (WithDialer) is closed and its lanes dropped, and transfers go on over the others.
//
// It is on by default, every 10 s with a count of 3: a service holds a Client for
// days, and a link that goes silent would otherwise hold every call on it, and the
// Client, for ever. About 30 s is sooner than most callers give up on a request, and
// the traffic is one small message each way per interval. It also keeps the
// connection in use for middleboxes and servers that drop idle ones (Files.com after
// 60 s, Azure Blob Storage after 2 minutes). A slow SFTP reply (a CLOSE that uploads
// to an object store) does not count as silence: the server's SSH layer answers the
// keepalive meanwhile.
//
// WithKeepalive(0, 0) turns it off. interval must be at most a day and count 1 to
// 1000. A pipe Client (NewClientPipe) has no SSH layer: it probes only when
// WithKeepalive is given, with an SFTP request (REALPATH of ".") on its main channel,
// and gives that channel up only when the request is the oldest one unanswered, so
// that a slow reply to another request is never taken for silence; during a long
// request on a pipe, and on the pipes of WithPipeOpener, only the transport's own
// keepalive (ssh -o ServerAliveInterval) can tell.
func WithKeepalive(interval time.Duration, count int) Option {
	return func(o *options) error {
		switch {
		case interval == 0:
			o.keepalive = keepaliveSpec{set: true}
			return nil
		case interval < 0 || interval > 24*time.Hour:
			return fmt.Errorf("sftp: WithKeepalive(%v, %d): want an interval of 0 (off) to 24h", interval, count)
		case count < 1 || count > 1000:
			return fmt.Errorf("sftp: WithKeepalive(%v, %d): want a count of 1 to 1000", interval, count)
		}
		o.keepalive = keepaliveSpec{interval: interval, count: count, set: true}
		return nil
	}
}

// WithSFTPKeepalive makes the Client send a no-op SFTP request (REALPATH of ".") on
// its main channel every interval: for servers that close a session with no SFTP
// request for a while, whatever the SSH layer does (SFTPGo's idle_timeout, 15 minutes
// by default, counts only SFTP commands). Off by default (0): it keeps a session the
// server would have reaped, for as long as the Client is open. Its replies are not
// judged, except on a pipe Client that also has WithKeepalive (see there); liveness
// is WithKeepalive's.
func WithSFTPKeepalive(interval time.Duration) Option {
	return func(o *options) error {
		if interval < 0 || interval > 24*time.Hour {
			return fmt.Errorf("sftp: WithSFTPKeepalive(%v): want 0 (off) to 24h", interval)
		}
		o.sftpKeepalive = interval
		return nil
	}
}

// errServerSilent is why a connection that stopped answering was given up.
type errServerSilent struct {
	probe    string // what went unanswered
	interval time.Duration
	count    int
}

func (e *errServerSilent) Error() string {
	return fmt.Sprintf("the server stopped answering: no reply to %s and no data for %v (%d x %v, WithKeepalive)",
		e.probe, time.Duration(e.count)*e.interval, e.count, e.interval)
}

// lifeClock is when a connection last showed life: a probe answered, or any bytes read
// on its SFTP channels. Its times are durations since its start, so they are
// monotonic (and, in a synctest bubble, on the bubble's clock).
type lifeClock struct {
	start time.Time
	last  atomic.Int64
}

func newLifeClock() *lifeClock { return &lifeClock{start: time.Now()} }

// now is the time on l's clock.
func (l *lifeClock) now() int64 { return int64(time.Since(l.start)) }

// saw records life now. Reads come from every channel's reader at once, so a time
// less than a millisecond newer is not stored.
func (l *lifeClock) saw() {
	now := l.now()
	if now-l.last.Load() >= int64(time.Millisecond) {
		storeMax(&l.last, now)
	}
}

// reader is r with every read that returns data counted as life; r itself when l is
// nil.
func (l *lifeClock) reader(r io.Reader) io.Reader {
	if l == nil {
		return r
	}
	return &lifeReader{r: r, life: l}
}

type lifeReader struct {
	r    io.Reader
	life *lifeClock
}

func (r *lifeReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.life.saw()
	}
	return n, err
}

// sshKeepalive probes one SSH connection (see the top of this file).
type sshKeepalive struct {
	spec     keepaliveSpec
	send     func() error               // the probe: returns when it is answered or the connection ends
	silent   func(cause error)          // gives the connection up; runs at most once
	answered func()                     // nil, or a test's count of answers
	missed   func(silent time.Duration) // an interval of the probe out gone unanswered (observe.go)
	life     *lifeClock

	stop chan struct{} // closed by halt
	done chan struct{} // closed when the prober has returned

	mu      sync.Mutex
	halted  bool
	dead    bool // given up: the prober ends with the connection
	out     bool // a probe is out, since sent (life's clock)
	sent    int64
	misses  int64          // intervals the probe out has been looked at unanswered (look)
	judge   *time.Timer    // fires when the probe out may have been out too long
	judging sync.WaitGroup // a judge giving the connection up
}

// startSSHKeepalive starts probing sc as spec says, or returns nil when it is off.
// silent runs (once, on a timer's goroutine) when sc has stopped answering.
func startSSHKeepalive(sc *ssh.Client, spec keepaliveSpec, life *lifeClock, silent func(error), answered func(), missed func(time.Duration)) *sshKeepalive {
	if spec.interval <= 0 {
		return nil
	}
	k := &sshKeepalive{
		spec: spec, silent: silent, life: life, answered: answered, missed: missed,
		send: func() error {
			_, _, err := sc.SendRequest(keepaliveRequest, true, nil)
			return err
		},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go k.run()
	return k
}

// run sends a probe every interval after the last was answered, until halted or the
// connection is given up or ends.
func (k *sshKeepalive) run() {
	defer close(k.done)
	tick := time.NewTimer(k.spec.interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-k.stop:
			return
		}
		if !k.probe() {
			return
		}
		tick.Reset(k.spec.interval)
	}
}

// probe sends one probe and waits for its answer while the judge watches the time.
// It reports whether to go on.
func (k *sshKeepalive) probe() bool {
	k.mu.Lock()
	if k.halted {
		k.mu.Unlock()
		return false
	}
	k.out, k.sent, k.misses = true, k.life.now(), 0
	wait := k.look(k.sent)
	if k.judge == nil {
		k.judge = time.AfterFunc(wait, k.check)
	} else {
		k.judge.Reset(wait)
	}
	k.mu.Unlock()
	err := k.send()
	if err == nil {
		k.life.saw()
		if k.answered != nil {
			k.answered()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.out = false // a judge running now finds no probe out
	k.judge.Stop()
	return err == nil && !k.dead && !k.halted
}

// deadline is when the probe out has gone unanswered too long. Called with mu held.
func (k *sshKeepalive) deadline() int64 { return silentAt(k.spec, k.life, k.sent) }

// silentAt is when a probe sent at sent (life's clock) has gone unanswered too long: count
// intervals after the connection last showed life, and no sooner than an interval
// after the probe went out (with a count of 1 the probe goes out just as the last
// life turns an interval old).
func silentAt(spec keepaliveSpec, life *lifeClock, sent int64) int64 {
	return max(life.last.Load()+int64(spec.silence()), sent+int64(spec.interval))
}

// check runs when the judge's timer fires: it gives the connection up if the probe out
// is past its deadline, and otherwise sets the timer for its next look (look: the
// probe's next interval, or the deadline as it now is).
func (k *sshKeepalive) check() {
	k.mu.Lock()
	if k.halted || k.dead || !k.out {
		k.mu.Unlock()
		return
	}
	now := k.life.now()
	if next := k.look(now); k.deadline() > now {
		k.judge.Reset(next)
		k.mu.Unlock()
		return
	}
	k.dead = true
	k.judging.Add(1) // before halt can Wait: both happen under mu
	k.mu.Unlock()
	defer k.judging.Done()
	k.silent(&errServerSilent{probe: keepaliveRequest, interval: k.spec.interval, count: k.spec.count})
}

// halt stops probing; it does not wait (see wait). A nil k is off.
func (k *sshKeepalive) halt() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.halted {
		k.halted = true
		close(k.stop)
		if k.judge != nil {
			k.judge.Stop()
		}
	}
}

// wait waits, after halt, for a judge giving the connection up, and for the prober,
// whose probe returns only when answered or when the connection ends: for a
// connection the Client closes (limit < 0), until it has; for the caller's, at most
// limit, and not at all once it was given up (its prober then ends when the caller
// closes the connection).
func (k *sshKeepalive) wait(limit time.Duration) {
	if k == nil {
		return
	}
	k.judging.Wait()
	if limit < 0 {
		<-k.done
		return
	}
	k.mu.Lock()
	dead := k.dead
	k.mu.Unlock()
	if dead {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-k.done:
	case <-t.C:
	}
}

// keepAlive starts l's keepalive, if on. Called before anything else can see l.alive,
// or with s.mu held.
func (s *sshChannels) keepAlive(l *sshLink) {
	l.alive = startSSHKeepalive(l.sc, s.c.opts.keepalive, l.life,
		func(cause error) { s.silenced(l, cause) }, s.c.opts.keepaliveAnswered,
		func(silent time.Duration) { s.c.obs.missed(l.num, silent, s.c.opts.keepalive.silence()) })
}

// silenced gives up a connection that stopped answering: every channel on it fails
// with cause, and no new one goes there. A connection the Client dialled is then
// closed, which ends everything still waiting on it; the caller's is the caller's to
// close.
func (s *sshChannels) silenced(l *sshLink, cause error) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(l.conns))
	for cn := range l.conns {
		conns = append(conns, cn)
	}
	gone := l.dead
	l.dead = true
	if !gone && l.owned {
		s.remove(l)
	}
	s.mu.Unlock()
	if !gone {
		s.c.obs.linkEnded(l, cause, false)
	}
	// The channels fail first, so that what they report is the silence, not the
	// connection's close that follows.
	giveUpAll(conns, cause)
	if !gone && l.owned {
		l.sc.Close()
	}
}

// giveUp fails the channel with cause as one whose transport will not answer: closing
// it then does not wait for its reader and writer, which a silent connection holds
// until it is closed (see shutdown).
func (c *conn) giveUp(cause error) {
	c.mu.Lock()
	c.ws.stalled = true
	c.mu.Unlock()
	c.fail(cause)
}

// giveUpAll gives every channel in conns up with cause, in parallel: failing one
// sends its CHANNEL_CLOSE, which on a silent connection may wait for the transport.
func giveUpAll(conns []*conn, cause error) {
	var wg sync.WaitGroup
	for _, cn := range conns {
		wg.Go(func() { cn.giveUp(cause) })
	}
	wg.Wait()
}

// sftpKeepalive sends REALPATH "." on one channel every interval: to keep a server
// that counts only SFTP requests as activity from closing the session
// (WithSFTPKeepalive), and on a pipe, the only probe there is, to give the channel
// up when it stops answering (judge set: see the top of this file).
type sftpKeepalive struct {
	cn       *conn
	interval time.Duration
	judge    keepaliveSpec // interval 0: replies are not judged
	life     *lifeClock    // reads on the channel, when judging
	answered func()        // nil, or a test's count of answers
	stop     chan struct{}
	done     chan struct{}
	haltOnce sync.Once
}

// startSFTPKeepalive starts probing cn every interval, or returns nil when there is
// nothing to do. A judge (a pipe's keepalive, life counting the channel's reads)
// probes at its own interval if that is the shorter.
func startSFTPKeepalive(cn *conn, every time.Duration, judge keepaliveSpec, life *lifeClock, answered func()) *sftpKeepalive {
	p := &sftpKeepalive{cn: cn, interval: every, judge: judge, life: life, answered: answered}
	if judge.interval > 0 && (every <= 0 || judge.interval < every) {
		p.interval = judge.interval
	}
	if p.interval <= 0 {
		return nil
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.run()
	return p
}

func (p *sftpKeepalive) run() {
	defer close(p.done)
	tick := time.NewTimer(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-p.stop:
			return
		case <-p.cn.done:
			return
		}
		if !p.probe() {
			return
		}
		tick.Reset(p.interval)
	}
}

// probe sends one REALPATH and waits for its reply, judging silence meanwhile if it
// judges. It reports whether to go on.
func (p *sftpKeepalive) probe() bool {
	var sent int64
	if p.life != nil {
		sent = p.life.now()
	}
	id := p.cn.newID()
	cl := p.cn.start(context.Background(), appendString1(nil, sshfx.TypeRealpath, id, "."), nil)
	if cl.err != nil {
		return false
	}
	var judge *time.Timer
	var judged <-chan time.Time // nil, never ready, when not judging
	if p.judge.interval > 0 {
		judge = time.NewTimer(p.silentFor(id, sent))
		defer judge.Stop()
		judged = judge.C
	}
	// The wait is call.wait's, with the judge and halt beside the reply.
	for {
		select {
		case r := <-cl.ch:
			r, err := cl.got(r)
			return err == nil && p.reply(r)
		case <-p.stop:
			cl.abandon()
			return false
		case <-p.cn.done:
			return false
		case <-judged:
			left := p.silentFor(id, sent)
			if left <= 0 {
				p.cn.giveUp(&errServerSilent{probe: "REALPATH", interval: p.judge.interval, count: p.judge.count})
				return false
			}
			judge.Reset(left)
		}
	}
}

// silentFor returns how long the probe id (sent at sent) may still go unanswered: 0
// when the channel has been silent long enough with the probe the oldest request out.
// While an older request is out, the server may be busy with it: check again an
// interval later.
func (p *sftpKeepalive) silentFor(id uint32, sent int64) time.Duration {
	if p.cn.waitingBefore(id) {
		return p.judge.interval
	}
	return time.Duration(silentAt(p.judge, p.life, sent) - p.life.now())
}

// reply takes the probe's reply: any STATUS or NAME is an answer; another type
// breaks the protocol and fails the channel.
func (p *sftpKeepalive) reply(r response) bool {
	if r.err != nil {
		return false
	}
	defer r.release()
	var err error
	if r.typ == sshfx.TypeName {
		_, err = decodeName("REALPATH", &r)
	} else {
		err = otherReply("REALPATH", &r, sshfx.TypeName)
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		p.cn.check(err)
		return false
	}
	if p.life != nil {
		p.life.saw()
	}
	if p.answered != nil {
		p.answered()
	}
	return true
}

// halt stops probing and waits for the prober, which then returns at once: its probe
// is abandoned. A nil p is off.
func (p *sftpKeepalive) halt() {
	if p == nil {
		return
	}
	p.haltOnce.Do(func() { close(p.stop) })
	<-p.done
}

// waitingBefore reports whether a request sent on c before id is still waiting for
// its reply (or was given up by its caller and not answered yet): the server has it
// in hand. Ids come from one counter, so older is smaller (modulo wrap-around).
func (c *conn) waitingBefore(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other := range c.pending {
		if int32(other-id) < 0 {
			return true
		}
	}
	return false
}
