// Package delayproxy is a user-space TCP proxy that adds a fixed one-way delay (and
// optionally a byte-rate cap) to each direction, for measuring SFTP clients at a given
// round-trip time on a kernel without netem.
//
// Each direction of each connection has a reader that stamps every chunk it reads with
// the time of arrival and queues it, and a writer that sends each chunk on at its stamp
// plus the delay. The reader never sleeps, so the proxy behaves like a long pipe: as many
// bytes as the endpoints keep in flight are in flight, and the throughput through it is
// bounded by the endpoints' windows (RTT = 2 x delay), not by the proxy.
package delayproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Option configures a Proxy. Each Option checks its value.
type Option func(*config) error

type config struct {
	upRate, downRate int64 // bytes per second; 0 means no cap
	maxQueued        int   // bytes buffered per direction and connection
	dialTimeout      time.Duration
}

// defaultMaxQueued bounds the memory one direction of one connection may hold. It must
// exceed what the endpoints keep in flight (an SSH channel window is 2 MiB; several
// striped channels share a connection), or the proxy itself would cap throughput.
const defaultMaxQueued = 64 << 20

// WithRate caps both directions at bytesPerSecond each.
func WithRate(bytesPerSecond int64) Option {
	return func(c *config) error {
		if bytesPerSecond <= 0 {
			return fmt.Errorf("delayproxy: rate %d must be positive", bytesPerSecond)
		}
		c.upRate, c.downRate = bytesPerSecond, bytesPerSecond
		return nil
	}
}

// WithUpRate caps the client-to-target direction at bytesPerSecond.
func WithUpRate(bytesPerSecond int64) Option {
	return func(c *config) error {
		if bytesPerSecond <= 0 {
			return fmt.Errorf("delayproxy: rate %d must be positive", bytesPerSecond)
		}
		c.upRate = bytesPerSecond
		return nil
	}
}

// WithDownRate caps the target-to-client direction at bytesPerSecond.
func WithDownRate(bytesPerSecond int64) Option {
	return func(c *config) error {
		if bytesPerSecond <= 0 {
			return fmt.Errorf("delayproxy: rate %d must be positive", bytesPerSecond)
		}
		c.downRate = bytesPerSecond
		return nil
	}
}

// WithMaxQueued bounds the bytes waiting in one direction of one connection (default
// 64 MiB). When it is reached the reader stops reading, so TCP pushes back on the sender.
func WithMaxQueued(bytes int) Option {
	return func(c *config) error {
		if bytes < 1 {
			return fmt.Errorf("delayproxy: max queued %d must be positive", bytes)
		}
		c.maxQueued = bytes
		return nil
	}
}

// Proxy accepts connections on a loopback port and forwards each to the target.
type Proxy struct {
	target string
	oneWay time.Duration
	cfg    config
	ln     net.Listener

	// ctx is cancelled by Close; it aborts dials to the target still in progress.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop and every connection's goroutines

	mu     sync.Mutex
	closed bool               // set by Close; no link is added after it
	links  map[*link]struct{} // live connections, so Close can end them

	closeOnce sync.Once
	closeErr  error
}

// New listens on 127.0.0.1:0 and forwards every accepted connection to target, delaying
// each direction by oneWay (0 forwards at once; RTT = 2 x oneWay).
func New(target string, oneWay time.Duration, opts ...Option) (*Proxy, error) {
	if oneWay < 0 {
		return nil, fmt.Errorf("delayproxy: negative delay %v", oneWay)
	}
	cfg := config{maxQueued: defaultMaxQueued, dialTimeout: 10 * time.Second}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delayproxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, oneWay: oneWay, cfg: cfg, ln: ln, ctx: ctx, cancel: cancel, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the proxy's listening address ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every proxied connection at once (queued bytes are
// dropped) and waits for all of the proxy's goroutines to finish.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		links := make([]*link, 0, len(p.links))
		for l := range p.links {
			links = append(links, l)
		}
		p.mu.Unlock()
		p.cancel()
		p.closeErr = p.ln.Close()
		for _, l := range links {
			l.abort()
		}
		p.wg.Wait()
	})
	return p.closeErr
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// The listener only fails for good here: closed by Close, or a resource
			// error that a test proxy has no business retrying around.
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for one accepted connection and runs both directions.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: p.cfg.dialTimeout}
	target, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	l := newLink(client, target, p.cfg.maxQueued)
	if !p.add(l) {
		l.abort()
		return
	}
	defer p.remove(l)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.pump(client, target, l.up, p.oneWay, p.cfg.upRate)
	}()
	go func() {
		defer wg.Done()
		l.pump(target, client, l.down, p.oneWay, p.cfg.downRate)
	}()
	wg.Wait()
	// Both directions have ended (each forwarded its EOF) or one failed: either way
	// nothing more will pass.
	l.abort()
}

func (p *Proxy) add(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) remove(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// errAborted ends a direction whose connection was torn down.
var errAborted = errors.New("delayproxy: connection aborted")
