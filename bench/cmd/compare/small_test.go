package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSmallFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-case", "small,file", "-small-ops", "readfile,stat,readfile", "-small-goroutines", "1,4", "-small-time", "2s"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseFile, caseSmall}, cfg.cases)
	require.Equal(t, smallOptions{ops: []smallOp{opReadFile, opStat}, goroutines: []int{1, 4}, duration: 2 * time.Second}, cfg.small)
	cfg, err = parseFlags([]string{"-case", "all"})
	require.NoError(t, err)
	require.NotContains(t, cfg.cases, caseSmall, "the small case is not part of all")
	require.Equal(t, smallOps, cfg.small.ops)
	require.Equal(t, []int{1, 16, 64}, cfg.small.goroutines)
	for _, bad := range [][]string{{"-small-ops", "chmod"}, {"-small-goroutines", "0"}, {"-small-goroutines", "x"}, {"-small-time", "10ms"}} {
		_, err := parseFlags(bad)
		require.Error(t, err, "%v", bad)
	}
}

// fakeSmall is a client that makes each call on the local file system, counting
// them, so that a Remove or Rename of a name the loop did not prepare fails.
type fakeSmall struct {
	calls atomic.Int64
	fail  error
}

func (f *fakeSmall) count() error { f.calls.Add(1); return f.fail }
func (f *fakeSmall) stat(context.Context, string) error {
	return f.count()
}
func (f *fakeSmall) open(context.Context, string) (func() error, error) {
	return func() error { return nil }, f.count()
}
func (f *fakeSmall) readFile(_ context.Context, p string) ([]byte, error) {
	if err := f.count(); err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}
func (f *fakeSmall) writeFile(context.Context, string, []byte) error { return f.count() }
func (f *fakeSmall) readDir(_ context.Context, p string) (int, error) {
	es, err := os.ReadDir(p)
	return len(es), errors.Join(err, f.count())
}
func (f *fakeSmall) remove(_ context.Context, p string) error {
	return errors.Join(os.Remove(p), f.count())
}
func (f *fakeSmall) rename(_ context.Context, a, b string) error {
	return errors.Join(os.Rename(a, b), f.count())
}
func (f *fakeSmall) mkdir(_ context.Context, p string) error {
	return errors.Join(os.Mkdir(p, 0o755), f.count())
}
func (f *fakeSmall) close() error { return nil }

// TestRunSmall runs every operation's loop on a fake client over the local file system,
// which checks what each call names and returns: ReadFile's content, ReadDir's count,
// and that Remove, Rename and Mkdir find (or not) what they should.
func TestRunSmall(t *testing.T) {
	for _, op := range smallOps {
		t.Run(string(op), func(t *testing.T) {
			j := &smallJob{Client: "fake", Op: op, Goroutines: 3, Duration: 50 * time.Millisecond,
				Dir: filepath.Join(t.TempDir(), "cell"), Pool: 1 << 20}
			if op == opRemove {
				j.Pool = 40
			}
			require.NoError(t, prepareSmall(j, smallContent()))
			c := &fakeSmall{}
			readied := false
			res, err := runSmall(context.Background(), c, j, func() error { readied = true; return nil })
			require.NoError(t, err)
			require.True(t, readied)
			require.Positive(t, res.Calls)
			require.Equal(t, res.Calls+int64(j.Goroutines), c.calls.Load(), "every call counted but the warm-up's")
			require.Positive(t, res.Seconds)
			require.Positive(t, res.rate())
			if op == opRemove {
				require.True(t, res.Exhausted, "40 files go quickly")
				require.Equal(t, int64(3*40-3), res.Calls)
			}
		})
	}
}

// TestRunSmallFails: a failing call fails the cell, warm-up or not.
func TestRunSmallFails(t *testing.T) {
	j := &smallJob{Op: opStat, Goroutines: 2, Duration: time.Second, Dir: filepath.Join(t.TempDir(), "cell")}
	require.NoError(t, prepareSmall(j, smallContent()))
	boom := errors.New("boom")
	_, err := runSmall(context.Background(), &fakeSmall{fail: boom}, j, func() error { return nil })
	require.ErrorIs(t, err, boom)
}

