//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris || zos)

package main

import (
	"fmt"
	"os"

	"golang.org/x/term"
)

// readSecret shows prompt and reads a line without echo where there are no termios.
func readSecret(tty *os.File, prompt string) ([]byte, error) {
	fmt.Fprint(tty, prompt)
	return term.ReadPassword(int(tty.Fd()))
}
