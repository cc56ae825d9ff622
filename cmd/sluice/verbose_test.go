package main

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// Issue 21: a connection that cannot be made says why, as OpenSSH says it, before
// anything about keys: with no key and no terminal, a refused port is still "Connection
// refused".
func TestConnectErrorsShowTheirCause(t *testing.T) {
	isolateEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nothing listens there now
	r := runCLI(t, "-P", strconv.Itoa(port), "ls", "127.0.0.1:/")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: connect to host 127.0.0.1 port "+strconv.Itoa(port)+": Connection refused\n", r.stderr)

	// A name that does not resolve (not looked up here: tests send nothing off the
	// machine).
	hc := &hostConfig{hostName: "nosuch.example", port: 22}
	err = connectError(hc, false, "nosuch.example:22", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nosuch.example"}})
	require.EqualError(t, err, "Could not resolve hostname nosuch.example: no such host")
	err = connectError(hc, false, "nosuch.example:22", &net.OpError{Op: "dial", Err: syscall.EHOSTUNREACH})
	require.EqualError(t, err, "connect to host nosuch.example port 22: No route to host")
	require.ErrorIs(t, err, syscall.EHOSTUNREACH)
	err = connectError(hc, true, "nosuch.example:22", errors.New("administratively prohibited"))
	require.EqualError(t, err, "connecting to nosuch.example:22: administratively prohibited", "a jump host's words are its own")
}

// -v says what was dialled, which logins were tried and which worked, the server's
// version, its SFTP extensions and limits, and the connections used.
func TestVerbose(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	r := runCLI(t, append(sshArgs(s, s.KnownHostsFile), "-v", "ls", remoteOn(s, dir))...)
	requireOK(t, r)
	for _, want := range []string{
		"sluice: connecting to 127.0.0.1:" + strconv.Itoa(s.Port) + " by TCP\n",
		"sluice: auth: trying publickey: offering 1 key(s)\n",
		"(SSH-2.0-OpenSSH_",
		"; logged in as " + s.User + " with publickey\n",
		"sluice: SFTP with 127.0.0.1: extensions: ",
		"statvfs@openssh.com",
		"sluice: limits: packet ",
		"sluice: SSH connections used: 1",
	} {
		require.Contains(t, r.stderr, want)
	}
	r = runCLI(t, append(sshArgs(s, s.KnownHostsFile), "ls", remoteOn(s, dir))...)
	requireOK(t, r)
	require.Empty(t, r.stderr, "quiet without -v")
}
