package sftp

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// The real servers of the stop-then-resume model (model_resume_test.go): OpenSSH's
// sftp-server over pipes, one process per channel, so a striped run's lanes are
// separate server processes carrying out their WRITEs independently, as sshd's are;
// and the private sshd, striped over sessions of one connection. On both, every way a
// transfer stops is real: its connections killed (the servers SIGKILLed), and the
// process running it killed (a child process, SIGKILLed).

// pipeResume runs each transfer over sftp-server processes started for it.
type pipeResume struct {
	dir string

	mu    sync.Mutex
	procs []*exec.Cmd // the current run's servers
}

func newPipeResume(t *testing.T) *pipeResume {
	if !sshdtest.Available() {
		t.Skip("skipping: OpenSSH sftp-server is not installed")
	}
	return &pipeResume{dir: serverDir(t)}
}

// serve starts a server for the current run.
func (e *pipeResume) serve() (io.Reader, io.WriteCloser, error) {
	cmd, r, w, err := sshdtest.StartSFTPServerCmd(e.dir, nil)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, cmd)
	e.mu.Unlock()
	return r, w, nil
}

func (e *pipeResume) client(t *testing.T, opts ...Option) *Client {
	r, w, err := e.serve()
	require.NoError(t, err)
	open := func(context.Context) (io.Reader, io.WriteCloser, error) { return e.serve() }
	c, err := NewClientPipe(testCtx(t), r, w, append(opts, WithPipeOpener(open))...)
	require.NoError(t, err)
	pinLanes(c, c.opts.channels)
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *pipeResume) running() []*exec.Cmd {
	e.mu.Lock()
	defer e.mu.Unlock()
	procs := e.procs
	e.procs = nil
	return procs
}

// kill SIGKILLs the run's servers: the connections die mid-request, and what a server
// had read and not carried out is lost.
func (e *pipeResume) kill() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cmd := range e.procs {
		cmd.Process.Kill()
	}
}

// settle waits for the run's servers to exit: each does once its client is gone.
func (e *pipeResume) settle(t *testing.T) {
	for _, cmd := range e.running() {
		waitExit(cmd)
	}
}

func (e *pipeResume) remote(name string) string { return name }

func (e *pipeResume) read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(e.dir, name))
}

func (e *pipeResume) marked(t *testing.T, name string) bool {
	return localMarked(t, filepath.Join(e.dir, name))
}

func (e *pipeResume) write(t *testing.T, name string, data []byte) {
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, name), data, 0o644))
}

// child starts a server per channel the child may use and hands it their pipes: the
// servers stay this process's children, so settle waits for them.
func (e *pipeResume) child(t *testing.T, cfg *childConfig) ([]*os.File, bool) {
	var files []*os.File
	for range cfg.Lanes + 1 {
		inR, inW, err := os.Pipe()
		require.NoError(t, err)
		outR, outW, err := os.Pipe()
		require.NoError(t, err)
		cmd := exec.Command(sshdtest.SFTPServerPath(), "-e", "-d", e.dir)
		cmd.Stdin, cmd.Stdout = inR, outW
		require.NoError(t, cmd.Start())
		inR.Close()
		outW.Close()
		e.mu.Lock()
		e.procs = append(e.procs, cmd)
		e.mu.Unlock()
		files = append(files, outR, inW)
	}
	cfg.Pipes = cfg.Lanes + 1
	return files, true
}

// sshdResume runs each transfer over a connection to the private sshd, striped over
// its sessions.
type sshdResume struct {
	sshd *sshdtest.SSHD
	dir  string

	mu    sync.Mutex
	conns []*ssh.Client // the current run's
}

func (e *sshdResume) client(t *testing.T, opts ...Option) *Client {
	sc, err := e.sshd.Dial()
	require.NoError(t, err)
	e.mu.Lock()
	e.conns = append(e.conns, sc)
	e.mu.Unlock()
	c, err := NewClient(testCtx(t), sc, append([]Option{withStripeMinRTT(0)}, opts...)...)
	require.NoError(t, err)
	pinLanes(c, c.opts.channels)
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *sshdResume) kill() { e.sshd.KillSessions() }

// settle closes the run's connections and waits until sshd has no session left.
func (e *sshdResume) settle(t *testing.T) {
	e.mu.Lock()
	conns := e.conns
	e.conns = nil
	e.mu.Unlock()
	for _, sc := range conns {
		sc.Close()
	}
	require.True(t, e.sshd.WaitSessionsGone(testTimeout), "sshd's sessions did not end")
}

func (e *sshdResume) remote(name string) string { return filepath.Join(e.dir, name) }

func (e *sshdResume) read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(e.dir, name))
}

func (e *sshdResume) marked(t *testing.T, name string) bool {
	return localMarked(t, filepath.Join(e.dir, name))
}

func (e *sshdResume) write(t *testing.T, name string, data []byte) {
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, name), data, 0o644))
}

func (e *sshdResume) child(t *testing.T, cfg *childConfig) ([]*os.File, bool) {
	cfg.SSHAddr, cfg.SSHUser, cfg.SSHKeyFile = e.sshd.Addr, e.sshd.User, e.sshd.KeyFile
	cfg.SSHHostKey = string(ssh.MarshalAuthorizedKey(e.sshd.HostKey))
	return nil, true
}

// realServerPlan is a plan for a real server: no in-process faults.
func realServerPlan(seed uint64) resumePlan {
	plan := newResumePlan(seed, []stopHow{stopCtx, stopClose, stopKill, stopProcess})
	plan.reorder, plan.hold, plan.latency = 0, 0, 0
	return plan
}

func TestModelResumeSFTPServer(t *testing.T) {
	var tally resumeTally
	for _, seed := range modelSeeds(t, fixedSeeds(24)) {
		plan := realServerPlan(seed)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			resumeModel(t, newPipeResume(t), plan, &tally)
		})
	}
	t.Log(tally.String())
}

func TestModelResumeSSHD(t *testing.T) {
	// A plain account, as an SFTP user of a server is: a developer's shell start-up
	// (root's) would be paid on every session of every run.
	s := sshdtest.NewSSHD(t, benchSSHDOptions(sshdtest.SSHDOptions{MaxSessions: 64}))
	root := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(root), 0o711))
	var tally resumeTally
	for _, seed := range modelSeeds(t, fixedSeeds(12)) {
		plan := realServerPlan(seed)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			dir := filepath.Join(root, fmt.Sprintf("seed-%d", seed))
			require.NoError(t, os.Mkdir(dir, 0o777))
			require.NoError(t, os.Chmod(dir, 0o777))
			resumeModel(t, &sshdResume{sshd: s, dir: dir}, plan, &tally)
		})
	}
	t.Log(tally.String())
}
