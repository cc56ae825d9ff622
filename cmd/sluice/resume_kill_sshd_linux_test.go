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
// proves, 64 MiB (its W) before the part's end, and the copy is the source. The
// command runs as a child process (runSluiceChild) so that the signals are real:
// the test binary itself, run again for TestSluiceChild, which runs main's body.

// childArgsEnv carries the arguments of a TestSluiceChild run, in JSON.
const childArgsEnv = "SLUICE_CLI_CHILD"

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
	a.testProgress = func(p sftp.Progress) {
		if p.TotalBytes >= next {
			fmt.Fprintf(report, "progress %d\n", p.TotalBytes)
			next = p.TotalBytes + 1<<20
		}
	}
	os.Exit(a.run(ctx, args))
}

// runSluiceChild runs the command with args in a child process and sends it sig once
// at least at bytes have moved. It returns the exit code (-1 when killed) and stderr.
func runSluiceChild(t *testing.T, args []string, at int64, sig syscall.Signal) (int, string) {
	t.Helper()
	enc, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSluiceChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(enc))
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
		for sc.Scan() {
			n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "progress "), 10, 64)
			if err == nil && n >= at {
				signalled <- cmd.Process.Signal(sig) == nil
				return
			}
		}
		signalled <- false
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

// requireProvenPart checks the part a stopped transfer left (if any): below its size
// less sluiceSpan it is the source. It returns where -a resumes it.
func requireProvenPart(t *testing.T, part string, data []byte) int64 {
	t.Helper()
	b, err := os.ReadFile(part)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), len(data), "the part is longer than the source")
	proven := max(0, len(b)-sluiceSpan)
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
			resumed := requireProvenPart(t, part, data)

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
