package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// --retries through a proxy that resets the connection (resetproxy_test.go): retries
// that converge. A retried tree leaves out the files an earlier try completed and
// continues the ones in flight from their part files; --retries counts failures in a
// row without progress, and the pause before a try starts again after progress; a
// dead session's connections are closed before the pause.

// faultArgs are the flags reaching s through p, whose address known_hosts names.
func faultArgs(t *testing.T, s *sshdtest.SSHD, addr string, port int) []string {
	kh := knownHostsFile(t, knownhosts.Line([]string{addr}, s.HostKey))
	return []string{"-i", s.KeyFile, "-known-hosts", kh, "-P", strconv.Itoa(port)}
}

// tryWatch follows a transfer's reports across its tries (app.testProgress).
type tryWatch struct {
	t  *testing.T
	mu sync.Mutex
	// done counts each file's Done reports; late are reports that came after it.
	done map[string]int
	late []string
	// interrupted are files that ended with an error; resumedAt their first report
	// when they started again.
	interrupted map[string]bool
	started     map[string]bool
	resumedAt   map[string]int64
}

func newTryWatch(t *testing.T) *tryWatch {
	return &tryWatch{t: t, done: map[string]int{}, interrupted: map[string]bool{},
		started: map[string]bool{}, resumedAt: map[string]int64{}}
}

func (w *tryWatch) hook(a *app) { a.testProgress = w.report }

func (w *tryWatch) report(p sftp.Progress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done[p.Path] > 0 {
		w.late = append(w.late, p.Path)
	}
	switch {
	case p.Done:
		w.done[p.Path]++
		delete(w.started, p.Path)
	case p.Err != nil:
		w.interrupted[p.Path] = true
		delete(w.started, p.Path)
	case !w.started[p.Path]:
		w.started[p.Path] = true
		if w.interrupted[p.Path] {
			w.resumedAt[p.Path] = p.Bytes
		}
	}
}

// check asserts every one of files was completed once and reported on no more.
func (w *tryWatch) check(files int) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(w.t, w.done, files)
	for path, n := range w.done {
		require.Equal(w.t, 1, n, "%s completed %d times", path, n)
	}
	require.Empty(w.t, w.late, "reports after a file was in place")
}

// noPause is the app hook that skips the pauses between tries: they are not what is
// tested.
func noPause(a *app) { a.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() } }

// A tree cut every 6 MiB: every file crosses once, whatever the cuts, both ways. (The
// gaps are wider than the SSH window, 2 MiB, so that each try has acknowledgements
// back before its cut: a reset discards what the server had not read yet.)
func TestRetriesSkipCompletedFiles(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	p := newResetProxy(t, s.Addr, cutsEvery(6<<20))
	args := faultArgs(t, s, p.addr(), p.port())
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	want := map[string][]byte{}
	for i := range 60 {
		name := fmt.Sprintf("d%d/f%02d", i%3, i)
		require.NoError(t, os.MkdirAll(filepath.Join(tree, filepath.Dir(name)), 0o755))
		_, want[name] = randomFile(t, tree, name, 300<<10+i)
	}
	_, want["big"] = randomFile(t, tree, "big", 8<<20)

	// The trees land inside the destinations, under their own name.
	for _, dir2 := range []struct{ op, from, to, copy string }{
		{"put", tree, remoteOn(s, filepath.Join(dir, "up")), filepath.Join(dir, "up", "tree")},
		{"get", remoteOn(s, filepath.Join(dir, "up", "tree")), filepath.Join(dir, "back"), filepath.Join(dir, "back", "tree")},
	} {
		_, cutsBefore := p.stats()
		w := newTryWatch(t)
		r := runApp(t, func(a *app) { w.hook(a); noPause(a) }, append(args, dir2.op, "-r", "--retries", "10", dir2.from, dir2.to)...)
		requireOK(t, r)
		_, cuts := p.stats()
		require.GreaterOrEqual(t, cuts-cutsBefore, 2, "the proxy cut the %s", dir2.op)
		require.GreaterOrEqual(t, strings.Count(r.stderr, "; retrying"), 2, r.stderr)
		w.check(len(want))
		for name, data := range want {
			got, err := os.ReadFile(filepath.Join(dir2.copy, name))
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got), "%s: %s differs", dir2.op, name)
		}
		require.Regexp(t, `: 61 files, `+strconv.Itoa(totalSize(want))+` bytes in `, r.stderr)
	}
}

func totalSize(files map[string][]byte) int {
	n := 0
	for _, d := range files {
		n += len(d)
	}
	return n
}

