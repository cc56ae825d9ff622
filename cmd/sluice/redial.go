package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Extra connections for lanes. On a long link the library stripes a large transfer
// over several SFTP channels; sshd allows 10 sessions per connection by default (some
// servers 1), and each connection is one cipher stream, so the Client asks for more
// connections to the same server (sftp.WithDialer). A redialer makes them the way the
// session's first connection was made: over the same jump host connection (the jump
// hosts are not dialled again), by the same ProxyCommand, or by TCP; as the same user,
// with the same ciphers, under the same --limit.
//
// An extra connection never asks the user anything. The host must show the key the
// first connection accepted (a different one is refused, with a warning: it is not
// a question for the user in the middle of a transfer), and the login offers only
// what needs no answer (authMemory). When an extra connection cannot be made the
// library stops adding lanes and the transfer goes on with the ones it has: the
// failure is not the user's concern and is not shown.

// errConnectionLimit refuses a dial past -connections.
var errConnectionLimit = errors.New("the -connections limit is reached")

// redialer dials the extra connections of one SSH session.
type redialer struct {
	a     *app
	hc    *hostConfig
	via   *ssh.Client // the last jump host; nil without
	addr  string
	login *firstLogin
	pace  *pace
	max   int // most connections at once, the first included; 0: no limit

	// probe is held by the one dial that replays a typed login (a password, answers)
	// while nobody knows yet whether that works: the Client dials several at once, and
	// a login that fails (a one-time code) must fail once, not once per dial, as
	// failed logins count against the user on the server (MaxAuthTries, fail2ban).
	probe chan struct{}

	mu       sync.Mutex
	proven   bool  // a replayed login worked
	failed   error // a replayed login did not: no more tries
	count    int   // connections open or being dialled, the first included
	made     int   // connections dialled, over the session's life
	conns    map[*ssh.Client]bool
	closed   bool
	warned   bool // the changed host key was reported
	watchers sync.WaitGroup
}

func (a *app) newRedialer(hc *hostConfig, via *ssh.Client, login *firstLogin, pace *pace) *redialer {
	return &redialer{a: a, hc: hc, via: via, addr: net.JoinHostPort(hc.hostName, strconv.Itoa(hc.port)),
		login: login, pace: pace, max: a.cfg.connections, probe: make(chan struct{}, 1),
		count: 1, conns: map[*ssh.Client]bool{}}
}

// dial is the session's sftp.WithDialer: one more connection, logged in, or an error.
func (r *redialer) dial(ctx context.Context) (*ssh.Client, error) {
	sc, err := r.dialCounted(ctx)
	if r.a.testRedial != nil {
		r.a.testRedial(err)
	}
	return sc, err
}

func (r *redialer) dialCounted(ctx context.Context) (*ssh.Client, error) {
	if err := r.reserve(); err != nil {
		return nil, err
	}
	sc, err := r.dialGated(ctx)
	if err != nil {
		r.release()
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = sc.Close()
		r.release()
		return nil, net.ErrClosed
	}
	r.conns[sc] = true
	r.made++
	r.watchers.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.watchers.Done()
		_ = sc.Wait()
		r.mu.Lock()
		delete(r.conns, sc)
		r.mu.Unlock()
		r.release()
	}()
	return sc, nil
}

func (r *redialer) reserve() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return net.ErrClosed
	case r.failed != nil:
		return r.failed
	case r.max > 0 && r.count >= r.max:
		return errConnectionLimit
	}
	r.count++
	return nil
}

func (r *redialer) release() {
	r.mu.Lock()
	r.count--
	r.mu.Unlock()
}

