//go:build !nosluice

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// The pipe case: sluice the way restic and rclone start SFTP, over the stdin and stdout
// of an OpenSSH `ssh -s … sftp` process (NewClientPipe), with the same key and options
// as the sftp(1) row and through the same delay proxy.

func init() {
	register(&row{id: pipeRowID, title: "sluice NewClientPipe, one `ssh -s sftp`", order: 80, sftp: true, pipe: true,
		transfer: func(ctx context.Context, _ *ssh.Client, j *job) (int64, error) {
			return sluicePipeTransfer(ctx, j, nil)
		}})
}

// sluicePipeTransfer starts one ssh process, runs NewClientPipe on it with opts (which
// may start more through p), copies the file the way sluiceTransfer does, and then waits
// for every ssh process it started.
func sluicePipeTransfer(ctx context.Context, j *job, opts func(p *sshPipes) []sluice.Option) (n int64, err error) {
	p := &sshPipes{j: j}
	defer func() {
		if werr := p.wait(10 * time.Second); err == nil {
			err = werr
		}
	}()
	r, w, err := p.open(ctx)
	if err != nil {
		return 0, err
	}
	var o []sluice.Option
	if opts != nil {
		o = opts(p)
	}
	c, err := sluice.NewClientPipe(ctx, r, w, o...)
	if err != nil {
		_ = w.Close()
		return 0, fmt.Errorf("%w (ssh: %s)", err, p.stderr())
	}
	defer c.Close()
	return copyWithClient(ctx, c, j)
}

// sshPipes starts `ssh -s sftp` processes for one transfer and reaps them all.
type sshPipes struct {
	j     *job
	mu    sync.Mutex
	cmds  []*exec.Cmd
	errbs []*cappedBuffer
}

// open starts one more ssh process and returns its stdout and stdin. The process is not
// tied to ctx: a lane outlives the call that opened it, and ends when the client closes
// its stdin.
func (p *sshPipes) open(ctx context.Context) (io.Reader, io.WriteCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	_, port, err := net.SplitHostPort(p.j.Addr)
	if err != nil {
		return nil, nil, err
	}
	args := append(opensshOptions(p.j), "-p", port, "-s", p.j.User+"@127.0.0.1", "sftp")
	cmd := exec.Command("ssh", args...)
	errb := &cappedBuffer{max: 4 << 10}
	cmd.Stderr = errb
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting ssh: %w", err)
	}
	p.cmds, p.errbs = append(p.cmds, cmd), append(p.errbs, errb)
	return r, w, nil
}

// wait reaps every process, killing those still running after timeout (the client has
// closed their stdin by now, so ssh normally exits at once). Once the client is closed an
// exit status of ssh is no longer the transfer's business unless ssh failed to start a
// session, so only a process that wrote to stderr counts as failed.
func (p *sshPipes) wait(timeout time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for i, cmd := range p.cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && p.errbs[i].String() != "" {
				errs = append(errs, fmt.Errorf("ssh %d: %v: %s", i+1, err, strings.TrimSpace(p.errbs[i].String())))
			}
		case <-time.After(timeout):
			_ = cmd.Process.Kill()
			<-done
			errs = append(errs, fmt.Errorf("ssh %d still running %v after the client closed; killed", i+1, timeout))
		}
	}
	return errors.Join(errs...)
}

// stderr is what the ssh processes wrote so far, for an error message.
func (p *sshPipes) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, b := range p.errbs {
		if s := strings.TrimSpace(b.String()); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}
