package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// TestMain lets the test binary play the child process too: run re-executes
// os.Executable(), which under go test is this binary.
func TestMain(m *testing.M) {
	if spec, ok := childArg(os.Args[1:]); ok {
		os.Exit(childMain(spec))
	}
	os.Exit(m.Run())
}

// workDir is a -work directory every user can enter: run as root, the clients log in
// as benchUser (t.TempDir's directories are closed to others).
func workDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "compare-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o755))
	return d
}

// skipUnlessEndToEnd skips a test that runs the harness end to end: in -short mode, or
// where no private sshd can run.
func skipUnlessEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run skipped in -short mode")
	}
	if err := sshdtest.SSHDUsable(); err != nil {
		t.Skip(err)
	}
}

// smokeRun runs the harness with args, a work directory and bounds of its own, and
// requires that it succeeds with no failed transfer. It returns the config and the
// output.
func smokeRun(t *testing.T, args ...string) (*config, string) {
	t.Helper()
	cfg, err := parseFlags(append(args, "-timeout", "2m", "-deadline", "8m", "-work", workDir(t)))
	require.NoError(t, err)
	var out, progress strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, cfg, &out, &progress), "progress:\n%s", progress.String())
	t.Logf("\n%s", out.String())
	require.NotContains(t, out.String(), "Failed transfers", progress.String())
	return cfg, out.String()
}

// TestSmoke runs every row once each way, direct and through the delay proxy, on a small
// file and on a small tree. It checks that each transfer completes and is verified, not
// how fast it is.
func TestSmoke(t *testing.T) {
	skipUnlessEndToEnd(t)
	cfg, text := smokeRun(t, "-size", "4MiB", "-tree-files", "20", "-rounds", "1", "-rtt", "0,4ms", "-plain-par", "3", "-v")
	withSluice, withTime := findRow(sluiceDefaultID) != nil, findGNUTime() != ""
	// A tree table has a wall-time column after the rate, which moves the ratio and RSS.
	extra, treeRows := 0, 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "| row ") {
			extra = 0
			if strings.Contains(line, "files/s") {
				extra = 1
			}
			continue
		}
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		treeRows += extra
		cells := strings.Split(line, " | ")
		require.Len(t, cells, 5+extra, line)
		for i, c := range cells[1:] {
			if (i == 1+extra && !withSluice) || (i == 2+extra && !withTime) {
				continue // no ratio in a -tags nosluice build; no RSS without GNU time
			}
			require.NotContains(t, c, "–", "a row produced no figure: %s", line)
		}
	}
	for _, want := range []string{"download, RTT 0 (direct), 4 MiB", "upload, RTT 4ms", "plain channel", "pkg/sftp v1.13.12 tuned",
		"upload, RTT 4ms (delay proxy, 2ms each way), tree of 20 × 4 KiB files in 10 dirs"} {
		require.Contains(t, text, want)
	}
	// Only the rows with a recursive copy take part in tree tables.
	treeRowsRun := slices.DeleteFunc(slices.Clone(cfg.rows), func(r *row) bool {
		_, noSFTP := exec.LookPath("sftp")
		return !r.runs(caseTree) || (r.transfer == nil && noSFTP != nil)
	})
	wantTreeRows := 2 * len(cfg.rtts) * len(treeRowsRun)
	require.Equal(t, wantTreeRows, treeRows)
	require.Less(t, strings.Index(text, "upload, RTT 4ms (delay proxy, 2ms each way), 4 MiB"),
		strings.Index(text, "download, RTT 0 (direct), tree"), "the big-file tables come first")
}

// TestSmokeLanes runs the rows and the case issue 11 measures with: plain-par, fixed
// channel counts, the pipe case (with the opener row)
// and -summary, direct and through the delay proxy, with two sizes.
func TestSmokeLanes(t *testing.T) {
	skipUnlessEndToEnd(t)
	if findFamily(sluiceFixedPrefix) == nil {
		t.Skip("a -tags nosluice build has neither fixed-channel nor pipe rows")
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("OpenSSH ssh(1) not installed: no pipe rows")
	}
	rows := "openssh,sluice,plain-par," + pipeRowID
	for _, id := range []string{pipeOpenerRowID, "sluice-dialer"} {
		if findRow(id) != nil {
			rows += "," + id
		}
	}
	_, text := smokeRun(t, "-size", "3MiB,5MiB", "-rounds", "1", "-rtt", "0,4ms", "-case", "file,pipe,tree",
		"-tree-files", "10", "-rows", rows, "-plain-par", "3", "-sluice-fixed", "2", "-summary")
	for _, want := range []string{
		"| parallel plain channels (`dd`) (3 connections) |", "| sluice WithChannels(2) |",
		"download, RTT 4ms (delay proxy, 2ms each way), 5 MiB, pipe clients, 1 round(s)",
		"| sluice NewClientPipe, one `ssh -s sftp` |",
		"### Summary", "| 4ms | 3 MiB | up |", "| 4ms | tree 10 files | down |",
	} {
		require.Contains(t, text, want)
	}
	noTime := findGNUTime() == ""
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| row ") || strings.HasPrefix(line, "| RTT ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		for i, c := range cells {
			if strings.Contains(line, "tree") && (i == 6 || i == 7) {
				continue // the summary has no plain-par figure for a tree
			}
			if noTime && ((i == 3 && len(cells) == 5) || (i == 4 && len(cells) == 6)) {
				continue // no RSS without GNU time
			}
			require.NotContains(t, c, "–", "a row produced no figure: %s", line)
		}
	}
	// Pipe tables hold only sftp(1) and the pipe rows; file tables no pipe row.
	pipeTable := text[strings.Index(text, "pipe clients"):]
	pipeTable = pipeTable[:strings.Index(pipeTable, "\n\n###")]
	require.NotContains(t, pipeTable, "| sluice default |")
	require.NotContains(t, text[strings.Index(text, "\n### "):strings.Index(text, "pipe clients")], "NewClientPipe")
}
