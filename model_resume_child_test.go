package sftp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// The process that runs a transfer, killed: the stop nothing in the library can clean
// up after. runChild runs one transfer of the model in a child process, the test
// binary itself run again for TestResumeChild alone, and SIGKILLs it once the
// transfer has moved the plan's bytes: with requests in flight on every lane, pieces
// being written, and the part file as it is. The child is the test binary rather than
// a helper program the test builds: it needs no build step (which costs seconds of CPU
// on a loaded machine), it is built with -race when the tests are, and it runs the
// very code under test, test options included (withSpan, withStripeFrom).
//
// The child says where it is on its standard output, one line each: "start N" (the
// bytes it began from: where a resumed transfer continues), "stop" (it has moved the
// plan's bytes and waits, inside its progress callback, to be killed; it exits if its
// standard input closes, so a parent that died leaves no child behind), "done ERR"
// (the transfer ended before the stop: ERR is "<nil>" or its error).

// childEnv carries a child's childConfig, in JSON.
const childEnv = "SLUICE_RESUME_CHILD"

// childConfig is the transfer a child runs, and how it reaches the server: pipes to
// sftp-servers the parent started, passed as inherited files 3, 4, ... (a read and a
// write end per server: the first for the Client, the rest for its WithPipeOpener),
// or an SSH server.
type childConfig struct {
	Up     bool
	Local  string // the source of a Put, the destination of a Get
	Remote string
	Resume bool
	StopAt int64

	Chunk, Inflight, Lanes int
	Span                   int64

	Pipes                        int
	SSHAddr, SSHUser, SSHKeyFile string
	SSHHostKey                   string // authorized_keys format
}

// TestResumeChild is the child process of runChild; run any other way it skips.
func TestResumeChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("the child process of the model tests' process kills (runChild); runs only as that")
	}
	var cfg childConfig
	require.NoError(t, json.Unmarshal([]byte(env), &cfg))
	c := cfg.client(t)
	defer c.Close()
	var once sync.Once
	reported := false
	progress := OnProgress(func(p Progress) {
		if !reported {
			reported = true
			fmt.Printf("start %d\n", p.Bytes)
		}
		if p.Bytes >= cfg.StopAt && !p.Done && p.Err == nil {
			once.Do(func() {
				fmt.Println("stop")
				io.Copy(io.Discard, os.Stdin) // until killed, or the parent is gone
				os.Exit(3)
			})
		}
	})
	opts := []TransferOption{progress}
	if cfg.Resume {
		opts = append(opts, Resume())
	}
	var err error
	if cfg.Up {
		err = c.Put(testCtx(t), cfg.Local, cfg.Remote, opts...)
	} else {
		err = c.Get(testCtx(t), cfg.Remote, cfg.Local, opts...)
	}
	fmt.Printf("done %v\n", err)
}

// client connects as cfg says, with the plan's options.
func (cfg *childConfig) client(t *testing.T) *Client {
	plan := resumePlan{chunk: cfg.Chunk, inflight: cfg.Inflight, lanes: cfg.Lanes, span: cfg.Span}
	opts := plan.clientOpts()
	if cfg.SSHAddr != "" {
		key, err := os.ReadFile(cfg.SSHKeyFile)
		require.NoError(t, err)
		signer, err := ssh.ParsePrivateKey(key)
		require.NoError(t, err)
		host, _, _, _, err := ssh.ParseAuthorizedKey([]byte(cfg.SSHHostKey))
		require.NoError(t, err)
		sc, err := ssh.Dial("tcp", cfg.SSHAddr, &ssh.ClientConfig{
			User: cfg.SSHUser, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.FixedHostKey(host),
		})
		require.NoError(t, err)
		c, err := NewClient(testCtx(t), sc, opts...)
		require.NoError(t, err)
		pinLanes(c, cfg.Lanes)
		return c
	}
	var mu sync.Mutex
	next := 1
	open := func(context.Context) (io.Reader, io.WriteCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		if next >= cfg.Pipes {
			return nil, nil, errors.New("no more servers")
		}
		next++
		return childPipe(next - 1)
	}
	r, w, err := childPipe(0)
	require.NoError(t, err)
	c, err := NewClientPipe(testCtx(t), r, w, append(opts, WithPipeOpener(open))...)
	require.NoError(t, err)
	pinLanes(c, cfg.Lanes)
	return c
}

// childPipe is the i-th pipe pair a child inherited.
func childPipe(i int) (io.Reader, io.WriteCloser, error) {
	return os.NewFile(uintptr(3+2*i), "server-out"), os.NewFile(uintptr(4+2*i), "server-in"), nil
}

// runChild runs one transfer of plan in a child process, resuming if resume says, and
// SIGKILLs it at st.at bytes. It returns where the transfer started and, when it
// ended before the stop, its outcome (a nil error for a transfer that finished).
func runChild(t *testing.T, srv resumeServer, plan resumePlan, rt resumeRun, st resumeStop, resume bool) (first int64, err error) {
	cfg := childConfig{
		Resume: resume, StopAt: st.at,
		Chunk: plan.chunk, Inflight: plan.inflight, Lanes: plan.lanes, Span: plan.span,
	}
	rt.describe(&cfg)
	files, ok := srv.child(t, &cfg)
	require.True(t, ok, "this server cannot serve a child process")
	env, jerr := json.Marshal(cfg)
	require.NoError(t, jerr)
	cmd := exec.Command(os.Args[0], "-test.run=^TestResumeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(env))
	cmd.ExtraFiles = files
	stdin, perr := cmd.StdinPipe()
	require.NoError(t, perr)
	defer stdin.Close()
	stdout, perr := cmd.StdoutPipe()
	require.NoError(t, perr)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	for _, f := range files {
		f.Close() // the child's now: it alone holds these ends
	}
	first, outcome, stopped := childLines(t, stdout)
	if stopped {
		require.NoError(t, cmd.Process.Kill())
	}
	werr := waitExit(cmd)
	srv.settle(t)
	switch {
	case stopped:
		return first, errors.New("the process was killed")
	case outcome == nil:
		t.Fatalf("the child ended without a word (%v); stderr:\n%s", werr, stderr.String())
	case *outcome != "<nil>":
		return first, errors.New(*outcome)
	}
	require.NoError(t, werr, "stderr:\n%s", stderr.String())
	return first, nil
}

// childLines reads what the child says until it stops or is done.
func childLines(t *testing.T, stdout io.Reader) (first int64, outcome *string, stopped bool) {
	first = -1
	sc := bufio.NewScanner(stdout)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "start "):
				first, _ = strconv.ParseInt(strings.TrimPrefix(line, "start "), 10, 64)
			case line == "stop":
				stopped = true
				return
			case strings.HasPrefix(line, "done "):
				s := strings.TrimPrefix(line, "done ")
				outcome = &s
			}
		}
	}()
	tsRecv(t, tsGo(func() struct{} { <-done; return struct{}{} }), "the child process")
	return first, outcome, stopped
}

// waitExit waits for cmd, which is ending, bounded by testTimeout.
func waitExit(cmd *exec.Cmd) error {
	res := make(chan error, 1)
	go func() { res <- cmd.Wait() }()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	select {
	case err := <-res:
		return err
	case <-timer.C:
		cmd.Process.Kill()
		return <-res
	}
}
