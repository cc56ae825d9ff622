//go:build linux

package realserver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// startTimeout bounds a server's start, up to the moment it accepts SSH connections.
const startTimeout = 20 * time.Second

// Server is a running SSH server with an SFTP subsystem serving Root.
type Server struct {
	Name    string        // "proftpd", "asyncssh", "paramiko", "dropbear"
	Addr    string        // 127.0.0.1:port
	User    string        // the login name
	Signer  ssh.Signer    // the client key the server authorizes
	HostKey ssh.PublicKey // the server's host key
	Root    string        // the directory served (for the Python servers, one per user under it)

	proc *proc
}

// ClientConfig logs in as User with Signer and accepts only HostKey.
func (s *Server) ClientConfig() *ssh.ClientConfig { return s.clientConfig(s.User) }

func (s *Server) clientConfig(user string) *ssh.ClientConfig {
	return &ssh.ClientConfig{
		User:              user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
		HostKeyCallback:   ssh.FixedHostKey(s.HostKey),
		HostKeyAlgorithms: []string{s.HostKey.Type()},
		Timeout:           10 * time.Second,
	}
}

// Dial opens an SSH connection to the server.
func (s *Server) Dial() (*ssh.Client, error) { return s.DialVia(s.Addr) }

// DialVia opens an SSH connection through addr (a delay proxy forwarding to Addr).
func (s *Server) DialVia(addr string) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, s.ClientConfig())
}

// DialAs opens an SSH connection logging in as user: to the Python servers, which
// serve each user the directory of that name under Root.
func (s *Server) DialAs(user string) (*ssh.Client, error) {
	return ssh.Dial("tcp", s.Addr, s.clientConfig(user))
}

// Log returns what the server has logged so far.
func (s *Server) Log() string { return s.proc.log() }

// skipf skips the test loudly: the message names the server and what to install.
func skipf(tb testing.TB, format string, args ...any) {
	tb.Helper()
	tb.Skipf("SKIPPED, real server unavailable: "+format, args...)
}

// keys makes the host and client keys in dir.
func keys(tb testing.TB, dir string) (host, client ssh.Signer, hostFile, clientPub string) {
	tb.Helper()
	hostFile = filepath.Join(dir, "host_ed25519")
	host, err := sshdtest.NewKeyFile(hostFile, "realserver host")
	if err != nil {
		tb.Fatal(err)
	}
	client, err = sshdtest.NewKeyFile(filepath.Join(dir, "client_ed25519"), "realserver client")
	if err != nil {
		tb.Fatal(err)
	}
	clientPub = filepath.Join(dir, "client_ed25519.pub")
	if err := os.WriteFile(clientPub, ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return host, client, hostFile, clientPub
}

// proc is a server process: its output goes to a log file (children a server forks per
// connection inherit it, so a pipe would keep cmd.Wait waiting for them), and stdin is
// a pipe whose closing tells the Python servers to exit.
type proc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
	exited  chan struct{}

	stopOnce sync.Once
}

// start runs cmd with its output appended to logPath. If the test binary dies, the
// kernel stops the server (Pdeathsig), so none outlives the tests.
func start(cmd *exec.Cmd, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p := &proc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = p.stdin.Close()
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	return string(b)
}

// stop closes stdin, sends SIGTERM and waits, killing the process after a bounded wait.
func (p *proc) stop() {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// waitBanner polls addr until an SSH server answers there: a bounded number of
// attempts under startTimeout, giving up at once if the process exits.
func (p *proc) waitBanner(addr string) error {
	const maxAttempts = 300
	deadline := time.Now().Add(startTimeout)
	pause := 5 * time.Millisecond
	var lastErr error
	for attempt := 1; attempt <= maxAttempts && time.Now().Before(deadline); attempt++ {
		if lastErr = sshdtest.ProbeBanner(addr); lastErr == nil {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-p.exited:
			t.Stop()
			return fmt.Errorf("exited during start (%v)", p.cmd.ProcessState)
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
	return fmt.Errorf("not ready on %s after %v: %v", addr, startTimeout, lastErr)
}

// listenOnFreePort starts a server with launch on a free port and waits for its banner,
// trying again with another port (a bounded number of times) when the port was taken.
func listenOnFreePort(tb testing.TB, name string, launch func(port int) (*proc, error)) (*proc, string) {
	tb.Helper()
	const attempts = 3
	for i := 1; ; i++ {
		port, err := sshdtest.FreePort()
		if err != nil {
			tb.Fatal(err)
		}
		p, err := launch(port)
		if err != nil {
			tb.Fatalf("%s: starting: %v", name, err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		err = p.waitBanner(addr)
		if err == nil {
			return p, addr
		}
		p.stop()
		log := p.log()
		if i < attempts && strings.Contains(strings.ToLower(log), "address already in use") {
			continue
		}
		tb.Fatalf("%s: %v; log:\n%s", name, err, log)
	}
}

// readPort reads the "port N" line a Python server prints once it listens, within
// startTimeout; it fails the test with the server's log if the line does not come.
func readPort(tb testing.TB, name string, p *proc, out io.Reader) int {
	tb.Helper()
	got := make(chan int, 1)
	go func() {
		defer close(got)
		line, err := bufio.NewReader(out).ReadString('\n')
		var port int
		if err == nil {
			if _, err := fmt.Sscanf(line, "port %d", &port); err == nil {
				got <- port
			}
		}
	}()
	select {
	case port, ok := <-got:
		if ok {
			return port
		}
	case <-time.After(startTimeout):
	}
	p.stop()
	tb.Fatalf("%s: no port announced; log:\n%s", name, p.log())
	return 0
}

// register stops the server at cleanup and shows its log if the test failed.
func register(tb testing.TB, s *Server) {
	tb.Cleanup(func() {
		s.proc.stop()
		if tb.Failed() {
			tb.Logf("%s log:\n%s", s.Name, s.proc.log())
		}
	})
}