// dialGated dials, one at a time while a replayed typed login is not yet known to
// work (see probe).
func (r *redialer) dialGated(ctx context.Context) (*ssh.Client, error) {
	if !r.login.auth.typed() {
		return r.dialOnce(ctx)
	}
	r.mu.Lock()
	proven := r.proven
	r.mu.Unlock()
	if proven {
		return r.dialOnce(ctx)
	}
	select {
	case r.probe <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	proven, failed := r.proven, r.failed
	r.mu.Unlock()
	if failed != nil || proven {
		<-r.probe // settled while this dial waited
		if failed != nil {
			return nil, failed
		}
		return r.dialOnce(ctx)
	}
	sc, err := r.dialOnce(ctx)
	r.mu.Lock()
	switch {
	case err == nil:
		r.proven = true
	case ctx.Err() == nil:
		r.failed = err
	}
	r.mu.Unlock()
	<-r.probe
	return sc, err
}

// dialOnce makes one extra connection: the first one's transport, host key, user,
// ciphers and --limit, and a login that asks nothing.
func (r *redialer) dialOnce(ctx context.Context) (*ssh.Client, error) {
	timeout := r.hc.dialTimeout()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := r.a.transport(dctx, r.hc, r.via, r.addr)
	if err != nil {
		return nil, err
	}
	// Not counted as replies for --timeout: metadata calls, which it bounds, go on
	// the first connection's main channel, and bulk data here must not hide its
	// silence.
	nc = r.pace.conn(nc)
	ag, agentConn := agentFor(r.hc)
	if agentConn != nil {
		defer agentConn.Close()
	}
	want := r.login.hostKey
	sc := &ssh.ClientConfig{
		Config:            r.hc.sshAlgorithms(),
		User:              r.hc.user,
		Auth:              r.login.auth.methods(ag),
		HostKeyCallback:   r.checkHostKey,
		HostKeyAlgorithms: hostKeyAlgorithms(want.Type()),
		Timeout:           timeout,
		// The banner was shown for the first connection.
		BannerCallback: func(string) error { return nil },
	}
	if r.a.testRedialLogin != nil {
		r.a.testRedialLogin()
	}
	// ssh.NewClientConn has no context: closing the socket interrupts it.
	stop := context.AfterFunc(dctx, func() { _ = nc.Close() })
	conn, chans, reqs, err := ssh.NewClientConn(nc, r.addr, sc)
	if !stop() {
		if conn != nil {
			_ = conn.Close()
		}
		return nil, fmt.Errorf("connecting to %s: %w", r.addr, context.Cause(dctx))
	}
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("SSH to %s as %s: %w", r.addr, r.hc.user, err)
	}
	return ssh.NewClient(conn, chans, reqs), nil
}

// checkHostKey accepts only the key the first connection accepted. Anything else is
// refused without a question, and reported once: someone may be intercepting some
// of the connections to the host.
func (r *redialer) checkHostKey(_ string, _ net.Addr, key ssh.PublicKey) error {
	want := r.login.hostKey
	if bytes.Equal(key.Marshal(), want.Marshal()) {
		return nil
	}
	err := fmt.Errorf("HOST KEY MISMATCH for %s on another connection: it offered %s %s, where the first connection had %s %s",
		knownhosts.Normalize(r.addr), key.Type(), ssh.FingerprintSHA256(key), want.Type(), ssh.FingerprintSHA256(want))
	r.mu.Lock()
	warn := !r.warned
	r.warned = true
	r.mu.Unlock()
	if warn {
		fmt.Fprintf(r.a.stderr, "sluice: warning: %s. Someone may be intercepting the connection: refused it; going on with the connections already made\n", err)
	}
	return err
}

// close closes the connections still open (the Client closes those it was given when
// it closes, before this) and waits for their watchers.
func (r *redialer) close() {
	r.mu.Lock()
	r.closed = true
	var open []*ssh.Client
	for sc := range r.conns {
		open = append(open, sc)
	}
	r.mu.Unlock()
	for _, sc := range open {
		_ = sc.Close()
	}
	r.watchers.Wait()
}

// dialled is how many extra connections the session made.
func (r *redialer) dialled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.made
}
