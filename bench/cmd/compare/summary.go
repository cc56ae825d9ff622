package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// summaryTable is -summary: one markdown table with a line per file or tree table of the
// run (RTT, size, direction), giving sftp(1), sluice default and the plain-par row side by
// side, for the README's speed section.
type summaryTable struct {
	plainPar int
	lines    []summaryLine
}

type summaryLine struct {
	rtt    time.Duration
	what   string // "256 MiB", or the tree's shape
	dir    direction
	tree   bool // rates in files/s
	rounds int
	// cells, formatted: sftp(1) and sluice rates, sluice/sftp(1), plain-par's rate,
	// sluice/plain-par; "–" where a row was not in the run.
	sftp, sluice, ratio, par, parRatio string
}

// add records res, a finished table of the file or tree case.
func (s *summaryTable) add(res *results, rtt time.Duration, dir direction, rounds int) {
	l := summaryLine{rtt: rtt, what: formatSize(res.size), dir: dir, tree: res.files > 0, rounds: rounds,
		sftp: "–", sluice: "–", ratio: "–", par: "–", parRatio: "–"}
	if l.tree {
		l.what = fmt.Sprintf("tree %d files", res.files)
	}
	if r := findIn(res.rows, sluiceDefaultID); r != nil {
		x := res.summarize(r)
		l.sluice = cell(x.rate, x.hasRate, 1, x.rateBound)
	}
	if r := findIn(res.rows, "openssh"); r != nil {
		x := res.summarize(r)
		l.sftp = cell(x.rate, x.hasRate, 1, x.rateBound)
		l.ratio = cell(x.ratio, x.hasRatio, 2, x.ratioBound)
	}
	if r := findIn(res.rows, "plain-par"); r != nil && !l.tree {
		x := res.summarize(r)
		l.par = cell(x.rate, x.hasRate, 1, x.rateBound)
		l.parRatio = cell(x.ratio, x.hasRatio, 2, x.ratioBound)
	}
	s.lines = append(s.lines, l)
}

// write prints the table; nothing if no table finished.
func (s *summaryTable) write(w io.Writer) {
	if len(s.lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Summary\n\n")
	fmt.Fprintf(w, "| RTT | size | dir | sftp(1) | sluice | sluice/sftp(1) | %d × plain `dd` | sluice/plain | rounds |\n", s.plainPar)
	fmt.Fprintln(w, "|--:|--:|---|--:|--:|--:|--:|--:|--:|")
	for _, l := range s.lines {
		fmt.Fprintf(w, "| %s |\n", strings.Join([]string{formatRTT(l.rtt), l.what, string(l.dir),
			l.sftp, l.sluice, l.ratio, l.par, l.parRatio, fmt.Sprint(l.rounds)}, " | "))
	}
	fmt.Fprintf(w, "\nMiB/s (tree lines: files/s) of the client process's wall time, median over rounds; ratios taken round by round, then the median (> 1: sluice is faster). %d × plain `dd` is %d SSH connections each moving 1/%d of the file with no SFTP. \\* a bound: a transfer ran into -timeout.\n", s.plainPar, s.plainPar, s.plainPar)
}
