package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// -v: what was dialled and how, which logins were tried and which worked, what the
// server is and offers, and how many connections the command used, on stderr. -vv
// adds each extension's data. Server text in it is escaped like everything else.

// countFlag is a flag that counts its occurrences: -v -v is 2.
type countFlag struct {
	p    *int
	step int
}

func (c countFlag) String() string {
	if c.p == nil {
		return "0"
	}
	return strconv.Itoa(*c.p)
}
func (c countFlag) Set(string) error { *c.p += c.step; return nil }
func (c countFlag) IsBoolFlag() bool { return true }

// verbosef prints a -v line when the level asked for is at least level.
func (a *app) verbosef(level int, format string, args ...any) {
	if a.cfg.verbose >= level {
		fmt.Fprintf(a.stderr, "sluice: %s\n", escapeText(fmt.Sprintf(format, args...)))
	}
}

// authTrace is what an sshAuth reports its tries to: -v, or nothing.
func (a *app) authTrace() func(string, ...any) {
	if a.cfg.verbose < 1 {
		return nil
	}
	return func(format string, args ...any) { a.verbosef(1, format, args...) }
}

// route says how an address is reached, for -v.
func (a *app) route(hc *hostConfig, via *ssh.Client) string {
	switch {
	case via != nil:
		return " through the jump host " + via.RemoteAddr().String()
	case hc.proxyCommand != "":
		return " by ProxyCommand " + expandTokens(hc.proxyCommand, hc, nil)
	}
	return " by TCP"
}

// sftpReport tells -v what the server offers: its extensions and the limits in force.
func (a *app) sftpReport(c *sftp.Client, what string) {
	if a.cfg.verbose < 1 {
		return
	}
	exts := c.Extensions()
	names := make([]string, 0, len(exts))
	for n, v := range exts {
		if a.cfg.verbose >= 2 {
			n += "=" + v
		}
		names = append(names, n)
	}
	slices.Sort(names)
	l := c.Limits()
	a.verbosef(1, "SFTP with %s: extensions: %s", what, strings.Join(names, " "))
	a.verbosef(1, "limits: packet %d bytes, read %d, write %d, open handles %s",
		l.MaxPacket, l.MaxRead, l.MaxWrite, handlesText(l.MaxOpenHandles))
}

func handlesText(n int) string {
	if n == 0 {
		return "no limit given"
	}
	return strconv.Itoa(n)
}

// connectError says why a connection could not be made in OpenSSH's words: "connect
// to host X port 22: Connection refused", "Could not resolve hostname X: ...". A
// jump host's or ProxyCommand's failure keeps its own wording.
func connectError(hc *hostConfig, indirect bool, addr string, err error) error {
	if indirect {
		return fmt.Errorf("connecting to %s: %w", addr, err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return &connError{msg: fmt.Sprintf("Could not resolve hostname %s: %s", hc.hostName, dns.Err), err: err}
	}
	why := err.Error()
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		why = errnoText(errno)
	case errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		why = "Connection timed out"
	}
	return &connError{msg: fmt.Sprintf("connect to host %s port %d: %s", hc.hostName, hc.port, why), err: err}
}

// connError is a failed connect, said as OpenSSH says it, wrapping the cause.
type connError struct {
	msg string
	err error
}

func (e *connError) Error() string { return e.msg }
func (e *connError) Unwrap() error { return e.err }

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// errnoText is strerror's wording for the errors a connect meets, which OpenSSH
// prints; Go's are lower case.
func errnoText(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// connectionReport tells -v how many connections (or -D processes) the session used,
// the first included.
func (a *app) connectionReport(s *session) {
	switch {
	case s.redial != nil:
		a.verbosef(1, "SSH connections used: %d (the first and %d dialled for lanes)", 1+s.redial.dialled(), s.redial.dialled())
	case s.extra != nil:
		a.verbosef(1, "server processes used: %d", 1+s.extra.started())
	case s.ssh != nil:
		a.verbosef(1, "SSH connections used: 1")
	}
	if s.client != nil {
		// What the session learned: refusals met, features turned off and why.
		for _, line := range strings.Split(strings.TrimSpace(s.client.Capabilities().String()), "\n") {
			a.verbosef(1, "server: %s", line)
		}
	}
}
