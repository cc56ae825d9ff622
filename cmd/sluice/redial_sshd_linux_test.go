package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// stripeSize is past the 8 MiB from which a transfer of known size stripes.
const stripeSize = 12<<20 + 5

// redialUser is the account of the tests that change its password while they run: not
// passwordUser, whose tests may be running in another test process on the machine.
const redialUser = "sluiceredial"

// longLink puts a delay proxy in front of s and returns its port and a known_hosts
// file naming s's key at the proxy's address. The proxy's delay is a floor under the
// round trip the library measures at INIT: past the 2 ms where it stripes and opens
// data channels, however fast or busy the machine.
func longLink(t *testing.T, s *sshdtest.SSHD) (int, string) {
	t.Helper()
	p, err := delayproxy.New(s.Addr, 2*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	port, err := strconv.Atoi(p.Addr()[strings.LastIndexByte(p.Addr(), ':')+1:])
	require.NoError(t, err)
	return port, knownHostsFile(t, knownhosts.Line([]string{p.Addr()}, s.HostKey))
}

// redials records a run's tries at extra connections (app.testRedial).
type redials struct {
	first chan struct{} // closed when the first try is over
	once  sync.Once

	mu       sync.Mutex
	ok, fail int
	errs     []error
}

func newRedials() *redials { return &redials{first: make(chan struct{})} }

func (r *redials) outcome(err error) {
	r.mu.Lock()
	if err == nil {
		r.ok++
	} else {
		r.fail++
		r.errs = append(r.errs, err)
	}
	r.mu.Unlock()
	r.once.Do(func() { close(r.first) })
}

func (r *redials) counts() (ok, fail int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, r.fail
}

// hook sets the app's test hooks: tries are recorded, and the transfer is held at
// its first data until the first try is over. The file's open has asked for a data
// channel by then (on a long link files go on data channels), so with MaxSessions 1
// a try is under way, and the transfer cannot end before it is over, whatever the
// machine's speed.
func (r *redials) hook(t *testing.T) func(a *app) {
	var held atomic.Bool
	return func(a *app) {
		a.testRedial = r.outcome
		a.testProgress = func(p sftp.Progress) {
			if p.Bytes == 0 || held.Swap(true) {
				return
			}
			select {
			case <-r.first:
			case <-time.After(testTimeout):
				t.Error("no extra connection was tried")
			}
		}
	}
}

// A server that allows one session per connection: the CLI stripes a large file
// over connections it dials itself, both ways; -connections bounds them.
func TestStripeOverDialledConnections(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 1})
	port, kh := longLink(t, s)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", stripeSize)
	target := s.User + "@127.0.0.1:"
	base := []string{"-i", s.KeyFile, "-known-hosts", kh, "-P", strconv.Itoa(port)}
	logins := func() int { return strings.Count(s.Log(), "Accepted publickey for "+s.User) }

	dl := newRedials()
	back := filepath.Join(dir, "back.bin")
	r := runApp(t, dl.hook(t), append(base, "get", "-q", target+src, back)...)
	requireOK(t, r)
	require.Empty(t, r.stderr)
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)
	ok, _ := dl.counts()
	require.GreaterOrEqual(t, ok, 1, "no extra connection was made: %v", dl.errs)
	require.GreaterOrEqual(t, logins(), 1+ok, "each extra connection logged in")

	// -connections 2: the first and one more, whatever the lanes ask for.
	before := logins()
	up := newRedials()
	r = runApp(t, up.hook(t), append(base, "-connections", "2", "put", "-q", src, target+filepath.Join(dir, "up.bin"))...)
	requireOK(t, r)
	require.Empty(t, r.stderr)
	got, err = os.ReadFile(filepath.Join(dir, "up.bin"))
	require.NoError(t, err)
	require.Equal(t, data, got)
	ok, _ = up.counts()
	require.Equal(t, 1, ok)
	require.GreaterOrEqual(t, logins(), before+2)
}

