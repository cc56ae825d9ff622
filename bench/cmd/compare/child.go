package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// job is what the harness hands a child process: one transfer by one row.
type job struct {
	Row     string `json:"row"`
	Addr    string `json:"addr"` // sshd, or the delay proxy in front of it
	User    string `json:"user"`
	KeyFile string `json:"key_file"`
	HostKey string `json:"host_key"` // authorized_keys format
	// KnownHosts is a known_hosts file for OpenSSH ssh(1), which the pipe rows run.
	KnownHosts string        `json:"known_hosts,omitempty"`
	Dir        direction     `json:"dir"`
	Remote     string        `json:"remote"` // download source or upload destination
	Local      string        `json:"local"`  // upload source; a tree download's destination
	Tree       bool          `json:"tree,omitempty"`
	Size       int64         `json:"size"` // a tree's: all its files' bytes
	Timeout    time.Duration `json:"timeout"`
	Sluice     sluiceOptions `json:"sluice"`
	// Parallel is the plain-par row's connection count.
	Parallel int `json:"parallel,omitempty"`
	// Soak, if set, makes the job a soak (soak.go) rather than a transfer.
	Soak *soakJob `json:"soak,omitempty"`
	// Small, if set, makes the job a small-call cell (small.go).
	Small *smallJob `json:"small,omitempty"`
	// Service, if set, makes the job a service run (service.go).
	Service *serviceJob `json:"service,omitempty"`
}

// childResult is the child's one line of output.
type childResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"` // transfer only, after the SSH handshake
}

const childFlag = "-child="

func childArg(args []string) (string, bool) {
	if len(args) > 0 && strings.HasPrefix(args[0], childFlag) {
		return strings.TrimPrefix(args[0], childFlag), true
	}
	return "", false
}

// childMain runs one transfer and prints a childResult; any failure goes to stderr with
// a non-zero exit. The parent kills the child at the timeout; the context here only
// bounds the calls that take one.
func childMain(spec string) int {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad job:", err)
		return 2
	}
	if j.Soak != nil {
		return soakChildMain(&j)
	}
	if j.Small != nil {
		return smallChildMain(&j)
	}
	if j.Service != nil {
		return serviceChildMain(&j)
	}
	r := findRow(j.Row)
	if r == nil || r.childFunc(&j) == nil {
		fmt.Fprintf(os.Stderr, "child: no Go client row %q for this case in this build\n", j.Row)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout)
	defer cancel()
	// A pipe row starts ssh(1) processes of its own and gets no connection.
	var conn *ssh.Client
	if !r.pipe {
		var err error
		if conn, err = dial(ctx, &j); err != nil {
			fmt.Fprintln(os.Stderr, "child: dial:", err)
			return 1
		}
		defer conn.Close()
	}
	start := time.Now()
	n, err := r.childFunc(&j)(ctx, conn, &j)
	elapsed := time.Since(start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "child: %s %s: %v (after %d bytes)\n", j.Row, j.Dir, err, n)
		return 1
	}
	if n != j.Size {
		fmt.Fprintf(os.Stderr, "child: %s %s moved %d bytes, want %d\n", j.Row, j.Dir, n, j.Size)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(childResult{Bytes: n, Seconds: elapsed.Seconds()}); err != nil {
		return 1
	}
	return 0
}

// childJSON runs j in a child process of this binary, killed (with whatever it
// started) at j.Timeout, and decodes the child's output into v; a failed child's
// error carries the start of its stderr.
func (h *harness) childJSON(ctx context.Context, j *job, v any) error {
	spec, err := json.Marshal(j)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, h.exe, childFlag+string(spec))
	stderr := &cappedBuffer{max: 16 << 10}
	cmd.Stderr = stderr
	killTreeOnCancel(cmd)
	cmd.WaitDelay = 5 * time.Second
	outb, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(outb, v); err != nil {
		return fmt.Errorf("child output %q: %v", outb, err)
	}
	return nil
}

// dial opens the child's SSH connection: key login, pinned host key, and the one cipher
// every row uses. It gives up when ctx is done, the handshake included, as
// sluice.WithDialer asks of a dial function.
func dial(ctx context.Context, j *job) (*ssh.Client, error) {
	keyPEM, err := os.ReadFile(j.KeyFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(j.HostKey))
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:              j.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   ssh.FixedHostKey(hostKey),
		HostKeyAlgorithms: []string{hostKey.Type()},
		Timeout:           30 * time.Second,
	}
	cfg.Ciphers = []string{sshdtest.CipherAES128GCM}
	d := net.Dialer{Timeout: cfg.Timeout}
	nc, err := d.DialContext(ctx, "tcp", j.Addr)
	if err != nil {
		return nil, err
	}
	// The handshake reads and writes nc; closing it when ctx ends makes it return.
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	c, chans, reqs, err := ssh.NewClientConn(nc, j.Addr, cfg)
	if !stop() {
		if err == nil {
			_ = c.Close()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return ssh.NewClient(c, chans, reqs), nil
}
