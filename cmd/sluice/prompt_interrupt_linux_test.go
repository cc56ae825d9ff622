package main

import (
	"bytes"
	"context"
	"strconv"
	"syscall"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// slaveEchoes reports whether the pty's terminal side has echo on.
func slaveEchoes(t *testing.T, p *testPTY) bool {
	t.Helper()
	rc, err := p.slave.SyscallConn()
	require.NoError(t, err)
	var tio *unix.Termios
	require.NoError(t, rc.Control(func(fd uintptr) { tio, err = unix.IoctlGetTermios(int(fd), ioctlReadTermios) }))
	require.NoError(t, err)
	return tio.Lflag&unix.ECHO != 0
}

// TestPromptInterrupt: Ctrl-C at a password or yes/no prompt ends the question at
// once, without waiting for Enter, and the terminal's echo is back on. On a real
// terminal ^C raises SIGINT, which cancels the run's context; the pty here is not
// the test's controlling terminal, so the test types ^C and cancels, as the signal
// handler would.
func TestPromptInterrupt(t *testing.T) {
	for _, ask := range []struct {
		name string
		ask  func(p *prompter) (string, error)
	}{
		{"secret", func(p *prompter) (string, error) { return p.secret("Password: ") }},
		{"line", func(p *prompter) (string, error) { return p.line("Password: ") }},
	} {
		t.Run(ask.name, func(t *testing.T) {
			tp := newTestPTY(t)
			pr := tp.prompter()
			wctx, wcancel := context.WithTimeout(context.Background(), testTimeout)
			defer wcancel()
			ctx, cancel := context.WithCancel(context.Background())
			stop := context.AfterFunc(ctx, pr.interrupt)
			defer stop()
			type answer struct {
				s   string
				err error
			}
			done := make(chan answer, 1)
			go func() { s, err := ask.ask(pr); done <- answer{s, err} }()
			tp.waitFor(wctx, t, "Password: ", 0)
			_, err := tp.master.Write([]byte("half\x03"))
			require.NoError(t, err)
			cancel()
			select {
			case a := <-done:
				require.ErrorIs(t, a.err, errInterrupted)
				require.Empty(t, a.s)
			case <-wctx.Done():
				t.Fatal("the prompt still waits for Enter after Ctrl-C")
			}
			require.True(t, slaveEchoes(t, tp), "echo restored")
			_, err = pr.secret("again: ")
			require.ErrorIs(t, err, errInterrupted, "no question after an interrupt")
		})
	}
}

// TestHostKeyPromptInterruptExits130: the whole command, stopped at the host key
// question by Ctrl-C, exits 130 without an answer.
func TestHostKeyPromptInterruptExits130(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	tp := newTestPTY(t)
	wctx, wcancel := context.WithTimeout(context.Background(), testTimeout)
	defer wcancel()
	ctx, cancel := context.WithCancelCause(wctx)
	defer cancel(nil)
	var out bytes.Buffer
	var errb lockedBuffer
	a := newApp(&out, &errb)
	a.testPrompt = tp.prompter()
	code := make(chan int, 1)
	go func() {
		code <- a.run(ctx, []string{"-i", s.KeyFile, "-P", strconv.Itoa(s.Port), "-o", "UserKnownHostsFile=" + t.TempDir() + "/kh",
			"ls", s.User + "@127.0.0.1:/"})
	}()
	tp.waitFor(wctx, t, "(yes/no/[fingerprint])? ", 0)
	_, err := tp.master.Write([]byte("\x03"))
	require.NoError(t, err)
	cancel(signalError{syscall.SIGINT})
	select {
	case c := <-code:
		require.Equal(t, 130, c, errb.String())
		require.Contains(t, errb.String(), "sluice: interrupted")
	case <-wctx.Done():
		t.Fatal("the host key prompt still waits for Enter after Ctrl-C")
	}
}
