package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSoakFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-case", "soak,file", "-soak-time", "5s", "-soak-workers", "8"})
	require.NoError(t, err)
	require.Equal(t, []benchCase{caseFile, caseSoak}, cfg.cases)
	require.Equal(t, soakOptions{workers: 8, duration: 5 * time.Second}, cfg.soak)
	cfg, err = parseFlags(nil)
	require.NoError(t, err)
	require.NotContains(t, cfg.cases, caseSoak, "the soak is not part of all")
	for _, bad := range [][]string{{"-soak-workers", "1"}, {"-soak-time", "100ms"}, {"-soak-time", "1h"}} {
		_, err := parseFlags(bad)
		require.Error(t, err, "%v", bad)
	}
}

func TestSoakPercentileAndTable(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, percentile(lat, 0.5))
	require.Equal(t, 90*time.Millisecond, percentile(lat, 0.9))
	require.Equal(t, 100*time.Millisecond, percentile(lat, 1))
	require.Equal(t, time.Duration(0), percentile(nil, 0.5))

	var b strings.Builder
	writeSoakTable(&b, "soak", 50*time.Millisecond, 64, [][]soakResult{
		{{Stats: 100, StatP50Ms: 50, StatP90Ms: 60, StatP99Ms: 70}},
		{{Stats: 10, StatP50Ms: 300, StatP90Ms: 2500, StatP99Ms: 3000, BulkBytes: 30 << 20, Seconds: 1}},
	})
	out := b.String()
	require.Contains(t, out, "| sluice default, Stat only | 100 | 50.0 | 60.0 | 70.0 | 1.00 | 1.20 | – |")
	require.Contains(t, out, "| sluice default, Stat + 4 MiB reads | 10 | 300.0 | 2500.0 | 3000.0 | 6.00 | 50.00 | 30.0 |")
}
