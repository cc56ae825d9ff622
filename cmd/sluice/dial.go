package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

const (
	// connectTimeout bounds TCP connect plus the SSH handshake and authentication, and
	// separately the SFTP INIT exchange: a server that accepts and then says nothing
	// must not hang the command.
	connectTimeout = 30 * time.Second
	// serverExitTimeout is how long Close waits for a local server to exit after its
	// stdin is closed before killing it.
	serverExitTimeout = 10 * time.Second
)

// localSFTPServers are where distributions install OpenSSH's sftp-server, Debian's
// first; the first executable one serves bare paths when no -D is given.
var localSFTPServers = []string{
	"/usr/lib/openssh/sftp-server",
	"/usr/libexec/openssh/sftp-server",
	"/usr/libexec/sftp-server",
	"/usr/lib/ssh/sftp-server",
}

// session is a connected SFTP client and whatever carries it: an SSH connection or a
// local server process.
type session struct {
	client *sftp.Client
	ssh    *ssh.Client   // nil for a local server
	hops   []*ssh.Client // the ProxyJump hosts, nearest first
	alive  func()        // stops the ServerAliveInterval probes; nil without
	proc   *exec.Cmd     // nil over SSH
	// local is true when the server is the default sftp-server on this machine, which
	// sees the same files with the same working directory as this process.
	local  bool
	pace   *pace     // --limit, shared by every connection or pipe; nil for none
	redial *redialer // the extra SSH connections; nil without

	closeOnce sync.Once
	closeErr  error
}

// Close closes the client and its transport, and for a local server waits for it to
// exit. It is safe to call concurrently (the interrupt handler and the command's own
// deferred Close may race).
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		// Pacing first: nothing that closing sends or reads should wait for --limit.
		s.pace.close()
		err := s.client.Close()
		if s.redial != nil {
			s.redial.close()
		}
		if s.ssh != nil {
			// The connection's own Close error ("use of closed network connection"
			// when the server went first) says nothing about the user's files.
			_ = s.ssh.Close()
		}
		if s.alive != nil {
			s.alive()
		}
		for i := len(s.hops) - 1; i >= 0; i-- {
			_ = s.hops[i].Close()
		}
		if s.proc != nil {
			err = errors.Join(err, waitServer(s.proc))
		}
		s.closeErr = err
	})
	return s.closeErr
}

// clientOptions maps the tuning flags onto library options; unset flags leave the
// library's defaults.
func (c *config) clientOptions() []sftp.Option {
	var opts []sftp.Option
	if c.inflight > 0 {
		opts = append(opts, sftp.WithMaxInflight(c.inflight))
	}
	if c.packet > 0 {
		opts = append(opts, sftp.WithMaxPacket(c.packet))
	}
	if c.channels > 0 {
		opts = append(opts, sftp.WithChannels(c.channels))
	}
	return opts
}

// checkOptions reports a tuning flag the library refuses, before anything is started.
// Options are checked before any I/O and a cancelled context stops NewClientPipe right
// after that, so a context error means every option was accepted.
func (c *config) checkOptions() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cl, err := sftp.NewClientPipe(ctx, strings.NewReader(""), nopWriteCloser{io.Discard}, c.clientOptions()...)
	if err == nil {
		_ = cl.Close()
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// connect reaches the server for r: the -D command, a local sftp-server for a bare
// path, or SSH.
func (a *app) connect(ctx context.Context, r remote) (*session, error) {
	cfg, stderr := a.cfg, a.stderr
	switch {
	case a.testDial != nil:
		return a.testDial(ctx)
	case cfg.serverCmd != "":
		return startServer(ctx, cfg, splitCommand(cfg.serverCmd), stderr, false, &a.replies)
	case !r.hasHost():
		p := findLocalServer()
		if p == "" {
			return nil, fmt.Errorf("no local sftp-server found (looked in %s); install openssh-sftp-server, or give a host or -D",
				strings.Join(localSFTPServers, ", "))
		}
		return startServer(ctx, cfg, []string{p}, stderr, true, &a.replies)
	default:
		return a.dialSSH(ctx, r)
	}
}

// splitCommand splits a -D command on white space, as OpenSSH's sftp does: no quoting.
func splitCommand(s string) []string { return strings.Fields(s) }

func findLocalServer() string {
	for _, p := range localSFTPServers {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// startServer runs argv (split on spaces like OpenSSH's sftp -D, no quoting) and
// speaks SFTP over its stdin and stdout. Its stderr is ours, so its complaints show.
func startServer(ctx context.Context, cfg *config, argv []string, stderr io.Writer, local bool, replies *replyClock) (*session, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty server command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	rd, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the server %q: %w", argv[0], err)
	}
	ictx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pace := newPace(cfg.limit)
	in, out := pace.pipes(replies.reader(rd), w)
	client, err := sftp.NewClientPipe(ictx, in, out, cfg.clientOptions()...)
	if err != nil {
		pace.close()
		_ = w.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("starting SFTP with %q: %w", strings.Join(argv, " "), err)
	}
	return &session{client: client, proc: cmd, local: local, pace: pace}, nil
}

// waitServer waits for a server whose stdin has been closed. sftp-server exits on EOF;
// anything that does not is killed after serverExitTimeout.
func waitServer(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(serverExitTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("server %s: %w", cmd.Path, err)
		}
		return nil
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("server %s did not exit after its input was closed; killed it", cmd.Path)
	}
}
