package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// get -a and put -a after the command was killed (SIGKILL: nothing cuts the part file)
// or interrupted (SIGINT: the command stops as a user's Ctrl-C stops it) in the middle
// of a striped transfer: the next run with -a resumes from the point the library
// proves, and the copy is the source. After SIGKILL that is 64 MiB (its W) before the
// part's end; after SIGINT, the part's end: the command let the library cut the part
// to what was known written and mark it (sftp.Resume) before it left. The command
// runs as a child process (runSluiceChild) so that the signals are real: the test
// binary itself, run again for TestSluiceChild, which runs main's body.

// childArgsEnv carries the arguments of a TestSluiceChild run, in JSON.
const childArgsEnv = "SLUICE_CLI_CHILD"

// childHangEnv, set, makes TestSluiceChild's wind-down after an interrupt never end:
// its first progress report once ctx has ended says "hanging" on file descriptor 3
// and blocks for good, as a cleanup stuck on a server that stopped answering would.
const childHangEnv = "SLUICE_CLI_CHILD_HANG"

// TestSluiceChild runs the command as main does (signalContext included), reporting
// the bytes moved on file descriptor 3, a line "progress N" per MiB. Run any other way
// it skips.
func TestSluiceChild(t *testing.T) {
	env := os.Getenv(childArgsEnv)
	if env == "" {
		t.Skip("the child process of the kill tests (runSluiceChild); runs only as that")
	}
	var args []string
	require.NoError(t, json.Unmarshal([]byte(env), &args))
	report := os.NewFile(3, "progress")
	ctx, _ := signalContext()
	a := newApp(os.Stdout, os.Stderr)
	var next int64
	hang := os.Getenv(childHangEnv) != ""
	a.testProgress = func(p sftp.Progress) {
		if hang && ctx.Err() != nil {
			fmt.Fprintln(report, "hanging")
			select {}
		}
		if p.TotalBytes >= next {
			fmt.Fprintf(report, "progress %d\n", p.TotalBytes)
			next = p.TotalBytes + 1<<20
		}
	}
	os.Exit(a.run(ctx, args))
}

// runSluiceChild runs the command with args in a child process and sends it sig once
// at least at bytes have moved, and sig again whenever it says it is hanging (see
// childHangEnv, which env may set). It returns the exit code (-1 when killed) and
// stderr.
func runSluiceChild(t *testing.T, args []string, at int64, sig syscall.Signal, env ...string) (int, string) {
	t.Helper()
	enc, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSluiceChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), env...), childArgsEnv+"="+string(enc))
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.ExtraFiles = []*os.File{pw}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	pw.Close()
	signalled := make(chan bool, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if sc.Text() == "hanging" {
				cmd.Process.Signal(sig)
				continue
			}
			n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "progress "), 10, 64)
			if err == nil && n >= at && !sent {
				sent = true
				signalled <- cmd.Process.Signal(sig) == nil
			}
		}
		if !sent {
			signalled <- false
		}
	}()
	res := make(chan error, 1)
	go func() { res <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-res:
	case <-time.After(testTimeout):
		cmd.Process.Kill()
		t.Fatalf("the command did not end; stderr:\n%s", stderr.String())
	}
	require.True(t, <-signalled, "the command ended before it was signalled: %v; stderr:\n%s", werr, stderr.String())
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// sluiceMark is the library's resume mark (its resumemark.go): the modification time
// of a part file cut to a prefix known whole, which -a continues from its end.
var sluiceMark = time.Date(2101, 3, 4, 5, 6, 8, 0, time.UTC)

// requireProvenPart checks the part a stopped transfer left (if any): below its size
// when it carries the mark (which it must when marked says so), else below its size
// less sluiceSpan, it is the source. It returns where -a resumes it.
func requireProvenPart(t *testing.T, part string, data []byte, marked bool) int64 {
	t.Helper()
	b, err := os.ReadFile(part)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	fi, err := os.Stat(part)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), len(data), "the part is longer than the source")
	hasMark := fi.ModTime().Equal(sluiceMark)
	if marked {
		require.True(t, hasMark, "the part was not cut and marked (modified %v)", fi.ModTime())
	}
	proven := max(0, len(b)-sluiceSpan)
	if hasMark {
		proven = len(b)
	}
	require.True(t, bytes.Equal(data[:proven], b[:proven]), "the part is not the source below its proven point")
	return int64(proven)
}

func TestKilledThenResumed(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 64})
	// A round trip of 4 ms: long enough for the command to stripe.
	proxy, err := delayproxy.New(s.Addr, 2*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	port := proxy.Addr()[strings.LastIndexByte(proxy.Addr(), ':')+1:]
	kh := knownHostsFile(t, knownhosts.Line([]string{proxy.Addr()}, s.HostKey))
	args := []string{"-i", s.KeyFile, "-known-hosts", kh, "-P", port}
	on := func(p string) string { return s.User + "@127.0.0.1:" + p }

	dir := t.TempDir()
	const size = sluiceSpan + 32<<20 + 4321
	src, data := randomFile(t, dir, "src.bin", size)
	for _, tc := range []struct {
		op  string
		sig syscall.Signal
	}{
		{"get", syscall.SIGKILL}, {"get", syscall.SIGINT}, {"put", syscall.SIGKILL}, {"put", syscall.SIGINT},
	} {
		t.Run(fmt.Sprintf("%s %v", tc.op, tc.sig), func(t *testing.T) {
			dst := filepath.Join(dir, fmt.Sprintf("%s-%d.bin", tc.op, tc.sig))
			part := dst + ".sluice-part"
			from, to := src, on(dst)
			if tc.op == "get" {
				from, to = on(src), dst
			} else {
				part = filepath.Join(dir, "."+filepath.Base(dst)+".sluice-part")
			}
			code, stderr := runSluiceChild(t, append(append([]string{}, args...), tc.op, "-a", from, to), size-16<<20, tc.sig)
			if tc.sig == syscall.SIGINT {
				require.Equal(t, exitSignal+int(syscall.SIGINT), code, "stderr:\n%s", stderr)
			} else {
				require.Equal(t, -1, code, "stderr:\n%s", stderr)
			}
			require.NoFileExists(t, dst, "a stopped transfer left a file under the destination name")
			require.True(t, s.WaitSessionsGone(testTimeout), "the server's sessions did not end")
			resumed := requireProvenPart(t, part, data, tc.sig == syscall.SIGINT)
			if fi, err := os.Stat(part); err == nil {
				t.Logf("part of %d bytes; -a continues from %d: %d bytes sent again", fi.Size(), resumed, fi.Size()-resumed)
			}
			if tc.sig == syscall.SIGINT {
				require.Positive(t, resumed, "nothing to resume: the test proves nothing")
			}

			r := runCLI(t, append(append([]string{}, args...), tc.op, "-a", from, to)...)
			requireOK(t, r)
			if resumed > 0 {
				require.Contains(t, r.stderr, fmt.Sprintf("(%d resumed)", resumed))
			}
			got, err := os.ReadFile(dst)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got), "the resumed copy is not the source")
			require.NoFileExists(t, part)
		})
	}
}

// A second Ctrl-C leaves at once: the first one's wind-down (here stuck for good) is
// not waited for, and the exit code is the interrupt's.
func TestSecondInterruptLeavesAtOnce(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{MaxSessions: 64})
	kh := knownHostsFile(t, knownhosts.Line([]string{s.Addr}, s.HostKey))
	port := s.Addr[strings.LastIndexByte(s.Addr, ':')+1:]
	dir := t.TempDir()
	src, _ := randomFile(t, dir, "src.bin", 64<<20)
	args := []string{"-i", s.KeyFile, "-known-hosts", kh, "-P", port, "put", src, s.User + "@127.0.0.1:" + filepath.Join(dir, "dst.bin")}
	code, stderr := runSluiceChild(t, args, 8<<20, syscall.SIGINT, childHangEnv+"=1")
	require.Equal(t, exitSignal+int(syscall.SIGINT), code, "stderr:\n%s", stderr)
}
