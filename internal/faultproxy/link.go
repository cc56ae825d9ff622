package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// direction is one way through a link.
type direction int

const (
	up   direction = iota // client to target
	down                  // target to client
)

// chunkSize is what one Read may take.
const chunkSize = 32 << 10

// long ago is a deadline already past: it wakes a Read or Write blocked on a socket
// without closing it.
var longAgo = time.Unix(1, 0)

// link is one proxied connection.
type link struct {
	p              *Proxy
	client, target *net.TCPConn

	mu      sync.Mutex
	step    Step  // the plan's, until it has fired
	passed  int64 // bytes forwarded, both ways
	fault   Fault // what has happened; None while healthy
	closed  bool
	release chan struct{} // closed by close: a black-holed link holds its sockets until then
}

func newLink(p *Proxy, client, target *net.TCPConn, step Step) *link {
	return &link{p: p, client: client, target: target, step: step, release: make(chan struct{})}
}

// run forwards both directions until they end, then closes the sockets; a black-holed
// link keeps them open, silent, until the proxy closes.
func (l *link) run() {
	if l.step.Fault != None && l.step.After <= 0 {
		l.fire()
	}
	var wg sync.WaitGroup
	wg.Go(func() { l.pump(up, l.client, l.target) })
	wg.Go(func() { l.pump(down, l.target, l.client) })
	wg.Wait()
	l.mu.Lock()
	hold := l.fault == BlackHole && !l.closed
	l.mu.Unlock()
	if hold {
		<-l.release
	}
	l.close()
}

// pump copies one direction until it ends: the source's EOF (passed on as a
// half-close), a fault that stops it, or an error (which ends the link).
func (l *link) pump(dir direction, src, dst *net.TCPConn) {
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.forward(dir, dst, buf[:n]) {
			return
		}
		switch {
		case err == nil:
		case l.stops(dir):
			return
		case errors.Is(err, io.EOF):
			dst.CloseWrite()
			return
		default:
			l.close()
			return
		}
	}
}

// forward writes b to dst as far as the plan lets it, firing the plan's fault when
// its bytes have passed. It reports whether the direction goes on.
func (l *link) forward(dir direction, dst *net.TCPConn, b []byte) bool {
	allowed, fire := l.reserve(dir, len(b))
	if allowed > 0 {
		if _, err := dst.Write(b[:allowed]); err != nil {
			if !l.stops(dir) {
				l.close()
			}
			return false
		}
	}
	if fire {
		l.fire()
	}
	return allowed == len(b) && !l.stops(dir)
}

// reserve counts up to n bytes of dir as passed: all of them, or those left before
// the plan's fault (fire then reports that it is due once they are written), or none
// once the direction is stopped.
func (l *link) reserve(dir direction, n int) (allowed int, fire bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stoppedLocked(dir) {
		return 0, false
	}
	allowed = n
	if l.step.Fault != None {
		if left := l.step.After - l.passed; int64(n) >= left {
			allowed, fire = int(max(left, 0)), true
		}
	}
	l.passed += int64(allowed)
	return allowed, fire
}

// fire applies the plan's fault, once.
func (l *link) fire() {
	l.mu.Lock()
	f := l.step.Fault
	l.step = Step{}
	l.mu.Unlock()
	l.apply(f)
}

// apply makes f happen to the link; false when it is closed or has had its fault.
func (l *link) apply(f Fault) bool {
	l.mu.Lock()
	if f == None || l.fault != None || l.closed {
		l.mu.Unlock()
		return false
	}
	l.fault = f
	l.mu.Unlock()
	switch f {
	case Reset:
		l.client.SetLinger(0)
		l.target.SetLinger(0)
		l.client.Close()
		l.target.Close()
	case BlackHole:
		for _, c := range []*net.TCPConn{l.client, l.target} {
			c.SetDeadline(longAgo) // wakes both pumps, which stop; nothing is closed
		}
	case HalfCloseDown:
		l.client.CloseWrite()
		l.target.SetReadDeadline(longAgo)
		l.client.SetWriteDeadline(longAgo)
	case HalfCloseUp:
		l.target.CloseWrite()
		l.client.SetReadDeadline(longAgo)
		l.target.SetWriteDeadline(longAgo)
	}
	l.p.counted()
	return true
}

// stops reports whether dir has been stopped by a fault or the link's close.
func (l *link) stops(dir direction) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stoppedLocked(dir)
}

func (l *link) stoppedLocked(dir direction) bool {
	switch {
	case l.closed, l.fault == Reset, l.fault == BlackHole:
		return true
	case l.fault == HalfCloseDown:
		return dir == down
	case l.fault == HalfCloseUp:
		return dir == up
	}
	return false
}

// close closes both sockets, once.
func (l *link) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.release)
	l.mu.Unlock()
	l.client.Close()
	l.target.Close()
}
