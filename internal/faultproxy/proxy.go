// Package faultproxy is a TCP proxy on 127.0.0.1 that breaks the connections it
// forwards, on command or on a plan decided per connection: for tests of what a client
// does when its connection is reset, goes silent, or is half-closed mid-transfer.
//
// A fault is one of:
//
//   - Reset: both peers get a TCP RST (a crashed middlebox, a NAT that forgot the
//     flow): their next Read or Write fails with ECONNRESET.
//   - BlackHole: nothing more passes either way, and neither peer is told: no FIN, no
//     RST. Their writes fill the kernels' buffers and then block; their reads wait.
//     The proxy keeps both sockets open, unread, until it is closed. This is a link
//     that went silent (a cable pulled, a Wi-Fi roam, a firewall dropping the flow).
//   - HalfCloseDown: the target-to-client direction ends: the client reads EOF (a
//     FIN) after what had passed; its own writes still reach the target.
//   - HalfCloseUp: the client-to-target direction ends: the target reads EOF after
//     what had passed; what the client writes from then on is not read (its writes
//     block once the kernel's buffer is full); the target's writes still reach the
//     client.
//
// Faults come from Break (every live connection, now) or from a Plan given to New,
// which decides for each accepted connection, by its number, after how many bytes
// (both directions together) which fault happens. Seeded draws a plan from a seed, so
// a test's schedule is repeatable. Wait lets a test know a fault has happened without
// sleeping.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Fault is what happens to a connection.
type Fault int

const (
	// None leaves the connection alone.
	None Fault = iota
	Reset
	BlackHole
	HalfCloseDown
	HalfCloseUp
)

func (f Fault) String() string {
	switch f {
	case None:
		return "none"
	case Reset:
		return "reset"
	case BlackHole:
		return "black hole"
	case HalfCloseDown:
		return "half-close down"
	case HalfCloseUp:
		return "half-close up"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Step is what a Plan decides for one connection: once After bytes have passed
// (client to target and back, counted together), Fault happens. A connection whose
// Step has Fault None is never broken by the plan (Break still acts on it).
type Step struct {
	After int64
	Fault Fault
}

// Plan decides the Step of the n-th accepted connection (from 0). It is called once
// per connection, from the goroutine that accepted it.
type Plan func(n int) Step

// Seeded returns a Plan that, for each connection, draws from seed and the
// connection's number a fault among faults (None included if it is given, to leave
// some connections alone) and a byte count in [min, max). The same seed gives the same
// steps, whatever order connections are served in.
func Seeded(seed uint64, min, max int64, faults ...Fault) Plan {
	if max <= min {
		max = min + 1
	}
	return func(n int) Step {
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		f := None
		if len(faults) > 0 {
			f = faults[r.IntN(len(faults))]
		}
		return Step{After: min + r.Int64N(max-min), Fault: f}
	}
}

// OnlyFirst returns a Plan that breaks the first n connections as step says and
// leaves every later one alone: a client that reconnects then gets through.
func OnlyFirst(n int, step Step) Plan {
	return func(i int) Step {
		if i < n {
			return step
		}
		return Step{}
	}
}

// Option configures a Proxy.
type Option func(*Proxy) error

// WithPlan breaks connections as plan decides.
func WithPlan(plan Plan) Option {
	return func(p *Proxy) error {
		if plan == nil {
			return errors.New("faultproxy: nil plan")
		}
		p.plan = plan
		return nil
	}
}

// Proxy accepts connections on a loopback port and forwards each to the target.
type Proxy struct {
	target string
	plan   Plan
	ln     net.Listener
	ctx    context.Context // cancelled by Close: ends dials still under way
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu       sync.Mutex
	closed   bool
	accepted int
	conns    map[*link]struct{}
	faults   int           // faults that have happened, by plan or Break
	changed  chan struct{} // closed and replaced whenever faults changes or the proxy closes

	closeOnce sync.Once
	closeErr  error
}

// New listens on 127.0.0.1:0 and forwards every connection to target.
func New(target string, opts ...Option) (*Proxy, error) {
	p := &Proxy{target: target, conns: map[*link]struct{}{}, changed: make(chan struct{})}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p.ln = ln
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted is how many connections the proxy has accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Faults is how many faults have happened so far, by plan or Break.
func (p *Proxy) Faults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// Wait returns once at least n faults have happened, or with ctx's error, or with
// net.ErrClosed once the proxy is closed with fewer.
func (p *Proxy) Wait(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		faults, closed, ch := p.faults, p.closed, p.changed
		p.mu.Unlock()
		switch {
		case faults >= n:
			return nil
		case closed:
			return net.ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Break applies f to every live connection now and returns how many it broke.
// Nothing passes a connection once Break has returned, but what was already on its
// way (in a kernel's buffers) may still arrive.
func (p *Proxy) Break(f Fault) int {
	p.mu.Lock()
	list := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		list = append(list, l)
	}
	p.mu.Unlock()
	n := 0
	for _, l := range list {
		if l.apply(f) {
			n++
		}
	}
	return n
}

// Close stops accepting, closes every connection (the peers see their sockets closed,
// with a FIN, or an RST where data was unread) and waits for every goroutine of the
// proxy to end.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		list := make([]*link, 0, len(p.conns))
		for l := range p.conns {
			list = append(list, l)
		}
		p.notify()
		p.mu.Unlock()
		p.cancel()
		p.closeErr = p.ln.Close()
		for _, l := range list {
			l.close()
		}
		p.wg.Wait()
	})
	return p.closeErr
}

// notify wakes Wait; p.mu must be held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) counted() {
	p.mu.Lock()
	p.faults++
	p.notify()
	p.mu.Unlock()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by Close
		}
		p.mu.Lock()
		n := p.accepted
		p.accepted++
		p.mu.Unlock()
		var step Step
		if p.plan != nil {
			step = p.plan(n)
		}
		p.wg.Add(1)
		go p.serve(c.(*net.TCPConn), step)
	}
}

// serve dials the target for one accepted connection and forwards both directions.
func (p *Proxy) serve(client *net.TCPConn, step Step) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 10 * time.Second}
	tc, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	l := newLink(p, client, tc.(*net.TCPConn), step)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	l.run()
}