// A file cut once in the middle continues from its part file: the retry's first
// report starts where the part ends, in both directions.
func TestRetriesResumeTheFileInFlight(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", 16<<20+3)
	for _, tc := range []struct{ op, from, to, copy string }{
		{"put", src, remoteOn(s, filepath.Join(dir, "up.bin")), filepath.Join(dir, "up.bin")},
		{"get", remoteOn(s, src), filepath.Join(dir, "back.bin"), filepath.Join(dir, "back.bin")},
	} {
		p := newResetProxy(t, s.Addr, cutsAt(6<<20))
		w := newTryWatch(t)
		r := runApp(t, w.hook, append(faultArgs(t, s, p.addr(), p.port()), tc.op, "--retries", "3", tc.from, tc.to)...)
		requireOK(t, r)
		require.Contains(t, r.stderr, "; retrying (retry 1 of 3)")
		require.NotContains(t, r.stderr, tc.op+" "+tc.from+": "+tc.op+" ", "one prefix per message")
		w.check(1)
		require.Len(t, w.resumedAt, 1, tc.op)
		for _, at := range w.resumedAt {
			require.Positive(t, at, "%s started over instead of continuing its part file", tc.op)
		}
		got, err := os.ReadFile(tc.copy)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, got), "%s is not byte-identical", tc.op)
	}
}

// --retries n is n failures in a row without progress: a transfer cut five times,
// each after progress, finishes with --retries 1, each retry at once. Connections
// refused after a cut are failures without progress: each waits longer (1 s, 2 s),
// and one too many ends the command.
func TestRetriesCountFailuresWithoutProgress(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", 32<<20)
	var pauses []time.Duration
	noSleep := func(a *app) {
		a.sleep = func(ctx context.Context, d time.Duration) error {
			pauses = append(pauses, d)
			return ctx.Err()
		}
	}

	p := newResetProxy(t, s.Addr, cutsEvery(6<<20))
	r := runApp(t, noSleep, append(faultArgs(t, s, p.addr(), p.port()), "put", "--retries", "1", src, remoteOn(s, filepath.Join(dir, "a")))...)
	requireOK(t, r)
	retries := strings.Count(r.stderr, "; retrying (retry 1 of 1)")
	require.GreaterOrEqual(t, retries, 4, r.stderr)
	require.Equal(t, retries, strings.Count(r.stderr, "; retrying"), r.stderr)
	require.Empty(t, pauses, "a retry after progress waits for nothing")
	got, err := os.ReadFile(filepath.Join(dir, "a"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))

	// One cut after progress, then two connections refused.
	refuseAfterCut := func(p *resetProxy) func() int64 {
		first := true
		return func() int64 {
			if first {
				first = false
				return 6 << 20
			}
			p.refuse = 2 // called at the cut, under the proxy's lock
			return 0
		}
	}
	for _, tc := range []struct {
		retries string
		ok      bool
	}{{"3", true}, {"2", false}} {
		pauses = nil
		p := newResetProxy(t, s.Addr, nil)
		p.set(func(p *resetProxy) { p.schedule = refuseAfterCut(p); p.nextCut = p.schedule() })
		dst := filepath.Join(dir, "b"+tc.retries)
		r := runApp(t, noSleep, append(faultArgs(t, s, p.addr(), p.port()), "put", "--retries", tc.retries, src, remoteOn(s, dst))...)
		require.Contains(t, r.stderr, "; retrying (retry 1 of "+tc.retries+")")
		require.Contains(t, r.stderr, "; retrying in 1s (retry 2 of "+tc.retries+")")
		if tc.ok {
			requireOK(t, r)
			require.Contains(t, r.stderr, "; retrying in 2s (retry 3 of 3)")
			require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, pauses)
			got, err := os.ReadFile(dst)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got))
		} else {
			require.Equal(t, exitFail, r.code)
			require.Equal(t, []time.Duration{time.Second}, pauses)
			require.NotContains(t, r.stderr, "retry 3 of")
		}
	}
}

// When the session's main connection dies, the connections it dialled for lanes are
// closed before the pause, not held through it: the pause (after a refused
// reconnect) waits until the proxy carries no connection at all, which only their
// close can bring about.
func TestRetriesCloseTheDeadSessionAtOnce(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 1})
	p := newResetProxy(t, s.Addr, nil)
	p.set(func(p *resetProxy) {
		p.onlyFirst = true
		first := true
		p.schedule = func() int64 {
			if first {
				first = false
				return 5 << 20
			}
			p.refuse = 1
			return 0
		}
		p.nextCut = p.schedule()
	})
	// A long link, so that the transfer stripes over extra connections.
	link, err := delayproxy.New(p.addr(), 2*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, link.Close()) })
	port, err := strconv.Atoi(link.Addr()[strings.LastIndexByte(link.Addr(), ':')+1:])
	require.NoError(t, err)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src.bin", stripeSize)
	var paused int
	dl := newRedials()
	hook := func(a *app) {
		a.testRedial = dl.outcome
		a.sleep = func(ctx context.Context, d time.Duration) error {
			paused++
			return p.waitConns(ctx, 0)
		}
	}
	r := runApp(t, hook, append(faultArgs(t, s, link.Addr(), port), "put", "--retries", "3", src, remoteOn(s, filepath.Join(dir, "up.bin")))...)
	requireOK(t, r)
	require.Equal(t, 1, paused, r.stderr)
	ok, _ := dl.counts()
	require.Positive(t, ok, "no lane connection was dialled")
	got, err := os.ReadFile(filepath.Join(dir, "up.bin"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
}
