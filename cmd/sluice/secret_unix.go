//go:build aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris || zos

package main

import (
	"cmp"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readSecret turns the terminal's echo off, then shows prompt and reads a line. The
// order matters, and is readpassphrase(3)'s: x/term's ReadPassword turns echo off only
// once called, after the prompt is out, so a password typed ahead in that moment (or
// by a program driving the terminal) would be echoed.
//
// The descriptor is used through SyscallConn, never os.File.Fd, which would make the
// file blocking and so deaf to the read deadline that prompter.interrupt sets; the
// saved settings are put back however the read ends, an interrupt included.
func readSecret(tty *os.File, prompt string) ([]byte, error) {
	rc, err := tty.SyscallConn()
	if err != nil {
		return nil, err
	}
	var old *unix.Termios
	cerr := rc.Control(func(fd uintptr) {
		old, err = unix.IoctlGetTermios(int(fd), ioctlReadTermios)
		if err != nil {
			return
		}
		quiet := *old
		quiet.Lflag &^= unix.ECHO
		quiet.Lflag |= unix.ICANON | unix.ISIG
		quiet.Iflag |= unix.ICRNL
		err = unix.IoctlSetTermios(int(fd), ioctlWriteTermios, &quiet)
	})
	if err = cmp.Or(cerr, err); err != nil {
		return nil, err
	}
	defer rc.Control(func(fd uintptr) { _ = unix.IoctlSetTermios(int(fd), ioctlWriteTermios, old) })
	if _, err := io.WriteString(tty, prompt); err != nil {
		return nil, err
	}
	return readLine(tty)
}

// readLine reads up to a newline, a byte at a time so that nothing after it is taken.
// The line discipline is canonical, so this costs one read per line anyway.
func readLine(r io.Reader) ([]byte, error) {
	var line []byte
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n == 1 {
			switch b[0] {
			case '\n':
				return line, nil
			case '\r':
				continue
			}
			line = append(line, b[0])
			if len(line) > 4096 {
				return nil, errors.New("input line too long")
			}
		}
		if err == io.EOF && len(line) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
