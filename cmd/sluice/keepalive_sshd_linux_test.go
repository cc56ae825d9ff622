package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// The keepalive is on by default (10 s x 3), as ServerAliveInterval and
// ServerAliveCountMax set it, from ssh_config or -o; ServerAliveInterval 0 turns it
// off.
func TestKeepaliveSettings(t *testing.T) {
	isolateEnv(t)
	for _, tc := range []struct {
		config   string
		opts     []string
		interval time.Duration
		count    int
	}{
		{"", nil, defaultAliveInterval, 3},
		{"Host box\n  ServerAliveInterval 5\n  ServerAliveCountMax 2\n", nil, 5 * time.Second, 2},
		{"Host box\n  ServerAliveInterval 5\n", []string{"ServerAliveInterval=0"}, 0, 3},
		{"", []string{"ServerAliveCountMax=7"}, defaultAliveInterval, 7},
	} {
		a := appWithConfig(t, tc.config, tc.opts...)
		hc, err := a.resolveHost(remote{Host: "box", Path: "."}, false)
		require.NoError(t, err)
		require.Equal(t, tc.interval, hc.aliveInterval, "%q %v", tc.config, tc.opts)
		require.Equal(t, tc.count, hc.aliveCountMax, "%q %v", tc.config, tc.opts)
	}
}

// silentProxy puts a fault proxy in front of addr with plan, and returns it and the
// flags that reach s through it.
func silentProxy(t *testing.T, s *sshdtest.SSHD, addr string, plan faultproxy.Plan) (*faultproxy.Proxy, []string) {
	t.Helper()
	p, err := faultproxy.New(addr, faultproxy.WithPlan(plan))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	port, err := strconv.Atoi(p.Addr()[strings.LastIndexByte(p.Addr(), ':')+1:])
	require.NoError(t, err)
	return p, faultArgs(t, s, p.Addr(), port)
}

// A connection that goes silent mid-transfer (a black hole: no FIN, no reset) is
// given up by the keepalive, and --retries reconnects and continues from the part
// file: byte-identical both ways. The keepalive is made short with -o, as a user
// would; its default is the same mechanism, 10 s x 3.
func TestSSHRetriesAfterSilentConnection(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	const size = 24<<20 + 321
	src, data := randomFile(t, dir, "src.bin", size)
	alive := []string{"-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2"}
	silentAt4MiB := faultproxy.OnlyFirst(1, faultproxy.Step{After: 4 << 20, Fault: faultproxy.BlackHole})

	remote := filepath.Join(dir, "up.bin")
	p, args := silentProxy(t, s, s.Addr, silentAt4MiB)
	args = append(args, alive...)
	r := runApp(t, noPause, append(args, "put", "--retries", "2", src, s.User+"@127.0.0.1:"+remote)...)
	requireOK(t, r)
	require.Equal(t, 1, p.Faults(), "the connection did not go silent")
	require.Contains(t, r.stderr, "the server stopped answering")
	require.Regexp(t, `; retrying.* \(retry 1 of 2\)`, r.stderr)
	got, err := os.ReadFile(remote)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the upload is not byte-identical")

	back := filepath.Join(dir, "back.bin")
	p, args = silentProxy(t, s, s.Addr, silentAt4MiB)
	args = append(args, alive...)
	r = runApp(t, noPause, append(args, "get", "--retries", "2", s.User+"@127.0.0.1:"+remote, back)...)
	requireOK(t, r)
	require.Equal(t, 1, p.Faults(), "the connection did not go silent")
	require.Contains(t, r.stderr, "the server stopped answering")
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the download is not byte-identical")
}

// A lane whose connection goes silent costs the transfer only the keepalive's
// detection: its work goes to the other lanes, and the command succeeds without a
// retry. The server allows one session per connection, so every lane beside the
// main channel is a connection sluice dialled (the file itself opens on the main
// channel: it is the first, see the library's filechannel.go); the first two dialled
// go silent once 300 KiB have crossed them (a login and one READ's reply), the second
// only if a lane of the transfer was on it.
// The link is long (50 ms), so that the transfer asks for many lanes and they join
// long before it ends.
func TestSilentLaneIsDropped(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 1})
	long, err := delayproxy.New(s.Addr, 25*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { long.Close() })
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", 64<<20+9)
	lane := func(n int) faultproxy.Step {
		if n == 1 || n == 2 {
			return faultproxy.Step{After: 300 << 10, Fault: faultproxy.BlackHole}
		}
		return faultproxy.Step{}
	}
	p, args := silentProxy(t, s, long.Addr(), lane)
	args = append(args, "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2")
	back := filepath.Join(dir, "back.bin")
	r := runCLI(t, append(args, "get", s.User+"@127.0.0.1:"+src, back)...)
	requireOK(t, r)
	require.Positive(t, p.Faults(), "no lane went silent")
	require.NotContains(t, r.stderr, "retrying")
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the download is not byte-identical")
}
