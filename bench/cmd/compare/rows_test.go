package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRowFamily(t *testing.T) {
	f := rowFamily{prefix: "x-ch", max: 64, make: func(n int) *row { return &row{id: "made"} }}
	for id, want := range map[string]int{"x-ch1": 1, "x-ch8": 8, "x-ch64": 64} {
		n, ok := f.member(id)
		require.True(t, ok, id)
		require.Equal(t, want, n, id)
	}
	for _, id := range []string{"x-ch", "x-ch0", "x-ch65", "x-ch08", "x-ch+8", "x-ch8a", "y-ch8", "x-ch-1"} {
		_, ok := f.member(id)
		require.False(t, ok, id)
	}
	saved := families
	t.Cleanup(func() { families = saved })
	registerFamily(rowFamily{prefix: "zz-test-", max: 4, make: func(n int) *row { return &row{id: "zz-test-", order: n} }})
	require.Equal(t, 3, findRow("zz-test-3").order, "the child rebuilds a family row from its id")
	require.Nil(t, findRow("zz-test-5"))
	require.NotNil(t, findFamily("zz-test-"))
	require.Nil(t, findFamily("zz-none-"))

	if findFamily(sluiceFixedPrefix) == nil {
		t.Skip("a -tags nosluice build has no fixed-channel rows")
	}
	r := findRow("sluice-ch8")
	require.NotNil(t, r)
	require.Equal(t, "sluice-ch8", r.id)
	require.Equal(t, "sluice WithChannels(8)", r.title)
	require.True(t, r.sftp)
	require.True(t, r.runs(caseFile))
	require.False(t, r.runs(caseTree), "fixed rows take part in the file case only")
	require.False(t, r.runs(casePipe))
	require.Nil(t, findRow("sluice-ch0"))
}

func TestParseFlagsLanes(t *testing.T) {
	ids := func(rows []*row) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.id)
		}
		return strings.Join(s, ",")
	}
	cfg, err := parseFlags([]string{"-size", "256MiB,1GiB,256MiB", "-rows", "openssh,plain,plain-par", "-plain-par", "8",
		"-table-budget", "2m", "-summary", "-max-sessions", "40", "-rtt", "0,100ms"})
	require.NoError(t, err)
	require.Equal(t, []int64{256 << 20, 1 << 30}, cfg.sizesFor(0), "a list of sizes, each once, in the order given")
	require.Equal(t, []int64{256 << 20, 1 << 30}, cfg.sizesFor(100*time.Millisecond))
	require.Equal(t, []time.Duration{0, 100 * time.Millisecond}, cfg.rtts)
	require.Equal(t, 8, cfg.plainPar)
	require.Equal(t, 2*time.Minute, cfg.tableBudget)
	require.True(t, cfg.summary)
	require.Equal(t, 40, cfg.maxSessions)
	require.Equal(t, "plain,plain-par,openssh", ids(cfg.rows), "rows keep the tables' order")

	cfg, err = parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, defaultPlainPar, cfg.plainPar)
	require.Equal(t, maxFixedChannels, cfg.maxSessions)
	require.Zero(t, cfg.tableBudget)
	require.False(t, cfg.summary)
	require.Equal(t, []benchCase{caseFile, caseTree}, cfg.cases, "the pipe case runs only when asked for")
	require.NotNil(t, findIn(cfg.rows, "plain-par"), "plain-par is one of all rows")

	cfg, err = parseFlags([]string{"-case", "all"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseFile, caseTree, casePipe}, cfg.cases)
	cfg, err = parseFlags([]string{"-case", "pipe,file"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseFile, casePipe}, cfg.cases)

	for _, bad := range [][]string{{"-plain-par", "0"}, {"-plain-par", "257"}, {"-max-sessions", "0"},
		{"-table-budget", "-1s"}, {"-size", "64MiB,"}, {"-size", "64MiB,x"}, {"-case", "pipes"},
		{"-sluice-fixed", "0"}, {"-sluice-fixed", "65"}, {"-sluice-fixed", "4,x"}, {"-rows", "sluice-ch0"}} {
		_, err := parseFlags(bad)
		require.Error(t, err, bad)
	}

	if findFamily(sluiceFixedPrefix) == nil {
		_, err := parseFlags([]string{"-sluice-fixed", "4"})
		require.ErrorContains(t, err, "not in this build")
		return
	}
	cfg, err = parseFlags([]string{"-rows", "openssh,sluice,sluice-tuned", "-sluice-fixed", "32, 4,8,4"})
	require.NoError(t, err)
	require.Equal(t, "openssh,sluice,sluice-tuned,sluice-ch4,sluice-ch8,sluice-ch32", ids(cfg.rows),
		"fixed rows after the others, by channel count, each once")
	cfg, err = parseFlags([]string{"-rows", "sluice-ch16,sluice,sluice-ch2", "-sluice-fixed", "16"})
	require.NoError(t, err)
	require.Equal(t, "sluice,sluice-ch2,sluice-ch16", ids(cfg.rows), "-rows names fixed rows too")
}

func TestRowsByCase(t *testing.T) {
	sftp1 := &row{id: "openssh"}
	file := &row{id: "f", transfer: plainTransfer}
	tree := &row{id: "t", transfer: plainTransfer, tree: plainTransfer}
	pipe := &row{id: "p", transfer: plainTransfer, pipe: true}
	for _, tc := range []struct {
		r                *row
		file, tree, pipe bool
	}{{sftp1, true, true, true}, {file, true, false, false}, {tree, true, true, false}, {pipe, false, false, true}} {
		require.Equal(t, tc.file, tc.r.runs(caseFile), tc.r.id)
		require.Equal(t, tc.tree, tc.r.runs(caseTree), tc.r.id)
		require.Equal(t, tc.pipe, tc.r.runs(casePipe), tc.r.id)
	}
	opener := &row{id: pipeOpenerRowID}
	one := &row{id: pipeRowID}
	require.Same(t, opener, pipeBaseRow([]*row{sftp1, one, opener}))
	require.Same(t, one, pipeBaseRow([]*row{sftp1, one}))
	require.Nil(t, pipeBaseRow([]*row{sftp1}))
}

// TestRowsForDirection: a download-only row is left out of upload tables, and only
// there.
func TestRowsForDirection(t *testing.T) {
	a, hash, b := &row{id: "a"}, &row{id: "hash", downloadOnly: true}, &row{id: "b"}
	rows := []*row{a, hash, b}
	require.Equal(t, rows, rowsFor(rows, download))
	require.Equal(t, []*row{a, b}, rowsFor(rows, upload))
	require.Equal(t, []*row{a, hash, b}, rows, "the caller's slice is left alone")
	if r := findRow("sluice-hash"); r != nil {
		require.True(t, r.downloadOnly)
	}
}
