package main

import (
	"context"
	"os"
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

// TestSmoke runs every row once each way, direct and through the delay proxy, on a small
// file. It checks that each transfer completes and is verified, not how fast it is.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run skipped in -short mode")
	}
	if err := sshdtest.SSHDUsable(); err != nil {
		t.Skip(err)
	}
	cfg, err := parseFlags([]string{"-size", "4MiB", "-rounds", "1", "-rtt", "0,4ms",
		"-timeout", "2m", "-deadline", "8m", "-work", t.TempDir(), "-v"})
	require.NoError(t, err)
	var out, progress strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, cfg, &out, &progress), "progress:\n%s", progress.String())
	t.Logf("\n%s", out.String())
	require.NotContains(t, out.String(), "Failed transfers", progress.String())
	withSluice, withTime := findRow(sluiceDefaultID) != nil, findGNUTime() != ""
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| row ") {
			continue
		}
		cells := strings.Split(line, " | ")
		require.Len(t, cells, 5, line)
		for i, c := range cells[1:] {
			if (i == 1 && !withSluice) || (i == 2 && !withTime) {
				continue // no ratio in a -tags nosluice build; no RSS without GNU time
			}
			require.NotContains(t, c, "–", "a row produced no figure: %s", line)
		}
	}
	for _, want := range []string{"download, RTT 0 (direct)", "upload, RTT 4ms", "plain channel", "pkg/sftp v1.13.12 tuned"} {
		require.Contains(t, out.String(), want)
	}
}
