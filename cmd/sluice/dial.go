package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	proc   *exec.Cmd     // nil over SSH
	// local is true when the server is the default sftp-server on this machine, which
	// sees the same files with the same working directory as this process.
	local  bool
	pace   *pace          // --limit, shared by every connection or pipe; nil for none
	redial *redialer      // the extra SSH connections; nil without
	extra  *serverProcs   // the -D command's extra processes; nil without
	report func(*session) // -v's last words, before Close; nil without

	closeOnce sync.Once
	closeErr  error
}

// Close closes the client and its transport, and for a local server waits for it to
// exit. It is safe to call concurrently (the interrupt handler and the command's own
// deferred Close may race).
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		if s.report != nil {
			s.report(s)
		}
		// Pacing first: nothing that closing sends or reads should wait for --limit.
		s.pace.close()
		err := s.client.Close()
		if s.redial != nil {
			s.redial.close()
		}
		if s.extra != nil {
			s.extra.close()
		}
		if s.ssh != nil {
			// The connection's own Close error ("use of closed network connection"
			// when the server went first) says nothing about the user's files.
			_ = s.ssh.Close()
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
	if c.hashCommand {
		opts = append(opts, sftp.WithHashCommand())
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
	cfg := a.cfg
	switch {
	case a.testDial != nil:
		return a.testDial(ctx)
	case cfg.serverCmd != "":
		return a.startServer(ctx, splitCommand(cfg.serverCmd), false)
	case !r.hasHost():
		p := findLocalServer()
		if p == "" {
			return nil, fmt.Errorf("no local sftp-server found (looked in %s); install openssh-sftp-server, or give a host or -D",
				strings.Join(localSFTPServers, ", "))
		}
		return a.startServer(ctx, []string{p}, true)
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
// Unless it is the local sftp-server (local), whose round trip is too short for
// striping to pay, the Client may start the command again for more lanes: each lane
// is another process (see serverProcs).
func (a *app) startServer(ctx context.Context, argv []string, local bool) (*session, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty server command")
	}
	cmd, rd, w, err := startProc(argv, a.stderr)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	s := &session{proc: cmd, local: local, pace: newPace(a.cfg.limit)}
	in, out := s.pace.pipes(a.replies.reader(rd), w)
	opts := a.cfg.clientOptions()
	if !local && a.cfg.connections != 1 {
		s.extra = &serverProcs{argv: argv, stderr: a.stderr, pace: s.pace, max: a.cfg.connections, count: 1, onStart: a.testRedial}
		opts = append(opts, sftp.WithPipeOpener(s.extra.open))
	}
	client, err := sftp.NewClientPipe(ictx, in, out, opts...)
	if err != nil {
		s.pace.close()
		_ = w.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if s.extra != nil {
			s.extra.close()
		}
		return nil, fmt.Errorf("starting SFTP with %q: %w", strings.Join(argv, " "), err)
	}
	s.client = client
	a.sftpReport(client, strings.Join(argv, " "))
	s.report = a.connectionReport
	return s, nil
}

// startProc starts argv with its stdin and stdout as pipes and its stderr on stderr.
func startProc(argv []string, stderr io.Writer) (*exec.Cmd, io.ReadCloser, io.WriteCloser, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	rd, err := cmd.StdoutPipe()
	if err != nil {
		_ = w.Close()
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("starting the server %q: %w", argv[0], err)
	}
	return cmd, rd, w, nil
}

// serverProcs starts the -D command again for the Client's lanes
// (sftp.WithPipeOpener), as `ssh -s host sftp` once per lane, and reaps the processes
// when the session ends. Their stderr is ours, like the first one's.
type serverProcs struct {
	argv    []string
	stderr  io.Writer
	pace    *pace
	max     int         // most processes, the first included; 0: no limit
	onStart func(error) // test hook: the outcome of each start

	mu     sync.Mutex
	count  int // processes started, the first included
	procs  []*exec.Cmd
	closed bool
}

// open starts one more process. Its output is not counted as replies for --timeout:
// metadata calls go on the first process.
func (p *serverProcs) open(ctx context.Context) (io.Reader, io.WriteCloser, error) {
	r, w, err := p.start(ctx)
	if p.onStart != nil {
		p.onStart(err)
	}
	return r, w, err
}

func (p *serverProcs) start(ctx context.Context) (io.Reader, io.WriteCloser, error) {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return nil, nil, net.ErrClosed
	case p.max > 0 && p.count >= p.max:
		p.mu.Unlock()
		return nil, nil, errConnectionLimit
	}
	p.count++
	p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	cmd, rd, w, err := startProc(p.argv, p.stderr)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = w.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, net.ErrClosed
	}
	p.procs = append(p.procs, cmd)
	p.mu.Unlock()
	r, wc := p.pace.pipes(rd, w)
	return readCloser{r, rd}, wc, nil
}

// readCloser is a process's output, capped by --limit, that closes the pipe: the
// library closes a lane's reader to end its Read. (The library starts at most 4
// pipes at once, until each answers: each `ssh` is a login that sshd's MaxStartups
// counts.)
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// close waits for every process to exit, after the Client closed their input. Their
// exit status is not the command's: a lane that died was replaced by the others, and
// its process's complaint is on stderr already.
func (p *serverProcs) close() {
	p.mu.Lock()
	p.closed = true
	procs := p.procs
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, cmd := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = waitServer(cmd)
		}()
	}
	wg.Wait()
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

// started is how many extra processes the session started.
func (p *serverProcs) started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.procs)
}
