package sftp

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Harness: an in-process SSH server whose sessions run the in-process SFTP server.
//
// The in-process server (testserver_env_test.go) does on demand what a real server
// will not (withhold a reply, delay one); this puts it behind a real SSH layer, on a
// real TCP socket, so that what happens below SFTP can be tested too: keepalives
// answered by the SSH layer while an SFTP reply is withheld, and a connection that
// goes silent (internal/faultproxy in front of it: a black hole). The SSH side is
// x/crypto's server, as rclone's `serve sftp` uses: it answers every global request
// it does not know (keepalive@openssh.com among them) with a failure, which is an
// answer. No root is needed.
//
//   - newSSHTestServer(t, opts): the server on 127.0.0.1, serving one testserver.Server
//     (sshTestServer.srv) on every "sftp" subsystem session; cleanup closes it.
//   - dial(t, addr): an SSH connection to it, directly (s.addr) or through a proxy;
//     cleanup closes it.
//   - blackHoleProxy(t, s): a faultproxy in front of s; cleanup closes it.
//   - startExecSSH(t, opts, exec): the same server whose exec sessions are answered by
//     exec (execAnswer): a command that lies, refuses, prints too much, never ends.
//     Hash's command means (hashcmd.go) are tested on it for such faults; that they
//     work is shown against the private sshd (hashcmd_test.go). ran lists the
//     commands asked for; client connects a Client.
//
// Where tests go: keepalive and dead-peer detection in keepalive_test.go; the hash
// command in hashcmd_test.go; anything else that needs SSH below the in-process
// server goes in the test file of the mechanism it tests.
type sshTestServer struct {
	srv  *testserver.Server
	addr string
	cfg  *ssh.ServerConfig
	pub  ssh.PublicKey
	ln   net.Listener
	wg   sync.WaitGroup
	exec func(cmd string) execAnswer // nil: exec requests are refused

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	commands []string
}

// execAnswer is what the in-process SSH server does with one command.
type execAnswer struct {
	refuse         bool // refuse the exec request
	stdout, stderr string
	status         uint32
	// hang, when not nil, keeps the command running until it is closed or the client
	// closes the session; closed (if not nil) is then closed when the client did.
	hang, closed chan struct{}
}

// startExecSSH is newSSHTestServer whose exec requests exec answers.
func startExecSSH(t *testing.T, opts testserver.Options, exec func(cmd string) execAnswer) *sshTestServer {
	t.Helper()
	tsNoLeaks(t)
	s := newSSHTestServer(t, opts)
	s.exec = exec // before any connection: accept only serves what dials in
	return s
}

func newSSHTestServer(t *testing.T, opts testserver.Options) *sshTestServer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := ssh.NewSignerFromKey(key)
	require.NoError(t, err)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &sshTestServer{srv: testserver.New(opts), addr: ln.Addr().String(), cfg: cfg,
		pub: signer.PublicKey(), ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *sshTestServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(nc)
	}
}

// serve runs one SSH connection: global requests are answered (with a failure, as
// x/crypto's server does), sessions run the SFTP server on their "sftp" subsystem.
func (s *sshTestServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	sconn, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	if err != nil {
		return
	}
	defer sconn.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { ssh.DiscardRequests(reqs) })
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Go(func() { s.session(ch, creqs) })
	}
}

// session serves one session channel: the "sftp" subsystem runs a session of the
// in-process server on the channel's streams, an exec runs the test's answer when the
// server has exec; every other request is refused.
func (s *sshTestServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ch.Close()
	started := false
	for req := range reqs {
		if !started && req.Type == "exec" && s.exec != nil {
			if s.runExec(ch, req, reqs) {
				return
			}
			continue
		}
		var sub struct{ Name string }
		ok := !started && req.Type == "subsystem" && ssh.Unmarshal(req.Payload, &sub) == nil && sub.Name == "sftp"
		if req.WantReply {
			req.Reply(ok, nil)
		}
		if !ok {
			continue
		}
		started = true
		r, w := s.srv.Conn()
		wg.Go(func() {
			io.Copy(w, ch) // the client's requests, until it closes the channel
			w.Close()
		})
		wg.Go(func() {
			io.Copy(ch, r) // the replies, until the session ends
			r.Close()
			ch.Close()
		})
	}
}

// runExec answers an exec request with the test's answer and plays it; false when
// the request was refused and the session goes on.
func (s *sshTestServer) runExec(ch ssh.Channel, req *ssh.Request, reqs <-chan *ssh.Request) bool {
	var p struct{ Command string }
	if ssh.Unmarshal(req.Payload, &p) != nil {
		req.Reply(false, nil)
		return false
	}
	s.mu.Lock()
	s.commands = append(s.commands, p.Command)
	s.mu.Unlock()
	a := s.exec(p.Command)
	req.Reply(!a.refuse, nil)
	if a.refuse {
		return false
	}
	s.play(ch, reqs, a)
	return true
}

// play plays a command: its output, then (after hang, if any) its exit status. The
// client closing the session closes reqs.
func (s *sshTestServer) play(ch ssh.Channel, reqs <-chan *ssh.Request, a execAnswer) {
	io.WriteString(ch, a.stdout)
	io.WriteString(ch.Stderr(), a.stderr)
	if a.hang != nil {
		gone := make(chan struct{})
		s.wg.Go(func() {
			for r := range reqs {
				r.Reply(false, nil)
			}
			close(gone)
		})
		select {
		case <-a.hang:
		case <-gone:
			if a.closed != nil {
				close(a.closed)
			}
			return
		}
	}
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{a.status}))
}

// ran returns the commands the server was asked to run, in order.
func (s *sshTestServer) ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// client connects a Client on a new SSH connection (both closed at cleanup).
func (s *sshTestServer) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	sc := s.dial(t, s.addr)
	c, err := NewClient(testCtx(t), sc, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// dial makes an SSH connection to the server at addr (s.addr, or a proxy in front of
// it). Cleanup closes it.
func (s *sshTestServer) dial(t *testing.T, addr string) *ssh.Client {
	t.Helper()
	sc, err := s.dialErr(addr)
	require.NoError(t, err, "dialling the in-process SSH server")
	t.Cleanup(func() { sc.Close() })
	return sc
}

func (s *sshTestServer) dialErr(addr string) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, &ssh.ClientConfig{User: "test", HostKeyCallback: ssh.FixedHostKey(s.pub)})
}

// close stops accepting, ends every connection and the SFTP server, and waits for
// every goroutine.
func (s *sshTestServer) close() {
	s.mu.Lock()
	s.closed = true
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.srv.Close()
	s.wg.Wait()
}

// blackHoleProxy is a faultproxy in front of s: Break(faultproxy.BlackHole) makes
// every connection through it go silent. Cleanup closes it (before s: cleanups run
// last first).
func blackHoleProxy(t *testing.T, s *sshTestServer, opts ...faultproxy.Option) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(s.addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	return p
}
