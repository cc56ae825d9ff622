package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// dialSSH connects to r's host, through its ProxyJump hosts or ProxyCommand when
// ssh_config or -J say so, checks the host key, authenticates and starts SFTP. ctx
// cancels every step. The Client may dial more connections to the host the same way
// for its lanes (see redialer).
func (a *app) dialSSH(ctx context.Context, r remote) (_ *session, err error) {
	hc, err := a.resolveHost(r, false)
	if err != nil {
		return nil, err
	}
	s := &session{pace: newPace(a.cfg.limit)}
	defer func() {
		if err != nil {
			s.pace.close()
			for i := len(s.hops) - 1; i >= 0; i-- {
				_ = s.hops[i].Close()
			}
		}
	}()
	var via *ssh.Client
	if hc.proxyJump != "" {
		for _, spec := range strings.Split(hc.proxyJump, ",") {
			hr, err := parseJump(spec)
			if err != nil {
				return nil, usagef("ProxyJump %s: %v", spec, err)
			}
			hhc, err := a.resolveHost(hr, true)
			if err != nil {
				return nil, err
			}
			c, _, err := a.dialHost(ctx, hhc, via, true, nil)
			if err != nil {
				return nil, fmt.Errorf("jump host %s: %w", spec, err)
			}
			s.hops = append(s.hops, c)
			via = c
		}
	}
	sshc, login, err := a.dialHost(ctx, hc, via, false, s.pace)
	if err != nil {
		return nil, err
	}
	opts := append(a.cfg.clientOptions(), hc.keepalive())
	if a.cfg.connections != 1 {
		s.redial = a.newRedialer(hc, via, login, s.pace)
		opts = append(opts, sftp.WithDialer(s.redial.dial))
	}
	ictx, icancel := context.WithTimeout(ctx, connectTimeout)
	defer icancel()
	client, err := sftp.NewClient(ictx, sshc, opts...)
	if err != nil {
		_ = sshc.Close()
		if s.redial != nil {
			s.redial.close()
		}
		return nil, fmt.Errorf("starting SFTP on %s: %w", hc.alias, err)
	}
	s.client, s.ssh = client, sshc
	a.sftpReport(client, hc.alias)
	s.report = a.connectionReport
	return s, nil
}

// parseJump reads one ProxyJump entry: [user@]host[:port] or ssh://[user@]host[:port].
func parseJump(spec string) (remote, error) {
	spec = strings.TrimSpace(spec)
	if rest, ok := strings.CutPrefix(spec, "ssh://"); ok {
		spec = strings.TrimSuffix(rest, "/")
	}
	var r remote
	if i := strings.LastIndexByte(spec, '@'); i >= 0 {
		r.User, spec = spec[:i], spec[i+1:]
	}
	host, port := spec, ""
	if strings.HasPrefix(spec, "[") {
		end := strings.IndexByte(spec, ']')
		if end < 0 {
			return r, errors.New("missing ']'")
		}
		host, port = spec[1:end], strings.TrimPrefix(spec[end+1:], ":")
	} else if i := strings.LastIndexByte(spec, ':'); i >= 0 && strings.Count(spec, ":") == 1 {
		host, port = spec[:i], spec[i+1:]
	}
	if host == "" {
		return r, errors.New("missing host")
	}
	r.Host = host
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return r, fmt.Errorf("port %q: want 1 to 65535", port)
		}
		r.Port = n
	}
	return r, nil
}

// firstLogin is what the first connection to the final host accepted and used, for
// the extra connections of its session.
type firstLogin struct {
	hostKey ssh.PublicKey
	auth    *authMemory
}

// dialHost opens one SSH connection to hc: over via (a jump host) when given, else
// through hc's ProxyCommand, else by TCP. hop is set for a jump host, whose
// connection is not capped by pace (the --limit, nil for none) nor counted as the
// server's replies: the cap and --timeout are about the final host.
func (a *app) dialHost(ctx context.Context, hc *hostConfig, via *ssh.Client, hop bool, pace *pace) (*ssh.Client, *firstLogin, error) {
	addr := net.JoinHostPort(hc.hostName, strconv.Itoa(hc.port))
	hk, err := loadHostKeys(hc)
	if err != nil {
		return nil, nil, err
	}
	// The key files are read first: a -i that cannot be read is a typo to report
	// without dialling. Whether there is any way to log in at all is asked only once
	// connected: a refused port or an unknown host says so, as ssh does, rather than
	// being hidden behind "no keys".
	p := a.prompter(ctx, hc.batch)
	auth, err := newAuth(hc, p)
	if err != nil {
		return nil, nil, err
	}
	timeout := hc.dialTimeout()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a.verbosef(1, "connecting to %s%s", addr, a.route(hc, via))
	nc, err := a.transport(dctx, hc, via, addr)
	if err == nil {
		if err = auth.noMethodsError(); err != nil {
			_ = nc.Close()
		}
	}
	if err != nil {
		auth.close()
		return nil, nil, err
	}
	defer auth.close()
	auth.trace = a.authTrace()
	if !hop {
		nc = a.replies.conn(pace.conn(nc))
	}
	check := hk.checker(addr, nc.RemoteAddr(), hc, p, a.stderr)
	sc := &ssh.ClientConfig{
		Config:            hc.sshAlgorithms(),
		User:              hc.user,
		Auth:              auth.methods(),
		HostKeyCallback:   check.callback,
		HostKeyAlgorithms: check.algorithms,
		Timeout:           timeout,
		BannerCallback: func(msg string) error {
			// The pre-login banner is the server's text: escaped, and only where a
			// person reads it.
			p.say(msg)
			return nil
		},
	}
	// ssh.NewClientConn has no context: closing the socket is what interrupts it, on
	// ctx's end or when the handshake takes longer than the timeout. The clock stops
	// while a person answers a prompt.
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() { timedOut.Store(true); _ = nc.Close() })
	p.setPause(func(waiting bool) {
		if waiting {
			timer.Stop()
		} else {
			timer.Reset(timeout)
		}
	})
	defer p.setPause(nil)
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	conn, chans, reqs, err := ssh.NewClientConn(nc, addr, sc)
	timer.Stop()
	if !stop() || timedOut.Load() {
		if conn != nil {
			_ = conn.Close()
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("connecting to %s: %w", addr, context.Cause(ctx))
		}
		return nil, nil, fmt.Errorf("connecting to %s: no answer within %v (ConnectTimeout)", addr, timeout)
	}
	if err != nil {
		_ = nc.Close()
		if check.err != nil {
			return nil, nil, check.err // the clear host key message, not x/crypto's wrapping
		}
		return nil, nil, fmt.Errorf("SSH to %s as %s: %w%s", addr, hc.user, err, check.handshakeHint())
	}
	a.verbosef(1, "connected to %s (%s); host key %s %s; logged in as %s with %s", addr, conn.ServerVersion(),
		check.accepted.Type(), ssh.FingerprintSHA256(check.accepted), hc.user, auth.lastMethod())
	return ssh.NewClient(conn, chans, reqs), &firstLogin{hostKey: check.accepted, auth: auth.remember()}, nil
}

