package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// testPTY is a pseudo-terminal for driving prompts: the slave side is the prompter's
// terminal, the test reads what was shown and types answers on the master side.
//
// It is opened with golang.org/x/sys/unix (already in the module graph through
// x/term) rather than a pty library: /dev/ptmx, unlock, and the slave's number are
// three calls, and the test needs nothing else.
type testPTY struct {
	master, slave *os.File

	mu      sync.Mutex
	shown   bytes.Buffer
	changed chan struct{} // closed and replaced whenever shown grows
	done    chan struct{} // the reader has stopped
}

func newTestPTY(t *testing.T) *testPTY {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	p := &testPTY{master: m, slave: s, changed: make(chan struct{}), done: make(chan struct{})}
	go p.read()
	t.Cleanup(p.close)
	return p
}

func (p *testPTY) read() {
	defer close(p.done)
	buf := make([]byte, 4096)
	for {
		n, err := p.master.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.shown.Write(buf[:n])
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// waitFor blocks until the terminal has shown want after the first skip bytes, and
// returns the offset just past it.
func (p *testPTY) waitFor(ctx context.Context, t *testing.T, want string, skip int) int {
	t.Helper()
	for {
		p.mu.Lock()
		s, ch := p.shown.String(), p.changed
		p.mu.Unlock()
		if i := strings.Index(s[min(skip, len(s)):], want); i >= 0 {
			return skip + i + len(want)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("the terminal never showed %q; it showed %q", want, s)
		}
	}
}

func (p *testPTY) shownText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown.String()
}

// typeLine types s and Enter.
func (p *testPTY) typeLine(t *testing.T, s string) {
	t.Helper()
	_, err := p.master.Write([]byte(s + "\r"))
	require.NoError(t, err)
}

func (p *testPTY) close() {
	p.slave.Close()
	p.master.Close()
	<-p.done
}

func (p *testPTY) prompter() *prompter { return &prompter{tty: p.slave} }
