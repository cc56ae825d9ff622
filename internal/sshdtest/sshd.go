package sshdtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHDOptions tunes a private sshd. The zero value gives OpenSSH's defaults as deployed
// (MaxSessions 10, sftp-server logging only errors, every cipher allowed).
type SSHDOptions struct {
	// MaxSessions is sshd's limit on session channels per connection, which bounds how
	// many SFTP channels a client can stripe over. 0 means 10, OpenSSH's default.
	MaxSessions int

	// SFTPServerArgs are appended to the sftp-server command line in the Subsystem line,
	// for example "-l", "INFO" or "-R" (read-only) or "-d", dir (start directory). sshd runs
	// the subsystem through the user's shell; StartSSHD quotes each argument for both the
	// config parser and the shell, so any path works except one with a newline.
	SFTPServerArgs []string

	// SFTPServerLog, when set, makes every sftp-server log to stderr (-e) and appends that
	// stderr to this file (a shell redirection). With "-l", "INFO" it records one line per
	// closed handle with the bytes read and written, which lets a benchmark check what the
	// server really moved. Quoted like SFTPServerArgs.
	SFTPServerLog string

	// Ciphers, when set, restricts the ciphers ClientConfig offers (CipherAES128GCM for the
	// benchmarks). The server still accepts its defaults, so other clients are unaffected.
	Ciphers []string

	// ExtraConfig lines go into sshd_config before the defaults. sshd keeps the first
	// value it reads for a keyword, so these override the defaults ("LogLevel DEBUG3",
	// "MaxStartups 50"). Match blocks are not supported: they would swallow the defaults.
	ExtraConfig []string

	// StartTimeout bounds the wait for sshd to accept connections. 0 means 15s.
	StartTimeout time.Duration

	// LoginUser, when set, is the account ClientConfig logs in as instead of the
	// current user: created if missing (EnsureUser, a /bin/sh login shell; needs root).
	// sshd starts every session's subsystem through the user's login shell, and bash
	// reads ~/.bashrc for sshd sessions, so a developer's shell set-up is paid once per
	// SFTP channel (root's pyenv set-up on the project's bench machine: 170 ms of CPU
	// each). Benchmarks log in as a plain account, as an SFTP user on a server would.
	LoginUser string
}

// SSHD is a running private OpenSSH server on 127.0.0.1. Its files (config, keys, log)
// live in Dir, which Close removes.
type SSHD struct {
	Addr           string        // "127.0.0.1:port"
	Port           int           // the listening port
	User           string        // the login user: the current user (root)
	Signer         ssh.Signer    // the client key sshd authorizes
	HostKey        ssh.PublicKey // sshd's host key
	KeyFile        string        // Signer's private key in OpenSSH format, for ssh -i / sftp -i
	KnownHostsFile string        // one known_hosts line for [127.0.0.1]:Port
	Dir            string        // the temporary directory holding all of the above
	Ciphers        []string      // ClientConfig's cipher list; nil means x/crypto's defaults

	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when cmd.Wait has returned

	closeOnce sync.Once
	closeErr  error
}

// maxStartAttempts bounds how often StartSSHD retries with another port when the one it
// picked was taken between probing and sshd's bind (another process can win that race).
const maxStartAttempts = 3

// errPortTaken marks a start that failed only because the port was in use.
var errPortTaken = errors.New("sshdtest: port already in use")

// safeArg matches what can go through sshd's Subsystem line and the login shell unquoted.
var safeArg = regexp.MustCompile(`^[A-Za-z0-9_./%:=@+,-]+$`)

