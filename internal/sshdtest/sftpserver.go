package sshdtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// StartSFTPServerCmd runs `sftp-server -e -d dir args...` as the calling user with its
// stdin and stdout as pipes: r reads the server's replies, w carries requests. stderr
// (the server's log, -e) goes to stderr, which may be nil. The server exits when w is
// closed; the caller then calls cmd.Wait, which also closes r. For benchmarks and other
// code without a testing.TB.
func StartSFTPServerCmd(dir string, stderr io.Writer, args ...string) (cmd *exec.Cmd, r io.ReadCloser, w io.WriteCloser, err error) {
	path := SFTPServerPath()
	if path == "" {
		return nil, nil, nil, fmt.Errorf("%w: sftp-server is missing (apt-get install openssh-sftp-server)", ErrUnavailable)
	}
	cmd = exec.Command(path, append([]string{"-e", "-d", dir}, args...)...)
	cmd.Stderr = stderr
	if w, err = cmd.StdinPipe(); err != nil {
		return nil, nil, nil, fmt.Errorf("sshdtest: %w", err)
	}
	if r, err = cmd.StdoutPipe(); err != nil {
		_ = w.Close()
		return nil, nil, nil, fmt.Errorf("sshdtest: %w", err)
	}
	if err = cmd.Start(); err != nil {
		_ = w.Close()
		return nil, nil, nil, fmt.Errorf("sshdtest: starting sftp-server: %w", err)
	}
	return cmd, r, w, nil
}

// StartSFTPServer runs sftp-server over pipes for a test (see StartSFTPServerCmd) and
// skips the test when sftp-server is not installed. Cleanup closes w, waits for the
// server to exit (killing it after 10s) and shows its stderr if the test failed.
// Extra args are passed through, e.g. "-R" for read-only or "-l", "DEBUG3".
func StartSFTPServer(tb testing.TB, dir string, args ...string) (r io.ReadCloser, w io.WriteCloser) {
	tb.Helper()
	stderr := &syncBuffer{}
	cmd, r, w, err := StartSFTPServerCmd(dir, stderr, args...)
	if errors.Is(err, ErrUnavailable) {
		tb.Skipf("sshdtest: skipping: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = w.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var werr error
		select {
		case werr = <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			werr = fmt.Errorf("killed after 10s: %w", <-done)
		}
		// A non-zero exit is not a failure by itself: tests provoke it on purpose (an
		// oversized packet makes sftp-server exit with code 11).
		if tb.Failed() {
			tb.Logf("sftp-server exit: %v; stderr:\n%s", werr, stderr.String())
		}
	})
	return r, w
}

// syncBuffer is a bytes.Buffer safe for the exec copying goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
