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
	files   int // the tree case's files per transfer, counted in files/s; 0: a file in MiB/s
	timeout time.Duration
	m       map[*row][]measurement // indexed by round; the zero measurement = not run
	// base is the row every ratio divides: sluice default, or in the pipe case the
	// pipe row with an opener. nil: no ratios.
	base      *row
	ratioHead string // the ratio column's heading
}

func newResults(rows []*row, rounds int, size int64, timeout time.Duration) *results {
	res := &results{rows: rows, rounds: rounds, size: size, timeout: timeout, m: map[*row][]measurement{},
		base: findIn(rows, sluiceDefaultID), ratioHead: "sluice/row"}
	for _, r := range rows {
		res.m[r] = make([]measurement, rounds)
	}
	return res
}

// newTreeResults is newResults for a tree case table, rated in files/s.
func newTreeResults(rows []*row, rounds int, t *treeSource, timeout time.Duration) *results {
	res := newResults(rows, rounds, t.size(), timeout)
	res.files = len(t.files)
	return res
}

func (res *results) set(r *row, round int, m measurement) { res.m[r][round] = m }

// setBase makes ratios divide base's rate (nil: no ratios).
func (res *results) setBase(base *row) {
	res.base = base
	if base != nil {
		res.ratioHead = base.id + "/row"
	}
}

// timedOut reports whether r ran into the timeout in any round so far.
func (res *results) timedOut(r *row) bool {
	return slices.ContainsFunc(res.m[r], func(m measurement) bool { return m.timedOut })
}

// amount is what one transfer moves in the table's unit: MiB, or files.
func (res *results) amount() float64 {
	if res.files > 0 {
		return float64(res.files)
	}
	return float64(res.size) / mib
}

// rate is round's throughput for r in MiB/s (files/s for a tree) over the client
// process's wall time. A transfer killed at the timeout yields amount/timeout, an upper
// bound (bound = true).
func (res *results) rate(r *row, round int) (v float64, bound, ok bool) {
	m := res.m[r][round]
	switch {
	case m.timedOut:
		return res.amount() / res.timeout.Seconds(), true, true
	case m.ran && m.err == nil:
		return res.amount() / m.wall.Seconds(), false, true
	}
	return 0, false, false
}

// summary is one table line.
type summary struct {
	rate, ratio, rssMiB, wall float64
	// cpu is CPU seconds per GiB moved, or per transfer in the tree case, where the
	// bytes are few and the cost is per file.
	cpu                       float64
	hasRate, hasRatio, hasRSS bool
	hasCPU, hasWall           bool
	rateBound, ratioBound     bool // a timed-out round took part
}

func (res *results) summarize(r *row) summary {
	var s summary
	var rates, ratios, rss, cpu, walls []float64
	base := res.base
	for round := range res.rounds {
		m := res.m[r][round]
		v, bound, ok := res.rate(r, round)
		if ok {
			rates = append(rates, v)
			walls = append(walls, res.amount()/v)
			s.rateBound = s.rateBound || bound
			if m.rssKiB > 0 {
				rss = append(rss, float64(m.rssKiB)/1024)
			}
		}
		if ok && !bound {
			c := m.cpu.Seconds()
			if res.files == 0 {
				c /= float64(res.size) / gib
			}
			cpu = append(cpu, c)
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
	s.cpu, s.hasCPU = median(cpu)
	s.wall, s.hasWall = median(walls)
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

// medianBy is the median of f over xs.
func medianBy[T any](xs []T, f func(T) float64) (float64, bool) {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	return median(vs)
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
	bc, what := caseFile, formatSize(res.size)
	if res.files > 0 {
		bc, what = caseTree, fmt.Sprintf("%d files", res.files)
		fmt.Fprintf(w, "| row | files/s (median) | wall s (median) | %s | peak RSS MiB | CPU s |\n", res.ratioHead)
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|")
	} else {
		fmt.Fprintf(w, "| row | MiB/s (median) | %s | peak RSS MiB | CPU s/GiB |\n", res.ratioHead)
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	}
	anyBound := false
	for _, r := range res.rows {
		s := res.summarize(r)
		anyBound = anyBound || s.rateBound || s.ratioBound
		cells := []string{r.label(cfg, bc), cell(s.rate, s.hasRate, 1, s.rateBound)}
		if res.files > 0 {
			cells = append(cells, cell(s.wall, s.hasWall, 2, s.rateBound))
		}
		cells = append(cells, cell(s.ratio, s.hasRatio, 2, s.ratioBound),
			cell(s.rssMiB, s.hasRSS, 1, false), cell(s.cpu, s.hasCPU, 2, false))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if anyBound {
		fmt.Fprintf(w, "\n\\* includes transfers killed at -timeout %v, counted as %s/timeout: a bound, not a measurement.\n", res.timeout, what)
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
	unit := "MiB/s"
	if res.files > 0 {
		unit = "files/s"
	}
	line := head + fmt.Sprintf(" %7.1f %s  wall %6.2fs", v, unit, m.wall.Seconds())
	if m.transfer > 0 {
		line += fmt.Sprintf(" (transfer %6.2fs = %7.1f %s)", m.transfer.Seconds(), res.amount()/m.transfer.Seconds(), unit)
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