// shellWord quotes s for the login shell, which sshd runs the subsystem command with
// (`$SHELL -c "command"`).
func shellWord(s string) string {
	if safeArg.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// configToken makes s one token of an sshd_config line. sshd splits lines on blanks,
// honouring double quotes and backslash escapes inside them, and then joins the
// Subsystem tokens with single spaces, so a shell word with blanks or quotes in it
// must be wrapped once more for the config parser.
func configToken(s string) string {
	if !strings.ContainsAny(s, " \t'\"\\#") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// StartSSHD generates keys and a config in a new temporary directory, starts
// `sshd -D -e -f config` and returns once sshd answers with an SSH banner. The caller must
// Close it. Errors that mean the machine cannot run sshd wrap ErrUnavailable.
func StartSSHD(opts SSHDOptions) (*SSHD, error) {
	if err := SSHDUsable(); err != nil {
		return nil, err
	}
	for _, a := range append(slices.Clone(opts.SFTPServerArgs), opts.SFTPServerLog) {
		if strings.ContainsAny(a, "\n\r\x00") {
			return nil, fmt.Errorf("sshdtest: sftp-server argument %q cannot go on an sshd_config line", a)
		}
	}
	for _, l := range opts.ExtraConfig {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(l)), "match") {
			return nil, errors.New("sshdtest: Match blocks are not supported in ExtraConfig")
		}
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = 10
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 15 * time.Second
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("sshdtest: %w", err)
	}
	// sshd refuses to start without its privilege separation directory; a fresh container
	// has no /run/sshd because no init script ever ran.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("%w: creating /run/sshd: %v", ErrUnavailable, err)
	}
	dir, err := os.MkdirTemp("", "sshdtest-")
	if err != nil {
		return nil, fmt.Errorf("sshdtest: %w", err)
	}
	s := &SSHD{User: u.Username, Dir: dir, Ciphers: slices.Clone(opts.Ciphers), logPath: filepath.Join(dir, "sshd.log")}
	if opts.LoginUser != "" {
		err = s.loginAs(opts.LoginUser)
	}
	if err == nil {
		err = s.start(opts)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *SSHD) start(opts SSHDOptions) error {
	host, err := newKeyPair(filepath.Join(s.Dir, "host_ed25519"), "sshdtest host")
	if err != nil {
		return err
	}
	client, err := newKeyPair(filepath.Join(s.Dir, "client_ed25519"), "sshdtest client")
	if err != nil {
		return err
	}
	s.Signer, s.HostKey, s.KeyFile = client.signer, host.signer.PublicKey(), client.path
	authorized := filepath.Join(s.Dir, "authorized_keys")
	// Readable by every user (it holds public keys only): sshd reads it as the one logging in.
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(client.signer.PublicKey()), 0o644); err != nil {
		return fmt.Errorf("sshdtest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		cfg := filepath.Join(s.Dir, "sshd_config")
		if err := os.WriteFile(cfg, []byte(sshdConfig(opts, s.Dir, host.path, authorized, port)), 0o600); err != nil {
			return fmt.Errorf("sshdtest: %w", err)
		}
		s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.run(cfg, opts.StartTimeout)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == maxStartAttempts {
			return err
		}
	}
	s.KnownHostsFile = filepath.Join(s.Dir, "known_hosts")
	line := knownhosts.Line([]string{s.Addr}, s.HostKey) + "\n"
	if err := os.WriteFile(s.KnownHostsFile, []byte(line), 0o600); err != nil {
		_ = s.Close()
		return fmt.Errorf("sshdtest: %w", err)
	}
	return nil
}

// sshdConfig renders sshd_config for a private instance: loopback only, its own host
// key, pid file and authorized keys, key login only, no PAM.
func sshdConfig(opts SSHDOptions, dir, hostKey, authorized string, port int) string {
	var b strings.Builder
	b.WriteString("# written by sshdtest\n")
	for _, l := range opts.ExtraConfig {
		b.WriteString(l + "\n")
	}
	sub := []string{configToken(shellWord(SFTPServerPath()))}
	for _, a := range opts.SFTPServerArgs {
		sub = append(sub, configToken(shellWord(a)))
	}
	if opts.SFTPServerLog != "" {
		if !slices.Contains(opts.SFTPServerArgs, "-e") {
			sub = append(sub, "-e")
		}
		sub = append(sub, configToken("2>>"+shellWord(opts.SFTPServerLog)))
		// With a redirection the shell would fork and wait instead of exec'ing the
		// server, leaving a shell between sshd and every sftp-server. sshd only logs
		// (at debug level) that it cannot stat "exec".
		sub = append([]string{"exec"}, sub...)
	}
	fmt.Fprintf(&b, `ListenAddress 127.0.0.1
Port %d
HostKey %s
PidFile %s
AuthorizedKeysFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
MaxSessions %d
PrintMotd no
PrintLastLog no
X11Forwarding no
Subsystem sftp %s
`, port, configToken(hostKey), configToken(filepath.Join(dir, "sshd.pid")), configToken(authorized),
		opts.MaxSessions, strings.Join(sub, " "))
	return b.String()
}