// keepalive is the library's keepalive as ServerAliveInterval and ServerAliveCountMax
// set it, on every connection of the session, the dialled ones included: a connection
// with no answer for ServerAliveCountMax intervals is given up (the command's own, and
// --retries reconnects; a lane's, and its work goes to the others).
func (hc *hostConfig) keepalive() sftp.Option {
	if hc.aliveInterval <= 0 {
		return sftp.WithKeepalive(0, 0)
	}
	// OpenSSH takes any values; the library's ceilings (a day, 1000) are as good as
	// for ever.
	return sftp.WithKeepalive(min(hc.aliveInterval, 24*time.Hour), min(hc.aliveCountMax, 1000))
}

// dialTimeout bounds TCP connect plus the SSH handshake and login: ConnectTimeout.
func (hc *hostConfig) dialTimeout() time.Duration {
	if hc.connectTimeout > 0 {
		return hc.connectTimeout
	}
	return connectTimeout
}

// transport opens the byte stream an SSH connection to addr runs on: a channel
// through the jump host via, hc's ProxyCommand, or TCP.
func (a *app) transport(ctx context.Context, hc *hostConfig, via *ssh.Client, addr string) (net.Conn, error) {
	var nc net.Conn
	var err error
	switch {
	case via != nil:
		nc, err = via.DialContext(ctx, "tcp", addr)
	case hc.proxyCommand != "":
		nc, err = startProxyCommand(expandTokens(hc.proxyCommand, hc, nil), addr, a.stderr)
	default:
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, connectError(hc, via != nil || hc.proxyCommand != "", addr, err)
	}
	return nc, nil
}

// prompter returns the run's terminal prompter, opened on first use. ctx's end
// (Ctrl-C) interrupts a question waiting for its answer.
func (a *app) prompter(ctx context.Context, batch bool) *prompter {
	if batch {
		return &prompter{}
	}
	a.promptOnce.Do(func() {
		if a.testPrompt != nil {
			a.prompt = a.testPrompt
		} else {
			a.prompt = newPrompter(false)
		}
		a.promptStop = context.AfterFunc(ctx, a.prompt.interrupt)
	})
	return a.prompt
}

// proxyConn is a ProxyCommand's stdin and stdout as a net.Conn.
type proxyConn struct {
	addr string // the host:port it reaches, for host key checks and messages
	cmd  *exec.Cmd
	r    io.ReadCloser
	w    io.WriteCloser
	once sync.Once
}

// startProxyCommand runs command with the shell, as ssh does, and talks SSH over its
// stdin and stdout; its stderr is ours.
func startProxyCommand(command, addr string, stderr io.Writer) (net.Conn, error) {
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	cmd := exec.Command(shell, "-c", "exec "+command)
	cmd.Stderr = stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ProxyCommand: %w", err)
	}
	return &proxyConn{addr: addr, cmd: cmd, r: r, w: w}, nil
}

func (c *proxyConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *proxyConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the command: EOF on its stdin, then a kill, since a proxy such as nc
// may not exit on EOF.
func (c *proxyConn) Close() error {
	c.once.Do(func() {
		_ = c.w.Close()
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	return nil
}

func (c *proxyConn) LocalAddr() net.Addr              { return pipeAddr("proxycommand:0") }
func (c *proxyConn) RemoteAddr() net.Addr             { return pipeAddr(c.addr) }
func (c *proxyConn) SetDeadline(time.Time) error      { return nil }
func (c *proxyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *proxyConn) SetWriteDeadline(time.Time) error { return nil }

// pipeAddr is the address a ProxyCommand reaches, in host:port form: knownhosts
// parses a connection's remote address that way.
type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }
