package sftp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// Harness: OpenSSH's sftp-server over pipes, the package's default test server.
//
// This file provides a Client on a real sftp-server run on this machine over a pair of
// pipes: no SSH, no network, so a "remote" path is also a local path the test can
// create and inspect. Use it for any behaviour that belongs to a real server (what a
// call sends and what comes back), which is most tests:
//
//   - newServerClient(t, dir, args...) and sftpServerClient(t, dir, opts, args...): a
//     Client and nothing else; the server is started by internal/sshdtest. getPutClient
//     (getput_test.go), fsTestClient (fs_test.go) and benchServerClient (bench_test.go)
//     are this, under their files' names.
//   - startServer(t, dir, opts, args...): the same with the process (*serverProc), for
//     tests that stop (SIGSTOP), resume or kill the server mid-call, or wait for the
//     client's writes (writeStarted, writeDone) and replies (stopAfterReplies).
//   - startPipeServer(t, cmd, wrap, opts...): any other SFTP server speaking on its
//     stdin and stdout (rclone: newRcloneClient), optionally behind a packet tap.
//   - within: bounds a call that takes no ctx (File methods); lockedBuffer.
//
// testenv_linux_test.go holds the Linux-only parts (stopping a process, reading back
// owners, times, FIFOs, statfs) and testenv_other_test.go their skipping stand-ins.
//
// Where tests go: a test of one call goes in the test file named after the source file
// that implements it (dir.go: dir_test.go), using this harness. Faults and attacks a
// real server will not produce use the in-process server (testserver_env_test.go);
// exact byte orderings, the scripted peer (conn_peer_test.go); several channels on one
// SSH connection, the private sshd (stripeenv_test.go); differences between servers,
// the cross-server suite (xs_test.go). docs/design.md, "Where a test goes", has the
// table. Every wait is bounded as testctx_test.go says.

// sftpServerCmd is `sftp-server -e -d dir args...` (internal/sshdtest.Command, the one
// rule for finding it), or skips the test when sftp-server is not installed.
func sftpServerCmd(t testing.TB, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd, err := sshdtest.Command(dir, args...)
	if err != nil {
		t.Skipf("SKIPPED, real server unavailable: %v", err)
	}
	return cmd
}

// serverProc is an OpenSSH sftp-server child process speaking over pipes.
type serverProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{} // closed once the process has been reaped
	err    error         // cmd.Wait's result; read after <-exited

	// Each Write of the client to the server puts a token on writeStarted as it starts,
	// and each request it completes one on writeDone, both before the bytes go out (see
	// signalWriter; tokens are dropped when the channel is full:
	// writeStarted holds one, writeDone enough to count a test's requests). Tests wait
	// on them to know a request is on its way, where nothing else would tell them.
	writeStarted, writeDone chan struct{}

	onReply atomic.Pointer[replyStop] // see stopAfterReplies
	reader  *signalReader
}

// replyStop is an armed stopAfterReplies: the server stops once the client has read
// the end of reply number at (counted from the start of the stream).
type replyStop struct {
	at   int
	done chan error
}

// drainWrites forgets the tokens of earlier writes.
func (p *serverProc) drainWrites() {
	for _, ch := range []chan struct{}{p.writeStarted, p.writeDone} {
		for len(ch) > 0 {
			<-ch
		}
	}
}

// await waits for n tokens on ch, failing the test rather than waiting forever.
func await(t testing.TB, ch <-chan struct{}, n int, what string) {
	t.Helper()
	timeout := time.After(testTimeout)
	for range n {
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// stop freezes the server with SIGSTOP and returns once the kernel reports it stopped,
// so requests sent from then on stay unanswered until it is killed.
func (p *serverProc) stop(t testing.TB) {
	t.Helper()
	require.NoError(t, p.stopNow())
}

// stopAfterReplies arranges for the server to be stopped as soon as the client has
// received n more whole replies, before the client sees the last of them: the server
// stalls right after answering, say, an OPEN (and whatever was sent with it), so the
// requests that follow hang. The outcome is sent on the returned channel. Call it
// while no reply is due.
func (p *serverProc) stopAfterReplies(n int) <-chan error {
	done := make(chan error, 1)
	p.onReply.Store(&replyStop{at: int(p.reader.replies.Load()) + n, done: done})
	return done
}

// signalReader runs the stopAfterReplies hook on the client's side of the pipe. It
// follows the packets' length fields to count the replies read.
type signalReader struct {
	r   io.ReadCloser
	srv *serverProc

	replies atomic.Int64 // whole packets read so far, VERSION included
	packets packetCounter
}

// packetCounter follows SFTP packets' length fields across a byte stream cut anywhere.
type packetCounter struct {
	hdr   [4]byte // the length field being read
	inHdr int     // bytes of it read
	left  uint32  // bytes of the current packet's body still to come
}

func (s *signalReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.replies.Add(int64(s.packets.count(p[:n])))
	if stop := s.srv.onReply.Load(); stop != nil && int(s.replies.Load()) >= stop.at && s.srv.onReply.CompareAndSwap(stop, nil) {
		stop.done <- s.srv.stopNow()
	}
	return n, err
}

// count follows the stream over b and returns how many packets ended in it.
func (s *packetCounter) count(b []byte) (ended int) {
	for len(b) > 0 {
		if s.left == 0 {
			k := copy(s.hdr[s.inHdr:], b)
			s.inHdr += k
			b = b[k:]
			if s.inHdr < 4 {
				return
			}
			s.inHdr, s.left = 0, binary.BigEndian.Uint32(s.hdr[:])
			if s.left == 0 {
				ended++
			}
			continue
		}
		k := min(uint32(len(b)), s.left)
		s.left -= k
		b = b[k:]
		if s.left == 0 {
			ended++
		}
	}
	return ended
}

func (s *signalReader) Close() error { return s.r.Close() }

// signalWriter tells the tests about the client's writes: writeStarted as a Write
// begins, and writeDone once for each request the Write completes (the client's
// channel writer may send several requests in one Write, so Writes are not requests).
// Both are told before the bytes go to the pipe: the server can answer a request only
// after that, so a call that has its reply has been counted (the Write itself runs
// on the channel's writer goroutine, which nothing orders against the call's return).
type signalWriter struct {
	w       io.WriteCloser
	srv     *serverProc
	packets packetCounter
}

func (s *signalWriter) Write(p []byte) (int, error) {
	notify(s.srv.writeStarted)
	for range s.packets.count(p) {
		notify(s.srv.writeDone)
	}
	return s.w.Write(p)
}

func (s *signalWriter) Close() error { return s.w.Close() }

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// kill ends the server abruptly and waits until it is gone, so its end of the pipes is
// closed by the time kill returns.
func (p *serverProc) kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	p.waitExit(t)
}

func (p *serverProc) waitExit(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(testTimeout):
		t.Fatalf("sftp-server did not exit within %v", testTimeout)
	}
}

// newServerClient starts `sftp-server -e -d dir args...` and returns a Client talking to
// it over pipes. Cleanup closes the Client, then waits for the server to exit.
func newServerClient(t testing.TB, dir string, args ...string) *Client {
	t.Helper()
	c, _ := sftpServerClient(t, dir, nil, args...)
	return c
}

// startedServer is an sftp-server started by sftpServerClient.
type startedServer struct {
	pid int
	// exit is cmd.Wait's result, set by sftpServerClient's cleanup: a cleanup
	// registered before sftpServerClient was called runs after it and may read it.
	exit error
}

// sftpServerClient is the one way these tests start OpenSSH's sftp-server over pipes
// for a Client that needs nothing but the server (internal/sshdtest starts it: `-e -d
// dir args...`; the test is skipped where sftp-server is not installed). Cleanup closes
// the Client, which closes the server's stdin, then waits for the server to exit,
// killing it after testTimeout, and shows its stderr if the test failed. A non-zero exit
// is no failure by itself: tests provoke it (an oversized packet makes sftp-server exit).
// Tests that stop, kill or watch the server use startServer instead.
func sftpServerClient(t testing.TB, dir string, opts []Option, args ...string) (*Client, *startedServer) {
	t.Helper()
	stderr := &lockedBuffer{}
	cmd, r, w, err := sshdtest.StartSFTPServerCmd(dir, stderr, args...)
	if errors.Is(err, sshdtest.ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	require.NoError(t, err)
	srv := &startedServer{pid: cmd.Process.Pid}
	// cmd.Wait closes r, so it is called only once the Client is done reading.
	wait := func() error {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(testTimeout):
			_ = cmd.Process.Kill()
			return fmt.Errorf("sftp-server killed: it did not exit within %v of its stdin closing (%v)", testTimeout, <-done)
		}
	}
	c, err := NewClientPipe(testCtx(t), r, w, opts...)
	if err != nil {
		// NewClientPipe closed r and w: the server sees EOF and exits.
		t.Fatalf("NewClientPipe to sftp-server: %v (exit: %v); stderr:\n%s", err, wait(), stderr.String())
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Client.Close: %v", err)
		}
		srv.exit = wait()
		if t.Failed() {
			t.Logf("sftp-server exit: %v; stderr:\n%s", srv.exit, stderr.String())
		}
	})
	return c, srv
}

// startServer is newServerClient with Client options and the process, for tests that
// kill or stop the server.
//
// The pipes are made here rather than with cmd.StdoutPipe, because cmd.Wait closes the
// pipes it made: a test that reaps a killed server must leave the Client's read end
// open, so the Client sees the EOF a dead server really produces.
func startServer(t testing.TB, dir string, opts []Option, args ...string) (*Client, *serverProc) {
	t.Helper()
	srvIn, toSrv, err := os.Pipe()
	require.NoError(t, err)
	fromSrv, srvOut, err := os.Pipe()
	require.NoError(t, err)

	p := &serverProc{
		stderr: &lockedBuffer{}, exited: make(chan struct{}),
		writeStarted: make(chan struct{}, 1), writeDone: make(chan struct{}, 1<<16),
	}
	p.cmd = sftpServerCmd(t, dir, args...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = srvIn, srvOut, p.stderr
	err = p.cmd.Start()
	// The child has its own copies now; ours would keep the pipes open after it dies.
	srvIn.Close()
	srvOut.Close()
	if err != nil {
		toSrv.Close()
		fromSrv.Close()
		t.Fatalf("starting sftp-server: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	p.reader = &signalReader{r: fromSrv, srv: p}
	c, err := NewClientPipe(ctx, p.reader, &signalWriter{w: toSrv, srv: p}, opts...)
	if err != nil {
		toSrv.Close()
		fromSrv.Close()
		p.kill(t)
		t.Fatalf("NewClientPipe: %v; sftp-server stderr:\n%s", err, p.stderr.String())
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Client.Close: %v", err)
		}
		// Closing its stdin makes a healthy server exit; one that is stopped or stuck
		// is killed rather than waited for forever.
		select {
		case <-p.exited:
		case <-time.After(testTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("sftp-server exit: %v; stderr:\n%s", p.err, p.stderr.String())
		}
	})
	return c, p
}

// newRcloneClient starts rclone's SFTP server on pipes (`rclone serve sftp --stdio dir`)
// and returns a Client talking to it; cleanup as for newServerClient. It skips the test
// when rclone is not installed, which scripts/test.sh makes sure it is in CI.
//
// rclone serves dir through its VFS: dir is "/" to the client, and directory listings
// are cached, so files made in dir behind its back once it has listed dir may stay
// invisible. Tests make their local files before the server starts.
func newRcloneClient(t testing.TB, dir string, opts ...Option) *Client {
	t.Helper()
	return startPipeServer(t, rcloneCommand(t, dir), nil, opts...)
}

// rcloneCommand is the rclone server command for dir, or skips the test.
func rcloneCommand(t testing.TB, dir string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("rclone")
	if err != nil {
		t.Skipf("SKIPPED, real server unavailable: rclone is not installed (apt-get install rclone; scripts/test.sh does): %v", err)
	}
	// No config file and a private cache directory: the server reads and writes
	// nothing outside the test.
	return exec.Command(bin, "serve", "sftp", "--stdio", "--config", "/dev/null", "--cache-dir", t.TempDir(), dir)
}

// startPipeServer runs cmd, an SFTP server speaking on its stdin and stdout, and
// returns a Client on its pipes. wrap, when not nil, stands between the Client and the
// pipes (replies, requests), for tests that watch the packets. Cleanup closes the
// Client and waits for the server to exit, killing it if it does not.
func startPipeServer(t testing.TB, cmd *exec.Cmd, wrap func(io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser), opts ...Option) *Client {
	t.Helper()
	// Pipes made here, as in startServer: cmd.Wait must not close the Client's end.
	srvIn, toSrv, err := os.Pipe()
	require.NoError(t, err)
	fromSrv, srvOut, err := os.Pipe()
	require.NoError(t, err)
	stderr := &lockedBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = srvIn, srvOut, stderr
	err = cmd.Start()
	srvIn.Close()
	srvOut.Close()
	if err != nil {
		toSrv.Close()
		fromSrv.Close()
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		select {
		case err := <-exited:
			return err
		case <-time.After(testTimeout):
			_ = cmd.Process.Kill()
			return fmt.Errorf("killed after %v: %v", testTimeout, <-exited)
		}
	}

	var r io.ReadCloser = fromSrv
	var w io.WriteCloser = toSrv
	if wrap != nil {
		r, w = wrap(r, w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := NewClientPipe(ctx, r, w, opts...)
	if err != nil {
		toSrv.Close()
		fromSrv.Close()
		_ = cmd.Process.Kill()
		t.Fatalf("NewClientPipe to %s: %v (exit: %v); stderr:\n%s", cmd.Path, err, stop(), stderr.String())
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Client.Close: %v", err)
		}
		// Its stdin closed, the server exits; rclone reports that as an error, so the
		// exit status says nothing.
		err := stop()
		if t.Failed() {
			t.Logf("%s exit: %v; stderr:\n%s", cmd.Path, err, stderr.String())
		}
	})
	return c
}

// within runs f and fails the test if it does not return in time: for File methods,
// which take no context.
func within(t testing.TB, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("call did not return within %v", testTimeout)
	}
}

// serverDir makes a fresh directory for a server to serve, with symlinks resolved so
// paths the server reports compare equal.
func serverDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

// randBytes returns n reproducible pseudo-random bytes: a transfer that drops,
// duplicates or reorders a chunk cannot produce them by accident.
func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeLocal(t testing.TB, name string, data []byte, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(name, data, perm))
	require.NoError(t, os.Chmod(name, perm)) // undo the umask
}

func readLocal(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

// localStatT is what the tests read back about a local file: owner, size and times as
// the server left them. localStat fills it where the OS tells (testenv_linux_test.go);
// elsewhere the test is skipped.
type localStatT struct {
	Uid, Gid   uint32
	Size       int64
	Atim, Mtim struct{ Sec, Nsec int64 }
}

// localStatFS is the local file system's statfs, to compare with statvfs@openssh.com.
type localStatFS struct {
	Bsize, Frsize, Blocks, Files, Namelen uint64
}

// umask is the process umask, which sftp-server inherits and applies to what it
// creates. Read from /proc because syscall.Umask can only read it by changing it.
var umask = sync.OnceValue(func() os.FileMode {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0o022
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				return os.FileMode(m)
			}
		}
	}
	return 0o022
})

// lockedBuffer collects the server's stderr, written by exec's copying goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
