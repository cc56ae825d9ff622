package sftp

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// Servers that stop taking data, for real: OpenSSH's sftp-server frozen with SIGSTOP,
// over pipes (the pipe fills) and behind a private sshd (the SSH channel's window
// runs out). A call returns at its ctx, and the channel whose Write stays blocked is
// given up.

// shortGrace keeps these tests quick: how long a blocked Write may outlast the call
// that gave up on it. The tests wait for the outcome (Done), not for a time.
const shortGrace = 100 * time.Millisecond

// A WriteAt to a stopped sftp-server over pipes: its WRITE (256 KiB) cannot fit in the
// 64 KiB pipe, so the Write blocks; the File's deadline ends the call, and the channel
// is given up.
func TestWriteToStoppedSFTPServerOverPipes(t *testing.T) {
	dir := serverDir(t)
	c, p := startServer(t, dir, []Option{withStallGrace(shortGrace)})
	t.Cleanup(func() { _ = p.resume() }) // before the Client's cleanup: let it exit
	require.Greater(t, c.Limits().MaxWrite, 64<<10, "a WRITE must not fit in the pipe")
	f, err := c.Create(testCtx(t), "f")
	require.NoError(t, err)
	p.stop(t)
	p.drainWrites()
	res := tsGo(func() error { _, err := f.WriteAt(make([]byte, c.Limits().MaxWrite), 0); return err })
	await(t, p.writeStarted, 1, "the WRITE on its way to the stopped server")
	require.NoError(t, f.SetDeadline(time.Now()))
	requireDeadline(t, tsRecv(t, res, "WriteAt after its deadline"))
	tsRecv(t, c.Done(), "the Client giving the channel up")
	requireStalled(t, c.Err())
}

// A Put over SSH whose sftp-server is stopped mid-transfer returns with its ctx, and
// the Client reports the main channel given up: its window ran out with the Put's
// WRITE inside x/crypto's Write, which nothing on the client's side can end.
func TestPutToStoppedSFTPServerOverSSH(t *testing.T) {
	sshd := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	sc, err := sshd.Dial()
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() }) // ends the goroutines left in x/crypto
	// One channel: the Put's WRITEs and every call share the main channel.
	c, err := NewClient(testCtx(t), sc, WithChannels(1), withStallGrace(shortGrace))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	dir := serverDir(t)
	side, err := c.Create(testCtx(t), filepath.Join(dir, "side"))
	require.NoError(t, err)
	local := filepath.Join(t.TempDir(), "src")
	writeLocal(t, local, randBytes(48<<20, 9), 0o644) // far more than a window
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var once sync.Once
	var frozen []int
	err = c.Put(ctx, local, filepath.Join(dir, "dst"), OnProgress(func(pr Progress) {
		if pr.Bytes >= 1<<20 {
			once.Do(func() {
				frozen = stopSFTPServers(t, sshd)
				// A short ctx from here: the window fills in far less.
				time.AfterFunc(200*time.Millisecond, cancel)
			})
		}
	}))
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, frozen)

	// If the Put's WRITE was in a Write when its ctx ended, the watch is on it, and the
	// Write is blocked for good (the server is stopped and its window used up), so
	// the channel is given up once the grace is over: checkStall decides that now
	// rather than at the timer. If the window still had room, the WRITE went out
	// whole; then WRITEs of another file, each ended by a deadline, fill it until one
	// stays blocked.
	for c.Err() == nil {
		if c.main.stallWatched() {
			c.main.checkStall(time.Now().Add(time.Hour))
			continue
		}
		require.NoError(t, side.SetDeadline(time.Now().Add(50*time.Millisecond)))
		_, err := side.WriteAt(make([]byte, c.Limits().MaxWrite), 0)
		require.Error(t, err)
	}
	tsRecv(t, c.Done(), "Done")
	requireStalled(t, c.Err())
	_, err = c.Stat(testCtx(t), dir)
	requireStalled(t, err)
	tsRecv(t, tsGo(func() error { return c.Close() }), "Close")
}

func requireStalled(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, net.ErrClosed)
	require.True(t, isStalled(err), "want a channel given up on a stalled write, got %v", err)
	require.ErrorContains(t, err, "the server stopped taking data")
}

// stopSFTPServers stops every sftp-server under sshd with SIGSTOP and returns their
// pids once the kernel reports each stopped; cleanup lets them run again.
func stopSFTPServers(t *testing.T, sshd *sshdtest.SSHD) []int {
	t.Helper()
	var pids []int
	for _, pid := range procDescendants(sshd.Pid()) {
		if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil && strings.TrimSpace(string(comm)) == "sftp-server" {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	}
	// The processes are sshd's, not ours: their state is all there is to wait on.
	deadline := time.Now().Add(testTimeout)
	for _, pid := range pids {
		for procState(pid) != 'T' {
			require.False(t, time.Now().After(deadline), "sftp-server %d did not stop", pid)
			time.Sleep(time.Millisecond)
		}
	}
	return pids
}

// procDescendants lists the processes below root.
func procDescendants(root int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if ppid := procField(pid, 1); ppid > 0 {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// procStat returns the fields of /proc/pid/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
}

func procState(pid int) byte {
	if f := procStat(pid); len(f) > 0 && f[0] != "" {
		return f[0][0]
	}
	return 0
}

func procField(pid, i int) int {
	f := procStat(pid)
	if len(f) <= i {
		return -1
	}
	n, err := strconv.Atoi(f[i])
	if err != nil {
		return -1
	}
	return n
}

// stallWatched reports whether the stall watch is on a Write that has not returned.
func (c *conn) stallWatched() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.watchSeq > c.ws.written
}