// freePort asks the kernel for an unused loopback port. It can be taken again before sshd
// binds it; start retries in that case.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("sshdtest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts sshd with cfg and waits until it is ready.
func (s *SSHD) run(cfg string, timeout time.Duration) error {
	// The log is a file rather than a pipe: sshd's per-connection children inherit stderr,
	// and with a pipe cmd.Wait would block on them until every client has gone.
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("sshdtest: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd) // where the OS can: if this process dies without Close
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sshdtest: starting sshd: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(timeout); err != nil {
		s.stop()
		if strings.Contains(s.Log(), "Address already in use") {
			return fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return err
	}
	return nil
}

// waitReady polls the port until sshd sends its banner: a bounded number of attempts
// with growing pauses, under an overall deadline, and it gives up at once if sshd exits.
func (s *SSHD) waitReady(timeout time.Duration) error {
	const maxAttempts = 300
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	var lastErr error
	for attempt := 1; attempt <= maxAttempts && time.Now().Before(deadline); attempt++ {
		if lastErr = probeBanner(s.Addr); lastErr == nil {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-s.exited:
			t.Stop()
			return fmt.Errorf("sshdtest: sshd exited during start (%s); log:\n%s", s.cmd.ProcessState, s.Log())
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
	return fmt.Errorf("sshdtest: sshd not ready on %s after %v: %v; log:\n%s", s.Addr, timeout, lastErr, s.Log())
}

// probeBanner connects and reads the identification line, which proves that sshd (and
// not some other listener on a recycled port) is accepting connections.
func probeBanner(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	line, err := bufio.NewReaderSize(c, 256).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "SSH-2.0-") {
		return fmt.Errorf("unexpected banner %q", line)
	}
	return nil
}

// NewSSHD starts a private sshd for a test, skips the test when the machine cannot run
// one, and registers a Cleanup that stops it (logging sshd's output if the test failed).
// Cleanups run last-in first-out, so clients a test opens after NewSSHD are closed first.
func NewSSHD(tb testing.TB, opts SSHDOptions) *SSHD {
	tb.Helper()
	s, err := StartSSHD(opts)
	if errors.Is(err, ErrUnavailable) {
		tb.Skipf("sshdtest: skipping: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("sshd log:\n%s", s.Log())
		}
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// ClientConfig returns a new config that logs in as User with Signer, accepts only
// HostKey and, if Ciphers is set, offers only those ciphers. Callers may modify it.
func (s *SSHD) ClientConfig() *ssh.ClientConfig {
	cfg := &ssh.ClientConfig{
		User:              s.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
		HostKeyCallback:   ssh.FixedHostKey(s.HostKey),
		HostKeyAlgorithms: []string{s.HostKey.Type()},
		Timeout:           10 * time.Second,
	}
	cfg.Ciphers = slices.Clone(s.Ciphers)
	return cfg
}

// Dial opens an SSH connection to the server.
func (s *SSHD) Dial() (*ssh.Client, error) { return s.DialVia(s.Addr) }

// DialVia opens an SSH connection through addr (a delay proxy forwarding to Addr), still
// checking the server's host key.
func (s *SSHD) DialVia(addr string) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, s.ClientConfig())
}

// Pid returns the process id of the listening sshd.
func (s *SSHD) Pid() int { return s.cmd.Process.Pid }

// Log returns what sshd has written to stderr so far (it runs with -e).
func (s *SSHD) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(sshd log unavailable: %v)", err)
	}
	return string(b)
}

// Close stops sshd and every process under it (the per-connection sshd processes and
// their sftp-servers, which sshd does not stop itself), then removes Dir. It is safe to
// call more than once.
func (s *SSHD) Close() error {
	s.closeOnce.Do(func() {
		err := s.stop()
		if rmErr := os.RemoveAll(s.Dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("sshdtest: %w", rmErr))
		}
		s.closeErr = err
	})
	return s.closeErr
}

// stop terminates sshd and its descendants, escalating to SIGKILL after a bounded wait.
func (s *SSHD) stop() error {
	if s.cmd == nil {
		return nil
	}
	// Find the children before the listener goes: afterwards they are reparented and can
	// no longer be told apart from other processes.
	kids := descendants(s.cmd.Process.Pid)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	signalAll(kids, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	left := waitGone(kids, 5*time.Second)
	if len(left) > 0 {
		signalAll(left, syscall.SIGKILL)
		if left = waitGone(left, 2*time.Second); len(left) > 0 {
			return fmt.Errorf("sshdtest: processes %v outlived SIGKILL", left)
		}
	}
	return nil
}
