// Package sftptest runs an SFTP server in the test's own process, as net/http/httptest
// does for HTTP: code that talks to an SFTP server can be tested against a real file
// tree, with no SSH server, no network and no second process.
//
// The server speaks SFTP version 3 as OpenSSH's sftp-server does (status codes,
// clamped READs, READDIR batches, extensions), over in-memory pipes (Conn, and
// Client for a ready *sftp.Client), over any byte stream (Serve), or on an SSH
// channel of a server the test runs itself (ServeChannel). Its file tree is in
// memory, or a directory on disk (Options.Dir), reached only through an os.Root so
// no name a client sends leaves it.
//
// A Personality makes the server behave as a service that cannot be run in a test
// does: AWS Transfer Family on S3, Azure Blob Storage, SFTPGo on a cloud backend,
// MinIO, Files.com, a Hetzner Storage Box, a write-only drop folder, Windows
// OpenSSH, IBM Sterling B2B Integrator. Each reproduces what the service's own
// documentation and its users' reports say it does, and its documentation names
// those sources; where they are silent it behaves as OpenSSH.
//
// Options also carries fault hooks for tests of a client's error handling: short
// reads, reordered, late, withheld or corrupt replies, failed requests and
// connections that drop at a chosen moment.
package sftptest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/crypto/ssh"

	sftp "github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Server is an in-process SFTP server. Its methods are safe for concurrent use.
// Every session (Conn, Client, Serve, ServeChannel) serves the same file tree.
type Server struct {
	srv  *testserver.Server
	root *os.Root // Options.Dir opened, closed by Close

	mu      sync.Mutex
	clients []*sftp.Client
	closed  bool
}

// NewServer starts a server. It fails only when Options.Dir cannot be opened.
// Close it when done.
func NewServer(opts Options) (*Server, error) {
	o := opts.internal()
	s := &Server{}
	if opts.Dir != "" {
		root, err := os.OpenRoot(opts.Dir)
		if err != nil {
			return nil, err
		}
		s.root, o.Root = root, root
	}
	s.srv = testserver.New(o)
	return s, nil
}

// Close closes the Clients made by Client, ends every session (a client reads end
// of file; its writes fail) and waits for the server's goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	clients := s.clients
	s.clients, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, c := range clients {
		errs = append(errs, ignoreClosed(c.Close()))
	}
	errs = append(errs, s.srv.Close())
	if s.root != nil {
		errs = append(errs, s.root.Close())
		s.root = nil
	}
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, fs.ErrClosed) {
		return nil
	}
	return err
}

// Conn starts a session and returns the client's ends of its connection: the
// client reads replies from r and writes requests to w. Closing w ends the session
// once the replies already due are delivered. A server whose Personality limits
// sessions, or a closed server, returns ends that are already closed.
func (s *Server) Conn() (r io.ReadCloser, w io.WriteCloser) { return s.srv.Conn() }

// Client returns an *sftp.Client on a new session of the server. More sessions are
// opened for it as it asks (sftp.WithPipeOpener), so striping and data channels
// work as over SSH. The Client is closed by Server.Close, or earlier by its user.
func (s *Server) Client(ctx context.Context, opts ...sftp.Option) (*sftp.Client, error) {
	r, w := s.Conn()
	open := sftp.WithPipeOpener(func(context.Context) (io.Reader, io.WriteCloser, error) {
		r, w := s.Conn()
		return r, w, nil
	})
	c, err := sftp.NewClientPipe(ctx, r, w, append([]sftp.Option{open}, opts...)...)
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, errors.New("sftptest: server closed")
	}
	s.clients = append(s.clients, c)
	return c, nil
}

// Serve serves one session over rw (an SSH channel, a net.Conn, a pipe) until
// the client closes it or the server closes; then it closes rw.
func (s *Server) Serve(rw io.ReadWriteCloser) error {
	r, w := s.Conn()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, rw)
		w.Close()
		done <- err
	}()
	_, err := io.Copy(rw, r)
	r.Close()
	rw.Close()
	if cerr := <-done; err == nil {
		err = cerr
	}
	if errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// ServeChannel accepts a "session" channel of an SSH server the test runs, agrees
// to its "subsystem sftp" request (refusing any other), and serves SFTP on it
// until it closes.
func (s *Server) ServeChannel(nc ssh.NewChannel) error {
	if nc.ChannelType() != "session" {
		return nc.Reject(ssh.UnknownChannelType, "only session channels")
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		return err
	}
	go func() {
		for req := range reqs {
			ok := req.Type == "subsystem" && len(req.Payload) >= 4 && string(req.Payload[4:]) == "sftp"
			if req.WantReply {
				req.Reply(ok, nil)
			}
		}
	}()
	return s.Serve(ch)
}

// Tree helpers: they act on the server's tree directly, as the server's own user.

// WriteFile creates or replaces a regular file; perm is applied as given when it
// is created. The parent must exist.
func (s *Server) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return s.srv.WriteFile(name, data, perm)
}

// ReadFile returns a copy of a file's contents.
func (s *Server) ReadFile(name string) ([]byte, error) { return s.srv.ReadFile(name) }

// Mkdir creates a directory with exactly perm.
func (s *Server) Mkdir(name string, perm fs.FileMode) error { return s.srv.Mkdir(name, perm) }

// MkdirAll creates a directory and any missing parents with exactly perm.
func (s *Server) MkdirAll(name string, perm fs.FileMode) error { return s.srv.MkdirAll(name, perm) }

// Symlink creates linkname pointing at target (os.Symlink's order).
func (s *Server) Symlink(target, linkname string) error { return s.srv.Symlink(target, linkname) }

// Chmod sets the permission bits of name, following links.
func (s *Server) Chmod(name string, mode fs.FileMode) error { return s.srv.Chmod(name, mode) }

// Stat reports name's attributes, following links.
func (s *Server) Stat(name string) (Attrs, error) {
	a, err := s.srv.Stat(name)
	return Attrs(a), err
}

// Lstat reports name's attributes without following a final link.
func (s *Server) Lstat(name string) (Attrs, error) {
	a, err := s.srv.Lstat(name)
	return Attrs(a), err
}

// Counters, for tests that assert what a client sent.

// Requests is how many packets of type t the server has read, over all sessions.
func (s *Server) Requests(t uint8) int { return s.srv.Requests(t) }

// OpenHandles is the number of handles open now, over all sessions.
func (s *Server) OpenHandles() int { return s.srv.OpenHandles() }

// MaxInflight is the most requests that were outstanding at one moment (sent and
// their reply not yet read), summed over sessions.
func (s *Server) MaxInflight() int { return s.srv.MaxInflight() }

// ResetStats zeroes MaxInflight and the Requests counters.
func (s *Server) ResetStats() { s.srv.ResetStats() }

// Withheld replies (Options.Stall).

// Stalled is the number of replies withheld now.
func (s *Server) Stalled() int { return s.srv.Stalled() }

// WaitStalled blocks until at least n replies are withheld, ctx ends or the server
// closes: the way to know a stalled request reached the server without sleeping.
func (s *Server) WaitStalled(ctx context.Context, n int) error { return s.srv.WaitStalled(ctx, n) }

// ReleaseStalled sends every reply withheld so far and returns how many.
func (s *Server) ReleaseStalled() int { return s.srv.ReleaseStalled() }

// ReleaseStalledWhere sends the withheld replies whose request match accepts.
func (s *Server) ReleaseStalledWhere(match func(Request) bool) int {
	return s.srv.ReleaseStalledWhere(func(r testserver.Request) bool { return match(Request(r)) })
}
