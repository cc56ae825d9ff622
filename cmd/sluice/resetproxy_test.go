package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// resetProxy is a TCP proxy in front of a server that resets connections on a
// schedule, as a crashing middlebox or a killed server process would, and counts the
// bytes it carries (the bytes on the wire). It is the minimal stand-in the --retries
// tests need until internal/faultproxy (reset, black hole, half-close) lands; it then
// folds onto that.
//
// A cut comes when the bytes carried (both ways, all connections) reach the next
// point of the schedule, or when Cut is called; it resets every connection, or with
// onlyFirst the oldest one alone (a session's main connection, whose lanes stay up).
// refuse makes the next new connections be reset as soon as they are accepted.
type resetProxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	conns     []*proxiedConn // oldest first
	carried   int64
	nextCut   int64 // 0: no cut by bytes
	schedule  func() int64
	onlyFirst bool
	refuse    int
	cuts      int
	changed   chan struct{} // closed and replaced when conns changes

	wg sync.WaitGroup
}

type proxiedConn struct {
	client, server net.Conn
	once           sync.Once
}

// reset ends both sides with an RST (linger 0), not a FIN.
func (c *proxiedConn) reset() {
	c.once.Do(func() {
		for _, nc := range []net.Conn{c.client, c.server} {
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = nc.Close()
		}
	})
}

// newResetProxy starts a proxy to target. schedule gives the bytes to the next cut (0:
// no more), or is nil for cuts by Cut only. It is called with the proxy's lock held,
// so it may change the proxy's fields (refuse, onlyFirst).
func newResetProxy(t testing.TB, target string, schedule func() int64) *resetProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &resetProxy{ln: ln, target: target, schedule: schedule, changed: make(chan struct{})}
	if schedule != nil {
		p.nextCut = schedule()
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *resetProxy) addr() string { return p.ln.Addr().String() }

func (p *resetProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *resetProxy) accept() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse > 0
		if refuse {
			p.refuse--
		}
		p.mu.Unlock()
		if refuse {
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = nc.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = nc.Close()
			continue
		}
		c := &proxiedConn{client: nc, server: server}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.signal()
		p.mu.Unlock()
		var pumps sync.WaitGroup
		pumps.Add(2)
		p.wg.Add(1)
		go p.pump(c, c.server, c.client, &pumps)
		go p.pump(c, c.client, c.server, &pumps)
		go func() {
			defer p.wg.Done()
			pumps.Wait()
			p.forget(c)
		}()
	}
}

// pump copies src to dst, counting, until either side ends; then both are closed.
func (p *resetProxy) pump(c *proxiedConn, dst, src net.Conn, done *sync.WaitGroup) {
	defer done.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
			p.count(int64(n))
		}
		if err != nil {
			c.once.Do(func() { _ = c.client.Close(); _ = c.server.Close() })
			return
		}
	}
}

// count adds n carried bytes, and cuts when the schedule says.
func (p *resetProxy) count(n int64) {
	p.mu.Lock()
	p.carried += n
	cut := p.nextCut > 0 && p.carried >= p.nextCut
	if cut {
		p.nextCut = 0
		if next := p.schedule(); next > 0 {
			p.nextCut = p.carried + next
		}
	}
	p.mu.Unlock()
	if cut {
		p.Cut()
	}
}

// Cut resets the connections now (every one, or with onlyFirst the oldest).
func (p *resetProxy) Cut() {
	p.mu.Lock()
	victims := p.conns
	if p.onlyFirst && len(victims) > 1 {
		victims = victims[:1]
	}
	victims = append([]*proxiedConn(nil), victims...)
	if len(victims) > 0 {
		p.cuts++
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.reset()
	}
}

func (p *resetProxy) forget(c *proxiedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.conns {
		if o == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	p.signal()
}

// signal wakes waitConns; p.mu must be held.
func (p *resetProxy) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitConns waits until at most n connections are open through the proxy.
func (p *resetProxy) waitConns(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		open, changed := len(p.conns), p.changed
		p.mu.Unlock()
		if open <= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return errors.Join(ctx.Err(), errors.New("connections still open through the proxy"))
		}
	}
}

// stats are the bytes carried and the cuts made so far.
func (p *resetProxy) stats() (carried int64, cuts int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.carried, p.cuts
}

// set changes the proxy's behaviour under its lock.
func (p *resetProxy) set(f func(p *resetProxy)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *resetProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	conns := append([]*proxiedConn(nil), p.conns...)
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
	p.wg.Wait()
}

// cutEvery cuts at intervals drawn from [lo, hi) with a seeded generator, until the
// returned stop is called.
func (p *resetProxy) cutEvery(lo, hi time.Duration, seed uint64) (stop func()) {
	rng := rand.New(rand.NewPCG(seed, 1))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			t := time.NewTimer(lo + time.Duration(rng.Int64N(int64(hi-lo))))
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
				p.Cut()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// cutsEvery is a schedule of cuts every n bytes.
func cutsEvery(n int64) func() int64 { return func() int64 { return n } }

// cutsAt is a schedule of cuts after each of gaps in turn, then none.
func cutsAt(gaps ...int64) func() int64 {
	return func() int64 {
		if len(gaps) == 0 {
			return 0
		}
		g := gaps[0]
		gaps = gaps[1:]
		return g
	}
}
