package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// prompter asks the user questions on the controlling terminal, as ssh does: a
// password or passphrase never comes from argv, the environment or stdin (which may
// carry data), and is read with echo off.
type prompter struct {
	mu    sync.Mutex
	tty   *os.File // nil: no terminal, or BatchMode
	pause func(waiting bool)
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
	if err != nil || !term.IsTerminal(int(tty.Fd())) {
		if tty != nil {
			tty.Close()
		}
		return &prompter{}
	}
	return &prompter{tty: tty}
}

func (p *prompter) usable() bool { return p != nil && p.tty != nil }

// secret shows prompt and reads a line without echo.
func (p *prompter) secret(prompt string) (string, error) {
	if !p.usable() {
		return "", errNoTerminal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting(true)
	defer p.waiting(false)
	b, err := readSecret(p.tty, escapeText(prompt))
	fmt.Fprintln(p.tty)
	if err != nil {
		return "", fmt.Errorf("reading from the terminal: %w", err)
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
	fmt.Fprint(p.tty, escapeText(prompt))
	p.waiting(true)
	defer p.waiting(false)
	s, err := bufio.NewReader(p.tty).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading from the terminal: %w", err)
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