// Through a jump host, the extra connections go over the jump host connection the
// first one made: the jump host is logged in to once.
func TestDialledConnectionsShareTheJumpHost(t *testing.T) {
	isolateEnv(t)
	target := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 1})
	jump := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	port, kh := longLink(t, target)
	khText, err := os.ReadFile(kh)
	require.NoError(t, err)
	sshDir := filepath.Join(os.Getenv("HOME"), ".ssh")
	require.NoError(t, os.MkdirAll(sshDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sshDir, "known_hosts"),
		append(khText, knownhosts.Line([]string{jump.Addr}, jump.HostKey)+"\n"...), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sshDir, "config"), []byte(
		fmt.Sprintf("Host box\n    HostName 127.0.0.1\n    Port %d\n    User %s\n    IdentityFile %s\n    ProxyJump hop\n", port, target.User, target.KeyFile)+
			hostBlock("hop", jump)), 0o600))
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", stripeSize)

	rd := newRedials()
	back := filepath.Join(dir, "back.bin")
	r := runApp(t, rd.hook(t), "get", "-q", "box:"+src, back)
	requireOK(t, r)
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)
	ok, _ := rd.counts()
	require.GreaterOrEqual(t, ok, 1, "no extra connection was made: %v", rd.errs)
	require.GreaterOrEqual(t, strings.Count(target.Log(), "Accepted publickey"), 1+ok)
	require.Equal(t, 1, strings.Count(jump.Log(), "Accepted publickey"), "the jump host was dialled again")
}

// With a password-only server the extra connections log in with the password typed
// for the first one: one prompt, however many connections. When that does not work
// (here the password changed meanwhile), the transfer goes on on the connection it
// has: still one prompt, no error, and one failed login on the server, not one per
// connection the Client asked for.
func TestDialledConnectionsNeverPrompt(t *testing.T) {
	isolateEnv(t)
	pw, home := needUser(t, redialUser)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 1, ExtraConfig: []string{"PasswordAuthentication yes"}})
	port, kh := longLink(t, s)
	dir := userTempDirOf(t, redialUser, home)
	src, data := randomFile(t, dir, "src.bin", stripeSize)
	prompt := redialUser + "@127.0.0.1's password: "
	args := []string{"-known-hosts", kh, "-P", strconv.Itoa(port), "get", "-q", redialUser + "@127.0.0.1:" + src}

	rd := newRedials()
	back := filepath.Join(t.TempDir(), "back.bin")
	r, shown := runWithTerminalHook(t, rd.hook(t), [][2]string{{prompt, pw}}, append(args, back)...)
	requireOK(t, r)
	require.Empty(t, r.stderr)
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Equal(t, 1, strings.Count(shown, prompt), "shown: %q", shown)
	ok, _ := rd.counts()
	require.GreaterOrEqual(t, ok, 1, "no extra connection was made: %v", rd.errs)
	require.GreaterOrEqual(t, strings.Count(s.Log(), "Accepted password for "+redialUser), 1+ok)
	require.NotContains(t, s.Log(), "Failed password")

	rd = newRedials()
	var logins atomic.Int32
	hook := func(a *app) {
		rd.hook(t)(a)
		a.testRedialLogin = func() {
			if logins.Add(1) == 1 {
				if _, err := sshdtest.EnsureUser(redialUser, pw+"-changed"); err != nil {
					t.Error(err) // not FailNow: this is the Client's goroutine
				}
			}
		}
	}
	back = filepath.Join(t.TempDir(), "back.bin")
	r, shown = runWithTerminalHook(t, hook, [][2]string{{prompt, pw}}, append(args, back)...)
	requireOK(t, r)
	require.Empty(t, r.stderr)
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.Equal(t, 1, strings.Count(shown, prompt), "shown: %q", shown)
	ok, fail := rd.counts()
	require.Zero(t, ok)
	require.GreaterOrEqual(t, fail, 1)
	require.Equal(t, int32(1), logins.Load(), "the replayed password was tried more than once")
}

