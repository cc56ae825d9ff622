package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServiceFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-case", "service,file"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseFile, caseService}, cfg.cases)
	require.Equal(t, serviceOptions{transfers: 32, size: 8 << 20}, cfg.service, "issue 27's defaults")
	cfg, err = parseFlags([]string{"-case", "service", "-service-n", "4", "-service-size", "1MiB", "-service-profile", "/tmp/p"})
	require.NoError(t, err)
	require.Equal(t, serviceOptions{transfers: 4, size: 1 << 20, profileDir: "/tmp/p"}, cfg.service)
	cfg, err = parseFlags([]string{"-case", "all"})
	require.NoError(t, err)
	require.NotContains(t, cfg.cases, caseService, "the service case is not part of all")
	for _, bad := range [][]string{{"-service-n", "0"}, {"-service-n", "2000"}, {"-service-size", "0"}, {"-service-size", "2GiB"}, {"-service-size", "x"}} {
		_, err := parseFlags(bad)
		require.Error(t, err, "%v", bad)
	}
}

// fakeService copies to and from the local file system, the way the real clients do
// through the server; short, if set, makes every transfer stop that many bytes early.
type fakeService struct {
	short int64
	fail  error
}

func (f fakeService) download(_ context.Context, remote string, w io.Writer) (int64, error) {
	if f.fail != nil {
		return 0, f.fail
	}
	r, err := os.Open(remote)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return 0, err
	}
	return io.CopyN(w, r, fi.Size()-f.short)
}

func (f fakeService) upload(_ context.Context, remote string, r io.Reader) (int64, error) {
	if f.fail != nil {
		return 0, f.fail
	}
	if _, ok := r.(*os.File); ok {
		return 0, errors.New("upload source is an *os.File, not a plain reader")
	}
	w, err := os.Create(remote)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, r)
	return n, errors.Join(err, w.Close())
}

func (fakeService) close() error { return nil }

func serviceSource(t *testing.T, size int) string {
	p := filepath.Join(t.TempDir(), "src.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, size), 0o644))
	return p
}

// TestRunService runs both directions on a fake client: every transfer's bytes are
// counted, and every upload leaves a full file under its own name.
func TestRunService(t *testing.T) {
	const size = 100 << 10
	src := serviceSource(t, size)
	for _, dir := range []direction{download, upload} {
		t.Run(dir.String(), func(t *testing.T) {
			s := &serviceJob{Transfers: 5, Size: size, Dir: dir, Source: src}
			if dir == upload {
				s.UploadPrefix = filepath.Join(t.TempDir(), "up")
			}
			res, err := runService(context.Background(), fakeService{}, s)
			require.NoError(t, err)
			require.Equal(t, int64(5*size), res.Bytes)
			require.Positive(t, res.Seconds)
			require.Positive(t, res.PeakGoroutines)
			require.Positive(t, res.GoroutinesAfter)
			if dir == upload {
				require.NoError(t, checkUploads(s))
				removeUploads(s)
				require.Error(t, checkUploads(s), "removed")
			}
		})
	}
}

// TestRunServiceFails: a short transfer or a failing client fails the run.
func TestRunServiceFails(t *testing.T) {
	src := serviceSource(t, 10<<10)
	s := &serviceJob{Transfers: 3, Size: 10 << 10, Dir: download, Source: src}
	_, err := runService(context.Background(), fakeService{short: 1}, s)
	require.ErrorContains(t, err, "moved 10239 bytes, want 10240")
	boom := errors.New("boom")
	_, err = runService(context.Background(), fakeService{fail: boom}, s)
	require.ErrorIs(t, err, boom)
	s.UploadPrefix = filepath.Join(t.TempDir(), "up")
	require.NoError(t, os.WriteFile(s.uploadName(0), []byte("short"), 0o644))
	require.ErrorContains(t, checkUploads(s), "has 5 bytes, want 10240")
}

// TestSampler: the sampler takes a sample as it starts, so goroutines blocked before
// it starts and released after it stops are in its peak; with a profile path it writes
// a heap profile.
func TestSampler(t *testing.T) {
	const blocked = 20
	release := make(chan struct{})
	var started, done sync.WaitGroup
	for range blocked {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			<-release
		}()
	}
	started.Wait()
	profile := filepath.Join(t.TempDir(), "heap.pprof")
	peak := startSampler(profile).stop()
	close(release)
	done.Wait()
	require.NoError(t, peak.profileErr)
	require.GreaterOrEqual(t, peak.goroutines, blocked)
	require.Positive(t, peak.heap)
	fi, err := os.Stat(profile)
	require.NoError(t, err)
	require.Positive(t, fi.Size())
}

