package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// results holds one table's measurements: every row, every round, one RTT and direction.
type results struct {
	rows    []*row
	rounds  int
	size    int64
	timeout time.Duration
	m       map[*row][]measurement // indexed by round; the zero measurement = not run
}

func newResults(rows []*row, rounds int, size int64, timeout time.Duration) *results {
	res := &results{rows: rows, rounds: rounds, size: size, timeout: timeout, m: map[*row][]measurement{}}
	for _, r := range rows {
		res.m[r] = make([]measurement, rounds)
	}
	return res
}

func (res *results) set(r *row, round int, m measurement) { res.m[r][round] = m }

// rate is round's throughput for r in MiB/s over the client process's wall time. A
// transfer killed at the timeout yields size/timeout, an upper bound (bound = true).
func (res *results) rate(r *row, round int) (v float64, bound, ok bool) {
	m := res.m[r][round]
	switch {
	case m.timedOut:
		return float64(res.size) / mib / res.timeout.Seconds(), true, true
	case m.ran && m.err == nil:
		return float64(res.size) / mib / m.wall.Seconds(), false, true
	}
	return 0, false, false
}

// summary is one table line.
type summary struct {
	rate, ratio, rssMiB, cpuPerGiB float64
	hasRate, hasRatio, hasRSS      bool
	hasCPU                         bool
	rateBound, ratioBound          bool // a timed-out round took part
}

func (res *results) summarize(r *row) summary {
	var s summary
	var rates, ratios, rss, cpu []float64
	base := findIn(res.rows, sluiceDefaultID)
	for round := range res.rounds {
		m := res.m[r][round]
		v, bound, ok := res.rate(r, round)
		if ok {
			rates = append(rates, v)
			s.rateBound = s.rateBound || bound
			if m.rssKiB > 0 {
				rss = append(rss, float64(m.rssKiB)/1024)
			}
		}
		if ok && !bound {
			cpu = append(cpu, m.cpu.Seconds()/(float64(res.size)/gib))
		}
		if base == nil || !ok {
			continue
		}
		// The ratio pairs the two rows' runs of the same round: both saw the same
		// moment of a shared, drifting machine.
		if bv, bbound, bok := res.rate(base, round); bok {
			ratios = append(ratios, bv/v)
			s.ratioBound = s.ratioBound || bound || bbound
		}
	}
	s.rate, s.hasRate = median(rates)
	s.ratio, s.hasRatio = median(ratios)
	s.rssMiB, s.hasRSS = median(rss)
	s.cpuPerGiB, s.hasCPU = median(cpu)
	return s
}

func findIn(rows []*row, id string) *row {
	for _, r := range rows {
		if r.id == id {
			return r
		}
	}
	return nil
}

// median returns the middle value (the mean of the two middle ones for an even count).
func median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// write prints the markdown table, then the failures, if any.
func (res *results) write(w io.Writer, cfg *config, heading string) {
	fmt.Fprintf(w, "\n### %s\n\n", heading)
	fmt.Fprintln(w, "| row | MiB/s (median) | sluice/row | peak RSS MiB | CPU s/GiB |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	anyBound := false
	for _, r := range res.rows {
		s := res.summarize(r)
		anyBound = anyBound || s.rateBound || s.ratioBound
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.label(cfg),
			cell(s.rate, s.hasRate, 1, s.rateBound), cell(s.ratio, s.hasRatio, 2, s.ratioBound),
			cell(s.rssMiB, s.hasRSS, 1, false), cell(s.cpuPerGiB, s.hasCPU, 2, false))
	}
	if anyBound {
		fmt.Fprintf(w, "\n\\* includes transfers killed at -timeout %v, counted as %s/timeout: a bound, not a measurement.\n", res.timeout, formatSize(res.size))
	}
	var fails []string
	for _, r := range res.rows {
		for round, m := range res.m[r] {
			if m.err != nil {
				fails = append(fails, fmt.Sprintf("- %s, round %d: %v", r.id, round+1, m.err))
			}
		}
	}
	if len(fails) > 0 {
		fmt.Fprintf(w, "\nFailed transfers (left out of the figures):\n%s\n", strings.Join(fails, "\n"))
	}
}

func cell(v float64, ok bool, prec int, bound bool) string {
	if !ok {
		return "–"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if bound {
		s += "\\*"
	}
	return s
}

// progressLine describes one finished transfer for -v.
func progressLine(res *results, r *row, round int, dir direction, rtt time.Duration) string {
	m := res.m[r][round]
	head := fmt.Sprintf("rtt=%-5s %-8s round %d  %-14s", formatRTT(rtt), dir, round+1, r.id)
	switch {
	case m.err != nil:
		return head + " FAILED: " + m.err.Error()
	case m.timedOut:
		return head + fmt.Sprintf(" timed out after %v", res.timeout)
	}
	v, _, _ := res.rate(r, round)
	line := head + fmt.Sprintf(" %7.1f MiB/s  wall %6.2fs", v, m.wall.Seconds())
	if m.transfer > 0 {
		line += fmt.Sprintf(" (transfer %6.2fs = %7.1f MiB/s)", m.transfer.Seconds(), float64(res.size)/mib/m.transfer.Seconds())
	}
	return line + fmt.Sprintf("  rss %6.1f MiB  cpu %5.2fs", float64(m.rssKiB)/1024, m.cpu.Seconds())
}

// parseSize reads a byte count with an optional binary suffix: 4096, 64KiB, 64MiB, 1GiB
// (K, M, G and KB, MB, GB are taken as binary too: this tool only deals in MiB).
func parseSize(s string) (int64, error) {
	t, mult := cutUnit(strings.TrimSpace(s))
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n <= 0 || n > (64<<30)/mult {
		return 0, fmt.Errorf("bad size %q (want e.g. 64MiB or 1GiB, at most 64GiB)", s)
	}
	return n * mult, nil
}

// cutUnit splits a size's unit suffix off and returns its multiplier.
func cutUnit(t string) (string, int64) {
	for _, u := range []struct {
		name string
		mult int64
	}{
		{"GiB", gib}, {"GB", gib}, {"G", gib},
		{"MiB", mib}, {"MB", mib}, {"M", mib},
		{"KiB", 1 << 10}, {"KB", 1 << 10}, {"K", 1 << 10},
	} {
		if len(t) > len(u.name) && strings.EqualFold(t[len(t)-len(u.name):], u.name) {
			return t[:len(t)-len(u.name)], u.mult
		}
	}
	return t, 1
}

func formatSize(n int64) string {
	switch {
	case n%gib == 0:
		return fmt.Sprintf("%d GiB", n/gib)
	case n%mib == 0:
		return fmt.Sprintf("%d MiB", n/mib)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
