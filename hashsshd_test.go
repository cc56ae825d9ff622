package sftp

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Harness: an SSH server in this process whose commands say what a test wants.
//
// Hash's command means (hashcmd.go) runs sha256sum and the like in an exec session.
// Real servers (the private sshd with coreutils) show that it works; this server shows
// what the client does when a server's command lies, refuses, prints too much, never
// ends, or is missing: its sessions serve SFTP from a testserver, and each exec request
// is answered by the test's function. Only for such faults: behaviour that belongs to a
// real server is tested against one (hashcmd_test.go, against sshd).

// execAnswer is what the in-process SSH server does with one command.
type execAnswer struct {
	refuse         bool // refuse the exec request
	stdout, stderr string
	status         uint32
	// hang, when not nil, keeps the command running until it is closed or the client
	// closes the session; closed (if not nil) is then closed when the client did.
	hang, closed chan struct{}
}

// execSSH is the in-process SSH server.
type execSSH struct {
	srv  *testserver.Server
	ln   net.Listener
	exec func(cmd string) execAnswer
	cfg  *ssh.ServerConfig

	mu       sync.Mutex
	commands []string
	conns    []net.Conn
	wg       sync.WaitGroup
}

// startExecSSH starts the server on 127.0.0.1; cleanup stops it and waits for its
// goroutines.
func startExecSSH(t *testing.T, opts testserver.Options, exec func(cmd string) execAnswer) *execSSH {
	t.Helper()
	tsNoLeaks(t)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := ssh.NewSignerFromKey(key)
	require.NoError(t, err)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &execSSH{srv: testserver.New(opts), ln: ln, exec: exec, cfg: cfg}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.stop)
	return s
}

func (s *execSSH) stop() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.srv.Close()
	s.wg.Wait()
}

// ran returns the commands the server was asked to run, in order.
func (s *execSSH) ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// client connects a Client (and its SSH connection, both closed at cleanup).
func (s *execSSH) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	sc, err := ssh.Dial("tcp", s.ln.Addr().String(), &ssh.ClientConfig{User: "t", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	require.NoError(t, err)
	c, err := NewClient(testCtx(t), sc, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(); sc.Close() })
	return c
}

func (s *execSSH) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, nc)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(nc)
	}
}

func (s *execSSH) serve(nc net.Conn) {
	defer s.wg.Done()
	_, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	if err != nil {
		nc.Close()
		return
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); ssh.DiscardRequests(reqs) }()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go s.session(ch, creqs)
	}
}

// session answers one session's requests: the sftp subsystem, or one exec.
func (s *execSSH) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer s.wg.Done()
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "subsystem":
			req.Reply(true, nil)
			s.sftp(ch)
			return
		case "exec":
			var p struct{ Command string }
			if ssh.Unmarshal(req.Payload, &p) != nil {
				req.Reply(false, nil)
				continue
			}
			s.mu.Lock()
			s.commands = append(s.commands, p.Command)
			s.mu.Unlock()
			a := s.exec(p.Command)
			if a.refuse {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			s.run(ch, reqs, a)
			return
		default:
			req.Reply(false, nil)
		}
	}
}

func (s *execSSH) sftp(ch ssh.Channel) {
	r, w := s.srv.Conn()
	done := make(chan struct{})
	go func() {
		io.Copy(w, ch)
		w.Close()
		close(done)
	}()
	io.Copy(ch, r)
	r.Close()
	ch.CloseWrite()
	<-done
}

// run plays a command: its output, then (after hang, if any) its exit status. The
// client closing the session closes reqs.
func (s *execSSH) run(ch ssh.Channel, reqs <-chan *ssh.Request, a execAnswer) {
	io.WriteString(ch, a.stdout)
	io.WriteString(ch.Stderr(), a.stderr)
	if a.hang != nil {
		gone := make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for r := range reqs {
				r.Reply(false, nil)
			}
			close(gone)
		}()
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
