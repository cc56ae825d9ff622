package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// prompter asks the user questions on the controlling terminal, as ssh does: a
// password or passphrase never comes from argv, the environment or stdin (which may
// carry data), and is read with echo off.
//
// A question ends when the run is interrupted (interrupt, on Ctrl-C), not only at
// Enter: the terminal was opened with os.OpenFile, so the runtime polls it and a read
// deadline unblocks a read in progress. Its descriptor is reached only through
// SyscallConn, since os.File.Fd would put it back into blocking mode, where deadlines
// stop working.
type prompter struct {
	mu    sync.Mutex
	tty   *os.File // nil: no terminal, or BatchMode
	pause func(waiting bool)

	initOnce sync.Once
	stopOnce sync.Once
	stopped  chan struct{} // closed by interrupt; made on first use (stopChan)
}

// setPause installs fn, told when a question starts and ends waiting for the user, so
// that a connection timeout does not count the time a person takes to type.
func (p *prompter) setPause(fn func(bool)) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.pause = fn
	p.mu.Unlock()
}

func (p *prompter) waiting(w bool) {
	if p.pause != nil {
		p.pause(w)
	}
}

var errNoTerminal = errors.New("no terminal to ask on")

// newPrompter opens /dev/tty unless batch is set. Without a terminal every question
// fails with errNoTerminal, and the caller falls back or explains.
func newPrompter(batch bool) *prompter {
	if batch {
		return &prompter{}
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil || !isTerminal(tty) {
		if tty != nil {
			tty.Close()
		}
		return &prompter{}
	}
	return &prompter{tty: tty}
}

func (p *prompter) usable() bool { return p != nil && p.tty != nil }

// errInterrupted is what a question returns after interrupt.
var errInterrupted = errors.New("interrupted at the prompt")

// interrupt ends the question being asked, and any later one, with errInterrupted.
// readSecret restores the terminal's echo on its way out.
func (p *prompter) interrupt() {
	if !p.usable() {
		return
	}
	p.stopOnce.Do(func() {
		close(p.stopChan())
		// A deadline in the past wakes a blocked Read at once. Where the terminal
		// cannot be polled (ErrNoDeadline), the read ends at the next Enter, as before.
		_ = p.tty.SetReadDeadline(time.Unix(1, 0))
	})
}

func (p *prompter) stopChan() chan struct{} {
	p.initOnce.Do(func() { p.stopped = make(chan struct{}) })
	return p.stopped
}

// readErr says why reading the answer failed: errInterrupted when interrupt ended it.
func (p *prompter) readErr(err error) error {
	select {
	case <-p.stopChan():
		return errInterrupted
	default:
	}
	return fmt.Errorf("reading from the terminal: %w", err)
}

// isInterrupted reports whether interrupt has been called.
func (p *prompter) isInterrupted() bool {
	select {
	case <-p.stopChan():
		return true
	default:
		return false
	}
}

// secret shows prompt and reads a line without echo.
func (p *prompter) secret(prompt string) (string, error) {
	if !p.usable() {
		return "", errNoTerminal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isInterrupted() {
		return "", errInterrupted
	}
	p.waiting(true)
	defer p.waiting(false)
	b, err := readSecret(p.tty, escapeText(prompt))
	fmt.Fprintln(p.tty)
	if err != nil {
		return "", p.readErr(err)
	}
	return string(b), nil
}

// line shows prompt and reads a line with echo, for questions whose answer is not
// secret (yes/no, a keyboard-interactive prompt that asks for echo).
func (p *prompter) line(prompt string) (string, error) {
	if !p.usable() {
		return "", errNoTerminal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isInterrupted() {
		return "", errInterrupted
	}
	fmt.Fprint(p.tty, escapeText(prompt))
	p.waiting(true)
	defer p.waiting(false)
	s, err := bufio.NewReader(p.tty).ReadString('\n')
	if err != nil {
		fmt.Fprintln(p.tty)
		return "", p.readErr(err)
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// say writes a message for the user to the terminal.
func (p *prompter) say(msg string) {
	if p.usable() {
		p.mu.Lock()
		defer p.mu.Unlock()
		fmt.Fprint(p.tty, escapeLines(msg))
	}
}

func (p *prompter) close() {
	if p.usable() {
		p.tty.Close()
	}
}

// isTerminal is term.IsTerminal without os.File.Fd (see prompter).
func isTerminal(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	is := false
	if err := rc.Control(func(fd uintptr) { is = term.IsTerminal(int(fd)) }); err != nil {
		return false
	}
	return is
}