func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	require.Greater(t, peakRSS(), int64(1<<20), "a Go test binary holds more than 1 MiB")
}

func TestServiceTable(t *testing.T) {
	m := func(round int, secs float64, rss int64, heap int64, g int) serviceMeasure {
		return serviceMeasure{serviceResult: serviceResult{Bytes: 256 << 20, Seconds: secs, PeakRSS: rss << 20,
			PeakHeap: heap << 20, PeakGoroutines: g, GoroutinesAfter: 10, CPUSeconds: 2}, round: round}
	}
	clients := []string{serviceSluice, servicePkgSFTP, servicePkgSFTPTune}
	cell := &serviceCell{dir: download, res: map[string][]serviceMeasure{
		serviceSluice:  {m(0, 2, 300, 250, 100), m(1, 4, 200, 150, 80)},
		servicePkgSFTP: {m(0, 4, 60, 40, 200), m(1, 4, 50, 30, 180)},
	}, failed: map[string]error{servicePkgSFTPTune: errors.New("round 1: boom")}}
	var b strings.Builder
	writeServiceTable(&b, "service", clients, cell)
	out := b.String()
	// sluice: 128 and 64 MiB/s; pkg/sftp 64 and 64: ratios 2 and 1. RSS ratios 5 and 4.
	require.Contains(t, out, "| sluice default | 96.0 |  | 250 |  | 200 | 90 | 10 | 2.0 |")
	require.Contains(t, out, "| pkg/sftp default | 64.0 | 1.50 | 55 | 4.50 | 35 | 190 | 10 | 2.0 |")
	require.Contains(t, out, "| pkg/sftp tuned | | | | | | | | |")
	require.Contains(t, out, "- pkg/sftp tuned: round 1: boom")
	// The bound is max(1.5 × 55, 96) = 96 MiB; sluice's 250 misses it by 154.
	require.Contains(t, out, "= 96 MiB: missed by 154 MiB (2.60× the bound).")

	cell.res[serviceSluice] = []serviceMeasure{m(0, 2, 80, 40, 50)}
	cell.res[servicePkgSFTP] = []serviceMeasure{m(0, 2, 70, 40, 50)}
	b.Reset()
	writeServiceTable(&b, "service", clients, cell)
	require.Contains(t, b.String(), "max(1.5 × pkg/sftp default 70 MiB, 96 MiB) = 105 MiB: met.")
}

// TestServiceEndToEnd runs the service case once each way, briefly, against the
// private sshd, with every client of the build.
func TestServiceEndToEnd(t *testing.T) {
	skipUnlessEndToEnd(t)
	_, out := smokeRun(t, "-case", "service", "-service-n", "3", "-service-size", "256KiB", "-rounds", "1")
	require.NotContains(t, out, "Failed runs")
	for _, c := range serviceClientsInBuild() {
		require.Regexp(t, `\| `+regexp.QuoteMeta(serviceTitle(c))+` \| [0-9.]+ \| [0-9.]* \| [0-9]+ \|`, out)
	}
	require.Contains(t, out, "service, upload, RTT 0 (direct), 3 × 256 KiB at once on one client")
}
