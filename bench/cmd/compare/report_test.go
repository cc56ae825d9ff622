package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "64KiB": 64 << 10, "64MiB": 64 << 20, "1GiB": 1 << 30,
		"256M": 256 << 20, "2g": 2 << 30, " 8 MiB ": 8 << 20,
	} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "0", "1.5GiB", "65GiB", "12XB"} {
		_, err := parseSize(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, "256 MiB", formatSize(256<<20))
	require.Equal(t, "1 GiB", formatSize(1<<30))
	require.Equal(t, "1000 B", formatSize(1000))
}

func TestMedian(t *testing.T) {
	_, ok := median(nil)
	require.False(t, ok)
	m, _ := median([]float64{3, 1, 2})
	require.Equal(t, 2.0, m)
	m, _ = median([]float64{4, 1, 3, 2})
	require.Equal(t, 2.5, m)
	m, ok = medianBy([]string{"ccc", "a", "bb"}, func(s string) float64 { return float64(len(s)) })
	require.True(t, ok)
	require.Equal(t, 2.0, m)
	_, ok = medianBy([]string(nil), func(string) float64 { return 1 })
	require.False(t, ok)
}

// TestRatiosPairRounds checks that sluice/row is the median of per-round ratios, not the
// ratio of medians, and that failures and timeouts are treated as documented.
func TestRatiosPairRounds(t *testing.T) {
	base := &row{id: sluiceDefaultID, title: "sluice default"}
	peer := &row{id: "peer", title: "peer"}
	slow := &row{id: "slow", title: "slow"}
	const size = 100 << 20
	res := newResults([]*row{peer, slow, base}, 3, size, 10*time.Second)
	at := func(seconds float64) measurement {
		return measurement{ran: true, wall: time.Duration(seconds * float64(time.Second)), rssKiB: 2048, cpu: time.Second}
	}
	// MiB/s: sluice 100, 50, 20; peer 50, 50, 40 -> per-round ratios 2, 1, 0.5.
	for round, s := range []float64{1, 2, 5} {
		res.set(base, round, at(s))
	}
	for round, s := range []float64{2, 2, 2.5} {
		res.set(peer, round, at(s))
	}
	res.set(slow, 0, measurement{ran: true, timedOut: true, rssKiB: 4096})
	res.set(slow, 1, measurement{ran: true, err: errors.New("boom")})
	res.set(slow, 2, at(4))

	s := res.summarize(peer)
	require.InDelta(t, 50, s.rate, 1e-9)
	require.InDelta(t, 1, s.ratio, 1e-9, "median of 2, 1, 0.5")
	require.InDelta(t, 2, s.rssMiB, 1e-9)
	require.InDelta(t, 1/(100.0/1024), s.cpu, 1e-9)

	s = res.summarize(slow)
	require.True(t, s.rateBound, "a timed-out round makes the figure a bound")
	require.InDelta(t, (10+25)/2.0, s.rate, 1e-9, "timeout counted as size/timeout = 10 MiB/s; the failed round is left out")
	require.True(t, s.ratioBound)
	require.InDelta(t, (100.0/10+20.0/25)/2, s.ratio, 1e-9)
	require.InDelta(t, 3, s.rssMiB, 1e-9, "RSS counts the timed-out round too")
	require.InDelta(t, 1/(100.0/1024), s.cpu, 1e-9, "CPU only from completed rounds")

	var b strings.Builder
	res.write(&b, &config{}, "download")
	out := b.String()
	require.Contains(t, out, "| peer | 50.0 | 1.00 | 2.0 | 10.24 |")
	require.Contains(t, out, "| slow | 17.5\\* | 5.40\\* | 3.0 | 10.24 |")
	require.Contains(t, out, "| sluice default | 50.0 | 1.00 |")
	require.Contains(t, out, "slow, round 2: boom")
	require.Contains(t, out, "\\* includes transfers killed")
}

func TestServerLogMoved(t *testing.T) {
	l := &serverLog{path: filepath.Join(t.TempDir(), "log")}
	require.NoError(t, l.mark())
	require.NoError(t, os.WriteFile(l.path, []byte(
		"session opened for local user root from [127.0.0.1]\n"+
			`close "/x/src.bin" bytes read 100 written 0`+"\n"), 0o600))
	require.NoError(t, l.mark())
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`close "/x/src.bin" bytes read 60 written 0` + "\n" +
		`forced close "/x/src.bin" bytes read 40 written 0` + "\n" +
		`close "/x/other.bin" bytes read 0 written 7` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r, w, err := l.moved("/x/src.bin")
	require.NoError(t, err)
	require.Equal(t, int64(100), r, "only lines after mark count, summed over channels")
	require.Zero(t, w)
	require.NoError(t, l.await("/x/src.bin", download, 100, time.Second))
	require.Error(t, l.await("/x/other.bin", upload, 8, 50*time.Millisecond))
}

func TestShellQuote(t *testing.T) {
	require.Equal(t, `'/a b'`, shellQuote("/a b"))
	require.Equal(t, `'it'\''s'`, shellQuote("it's"))
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-size", "64MiB", "-rounds", "1", "-rtt", "0,10ms", "-dir", "up", "-rows", "plain,openssh"})
	require.NoError(t, err)
	require.Equal(t, []int64{64 << 20}, cfg.sizesFor(10*time.Millisecond))
	require.Equal(t, []time.Duration{0, 10 * time.Millisecond}, cfg.rtts)
	require.Equal(t, []direction{upload}, cfg.dirs)
	require.Len(t, cfg.rows, 2)

	cfg, err = parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, []int64{1 << 30}, cfg.sizesFor(0))
	require.Equal(t, []int64{256 << 20}, cfg.sizesFor(50*time.Millisecond))

	require.Equal(t, []benchCase{caseFile, caseTree}, cfg.cases)
	require.Equal(t, 1000, cfg.treeFilesFor(0))
	require.Equal(t, 200, cfg.treeFilesFor(50*time.Millisecond))
	require.Equal(t, treeShape{dirs: 10, fileSize: 4096}, cfg.tree)
	require.Equal(t, 64, cfg.sluice.Parallel)

	cfg, err = parseFlags([]string{"-case", "tree,file", "-tree-files", "50", "-tree-dirs", "2", "-sluice-parallel", "0"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseFile, caseTree}, cfg.cases, "file tables first whatever the order given")
	require.Equal(t, 50, cfg.treeFilesFor(0))
	require.Equal(t, 50, cfg.treeFilesFor(50*time.Millisecond))
	require.Equal(t, 2, cfg.tree.dirs)
	require.Zero(t, cfg.sluice.Parallel)
	cfg, err = parseFlags([]string{"-case", "tree"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseTree}, cfg.cases)

	for _, bad := range [][]string{{"-rows", "nope"}, {"-rtt", "x"}, {"-dir", "sideways"}, {"-rounds", "0"}, {"extra"},
		{"-case", "dir"}, {"-case", ""}, {"-tree-files", "-1"}, {"-tree-dirs", "0"}, {"-sluice-parallel", "2000"}} {
		_, err := parseFlags(bad)
		require.Error(t, err, bad)
	}
}
