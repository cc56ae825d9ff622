// Package sshdtest starts real OpenSSH servers for tests and benchmarks: a private sshd on
// loopback (key login only, its own host key and config in a temporary directory) and
// sftp-server as a subprocess over pipes.
//
// Everything here stays on 127.0.0.1. Helpers that take a testing.TB skip the test, with
// the reason, when the OpenSSH binaries are missing or sshd cannot run (it needs root for
// privilege separation), so a test suite stays green on machines without OpenSSH.
package sshdtest

import (
	"errors"
	"fmt"
	"os"
)

// SSHDPath is where Debian installs sshd. sshd must be started by its absolute path: it
// re-executes itself for every connection and refuses a relative argv[0].
const SSHDPath = "/usr/sbin/sshd"

// CipherAES128GCM is the cipher the benchmarks fix for every client, so that all of them
// pay the same price for crypto.
const CipherAES128GCM = "aes128-gcm@openssh.com"

// ErrUnavailable is wrapped by the errors that mean "this machine cannot run the server"
// (binary missing, not root), as opposed to a server that was there and failed.
var ErrUnavailable = errors.New("sshdtest: OpenSSH server not available")

// sftpServerCandidates lists where distributions put OpenSSH's sftp-server: Debian first
// (the project's machines), then Fedora/Arch and a couple of BSD-style layouts.
var sftpServerCandidates = []string{
	"/usr/lib/openssh/sftp-server",
	"/usr/libexec/openssh/sftp-server",
	"/usr/libexec/sftp-server",
	"/usr/lib/ssh/sftp-server",
}

// SFTPServerPath returns the path of OpenSSH's sftp-server binary, or "" when none of the
// usual locations holds an executable one.
func SFTPServerPath() string {
	for _, p := range sftpServerCandidates {
		if isExecutable(p) {
			return p
		}
	}
	return ""
}

// Available reports whether sftp-server can be run as a subprocess (Command).
func Available() bool { return SFTPServerPath() != "" }

// SSHDUsable returns nil when StartSSHD can work on this machine, or an error wrapping
// ErrUnavailable that says why not.
func SSHDUsable() error {
	if !isExecutable(SSHDPath) {
		return fmt.Errorf("%w: %s is missing (apt-get install openssh-server)", ErrUnavailable, SSHDPath)
	}
	if SFTPServerPath() == "" {
		return fmt.Errorf("%w: sftp-server is missing (apt-get install openssh-sftp-server)", ErrUnavailable)
	}
	// sshd's privilege separation needs root; an unprivileged sshd could only log in as
	// its own user and behaves differently enough that we would not be testing OpenSSH
	// as deployed.
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: sshd must run as root (euid %d)", ErrUnavailable, os.Geteuid())
	}
	return nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