// -D with an `ssh -s host sftp` command on a long link: the CLI starts the command
// again for more lanes, and reaps every process at the end (goleak sees the copiers
// of their stderr otherwise).
func TestServerCommandStartsMoreProcesses(t *testing.T) {
	isolateEnv(t)
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("OpenSSH's ssh is not installed")
	}
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	port, kh := longLink(t, s)
	D := fmt.Sprintf("%s -F none -o BatchMode=yes -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -i %s -p %d %s@127.0.0.1 -s sftp",
		sshBin, kh, s.KeyFile, port, s.User)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", stripeSize)

	for _, op := range []string{"get", "put"} {
		rd := newRedials()
		out := filepath.Join(dir, op+".bin")
		from, to := src, out
		r := runApp(t, rd.hook(t), "-D", D, op, "-q", from, to)
		requireOK(t, r)
		require.Empty(t, r.stderr)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Equal(t, data, got, op)
		ok, _ := rd.counts()
		require.GreaterOrEqual(t, ok, 1, "%s: no second process was started: %v", op, rd.errs)
	}

	// -connections 2: the first process and one more, whatever the lanes ask for.
	rd := newRedials()
	r := runApp(t, rd.hook(t), "-connections", "2", "-D", D, "get", "-q", src, filepath.Join(dir, "two.bin"))
	requireOK(t, r)
	ok, _ := rd.counts()
	require.Equal(t, 1, ok)
}

// An extra connection that meets another host key than the first one accepted is
// refused without a question, with a warning, and the transfer goes on on the first
// connection. Here a ProxyCommand reaches one server the first time and another
// after.
func TestDialledConnectionWithAnotherHostKey(t *testing.T) {
	isolateEnv(t)
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("OpenSSH's ssh is not installed")
	}
	first := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 1})
	other := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	jump := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	firstPort, _ := longLink(t, first)
	otherPort, _ := longLink(t, other)
	tmp := t.TempDir()
	jumpKH := knownHostsFile(t, knownhosts.Line([]string{jump.Addr}, jump.HostKey))
	script := filepath.Join(tmp, "proxy.sh")
	require.NoError(t, os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
if mkdir %s 2>/dev/null; then port=%d; else port=%d; fi
exec %s -F none -o BatchMode=yes -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -i %s -p %d %s@127.0.0.1 -W 127.0.0.1:$port
`, filepath.Join(tmp, "once"), firstPort, otherPort, sshBin, jumpKH, jump.KeyFile, jump.Port, jump.User)), 0o700))
	kh := knownHostsFile(t, knownhosts.Line([]string{"[127.0.0.1]:2222"}, first.HostKey))
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", stripeSize)

	rd := newRedials()
	back := filepath.Join(dir, "back.bin")
	r := runApp(t, rd.hook(t), "-i", first.KeyFile, "-known-hosts", kh, "-P", "2222", "-o", "ProxyCommand="+script,
		"get", "-q", first.User+"@127.0.0.1:"+src, back)
	requireOK(t, r)
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)
	ok, fail := rd.counts()
	require.Zero(t, ok)
	require.GreaterOrEqual(t, fail, 1)
	require.Equal(t, 1, strings.Count(r.stderr, "HOST KEY MISMATCH for [127.0.0.1]:2222 on another connection"), "stderr: %s", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "only the warning: %s", r.stderr)
	require.Contains(t, first.Log(), "Accepted publickey")
	require.NotContains(t, other.Log(), "Accepted", "the other server got as far as a login")
}

// Dials that replay a typed password wait for the first to show whether it works:
// when it does not, the server sees one failed login, not one per dial.
func TestRedialProbesATypedLoginOnce(t *testing.T) {
	isolateEnv(t)
	pw, _ := needUser(t, redialUser)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{ExtraConfig: []string{"PasswordAuthentication yes"}})
	var logins atomic.Int32
	a := newApp(io.Discard, io.Discard)
	a.testRedialLogin = func() { logins.Add(1) }
	hc := &hostConfig{hostName: "127.0.0.1", port: s.Port, user: redialUser, password: true}
	for _, tc := range []struct {
		password string
		ok       bool
	}{{pw + "-wrong", false}, {pw, true}} {
		r := a.newRedialer(hc, nil, &firstLogin{hostKey: s.HostKey, auth: &authMemory{hc: hc, password: &tc.password}}, nil)
		logins.Store(0)
		const dials = 4
		errs := make(chan error, dials)
		for range dials {
			go func() {
				sc, err := r.dial(context.Background())
				if err == nil {
					_ = sc.Close()
				}
				errs <- err
			}()
		}
		for range dials {
			if err := <-errs; tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		}
		r.close()
		if tc.ok {
			require.Equal(t, int32(dials), logins.Load(), "once the login worked, every dial logs in")
		} else {
			require.Equal(t, int32(1), logins.Load(), "each dial tried the password")
		}
	}
}