func TestRemovePool(t *testing.T) {
	require.Equal(t, 3*20*5/4+16, removePool(50*time.Millisecond, 3*time.Second, 64))
	require.Equal(t, 45000+16, removePool(0, 3*time.Second, 1))
	require.Equal(t, 2812+16, removePool(0, 3*time.Second, 64))
}

func TestSmallTable(t *testing.T) {
	m := func(round int, calls int64, secs, callSecs float64) smallMeasure {
		return smallMeasure{smallResult: smallResult{Calls: calls, Seconds: secs, CallSeconds: callSecs, MedianSeconds: 0.05,
			ClientCPUSeconds: float64(calls) * 30e-6},
			round: round, sftpCPU: float64(calls) * 100e-6, sshdCPU: float64(calls) * 50e-6}
	}
	cells := []*smallCell{
		{op: opReadFile, goroutines: 1, res: map[string][]smallMeasure{
			smallSluice:  {m(0, 30, 3, 3), m(1, 28, 3, 3)},
			smallPkgSFTP: {m(0, 6, 3, 3), m(1, 7, 3, 3)},
		}, failed: map[string]error{}},
		{op: opStat, goroutines: 64, res: map[string][]smallMeasure{
			smallSluice: {m(0, 3600, 3, 3600*0.05)},
		}, failed: map[string]error{smallPkgSFTP: errors.New("round 1: boom")}},
	}
	var b strings.Builder
	writeSmallTable(&b, "small", 50*time.Millisecond, []string{smallSluice, smallPkgSFTP}, cells)
	out := b.String()
	// ReadFile: sluice 10 and 9.33 calls/s (2 and 2.14 RTTs a call), pkg/sftp 2 and
	// 2.33 (10 and 8.57): per-round ratios 5 and 4; floor 0.9 × 1 / (2 × 0.05) = 9.
	// CPU: 100, 50 and 30 µs a call; the server bound 10⁶ / 100.
	// Every median is 50 ms: 1 RTT.
	require.Contains(t, out, "| readfile | 1 | 10 | 2 | 4.50 | 1.00 (2.07) | 1.00 (9.29) | 9 | 100 / 50 / 30 | 100 / 50 / 30 | 10000 | 10000 |")
	require.Contains(t, out, "| stat | 64 | 1200 |  |  | 1.00 (1.00) |  | 1152 | 100 / 50 / 30 |  | 10000 |  |")
	require.Contains(t, out, "- pkg/sftp stat ×64: round 1: boom")
}

// TestSmallEndToEnd runs every call of the small case once, briefly, against the
// private sshd, with both clients.
func TestSmallEndToEnd(t *testing.T) {
	skipUnlessEndToEnd(t)
	_, out := smokeRun(t, "-case", "small", "-small-goroutines", "2", "-small-time", "500ms", "-rounds", "1")
	require.NotContains(t, out, "Failed cells")
	for _, op := range smallOps {
		require.Regexp(t, `\| `+string(op)+` \| 2 \| [0-9]+ \| [0-9]+ \| [0-9.]+ \|`, out)
	}
}

// TestSmallBefore: -small-before adds an earlier build as a third client, and the
// table divides sluice's calls/s by each other client's.
func TestSmallBefore(t *testing.T) {
	require.Equal(t, []string{smallSluice, smallPkgSFTP}, smallClientsFor(smallOptions{}))
	clients := smallClientsFor(smallOptions{beforeExe: "/old/compare"})
	require.Equal(t, []string{smallSluice, smallPkgSFTP, smallBefore}, clients)
	m := func(calls int64) smallMeasure {
		return smallMeasure{smallResult: smallResult{Calls: calls, Seconds: 1, CallSeconds: 1, MedianSeconds: 0.1}}
	}
	var b strings.Builder
	writeSmallTable(&b, "small", 50*time.Millisecond, clients, []*smallCell{{op: opReadDir, goroutines: 1,
		res:    map[string][]smallMeasure{smallSluice: {m(10)}, smallPkgSFTP: {m(4)}, smallBefore: {m(5)}},
		failed: map[string]error{}}})
	require.Contains(t, b.String(), "| sluice/pkg/sftp | sluice/sluice before |")
	require.Contains(t, b.String(), "| readdir | 1 | 10 | 4 | 5 | 2.50 | 2.00 |")
}
