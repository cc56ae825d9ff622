package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// errStopped reports a run cut short by -deadline or a signal; the tables printed so far
// stand, the last one may be partial.
var errStopped = errors.New("stopped before the end (deadline or interrupt); the last table may be partial")

// run sets up the server, then for each case (the big file first, then the tree), RTT
// and direction runs every row that takes part once per round and prints that table as
// soon as it is complete.
func run(ctx context.Context, cfg *config, out, progress io.Writer) error {
	if err := sshdtest.SSHDUsable(); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	h := &harness{cfg: cfg, exe: exe}
	rows := slices.Clone(cfg.rows)
	if i := slices.IndexFunc(rows, func(r *row) bool { return r.transfer == nil }); i >= 0 {
		if h.sftpPath, err = exec.LookPath("sftp"); err != nil {
			fmt.Fprintln(progress, "compare: OpenSSH sftp(1) not installed; leaving its row out")
			rows = slices.Delete(rows, i, i+1)
		}
	}
	if len(rows) == 0 {
		return errors.New("no rows to run")
	}
	h.timePath = findGNUTime()
	if h.timePath == "" {
		fmt.Fprintln(progress, "compare: GNU time not found (apt-get install time); peak RSS will not be reported")
	}
	if cfg.summary {
		h.summary = &summaryTable{plainPar: cfg.plainPar}
		defer func() { h.summary.write(out) }()
	}
	if h.env, err = newEnv(cfg.workRoot, cfg.maxSessions); err != nil {
		return err
	}
	defer h.env.close()
	writeHeader(out, cfg, h, rows)

	deadline := time.Now().Add(cfg.deadline)
	for _, c := range cfg.cases {
		if table := h.ownTable(c); table != nil {
			for _, rtt := range cfg.rtts {
				if err := table(ctx, rtt, deadline, out, progress); err != nil {
					return err
				}
			}
			continue
		}
		var crows []*row
		for _, r := range rows {
			if r.runs(c) {
				crows = append(crows, r)
			}
		}
		if c == casePipe && !slices.ContainsFunc(crows, func(r *row) bool { return r.pipe }) {
			fmt.Fprintln(progress, "compare: no pipe row in this run (a -tags nosluice build, or -rows); leaving the pipe case out")
			continue
		}
		if len(crows) == 0 {
			fmt.Fprintf(progress, "compare: no row of this run copies a %s; leaving that case out\n", c)
			continue
		}
		for _, rtt := range cfg.rtts {
			if err := h.tables(ctx, c, crows, rtt, deadline, out, progress); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownTable is the table function of a case with rows of its own (soak, small,
// service), or
// nil for the cases that run the registered rows.
func (h *harness) ownTable(c benchCase) func(ctx context.Context, rtt time.Duration, deadline time.Time, out, progress io.Writer) error {
	switch c {
	case caseSoak:
		return h.soakTable
	case caseSmall:
		return h.smallTable
	case caseService:
		return h.serviceTable
	}
	return nil
}

// link is how a table's clients at rtt reach sshd: directly, or through a delay proxy
// of rtt/2 each way, which closeLink stops; where says which for the heading. With
// knownHost the proxy's address goes into the known_hosts file ssh(1) reads.
func (h *harness) link(rtt time.Duration, knownHost bool) (addr, where string, closeLink func(), err error) {
	if rtt <= 0 {
		return h.env.sshd.Addr, "direct", func() {}, nil
	}
	proxy, err := delayproxy.New(h.env.sshd.Addr, rtt/2)
	if err != nil {
		return "", "", nil, err
	}
	if knownHost {
		if err := h.env.addKnownHost(proxy.Addr()); err != nil {
			_ = proxy.Close()
			return "", "", nil, err
		}
	}
	return proxy.Addr(), fmt.Sprintf("delay proxy, %v each way", rtt/2), func() { _ = proxy.Close() }, nil
}

// tables runs case c at one RTT, one table per size and direction, printing each as soon
// as it is complete.
func (h *harness) tables(ctx context.Context, c benchCase, rows []*row, rtt time.Duration, deadline time.Time, out, progress io.Writer) error {
	cfg := h.cfg
	addr, where, closeLink, err := h.link(rtt, true)
	if err != nil {
		return err
	}
	defer closeLink()
	sizes := cfg.sizesFor(rtt)
	if c == caseTree {
		sizes = sizes[:1] // the tree's shape sets its size
	}
	for _, size := range sizes {
		w := &workload{c: c, size: size}
		what := formatSize(w.size)
		if c == caseTree {
			shape := cfg.tree
			shape.files = cfg.treeFilesFor(rtt)
			t, err := h.env.tree(shape)
			if err != nil {
				return err
			}
			w.tree, w.size, what = t, t.size(), t.describe()
		} else if _, err := h.env.source(w.size); err != nil {
			return err
		}
		if c == casePipe {
			what += ", pipe clients"
		}
		for _, dir := range cfg.dirs {
			res, rounds, stopped := h.table(ctx, w, rowsFor(rows, dir), rtt, dir, addr, deadline, progress)
			res.write(out, cfg, fmt.Sprintf("%s, RTT %s (%s), %s, %d round(s)", dir, formatRTT(rtt), where, what, rounds))
			if h.summary != nil && c != casePipe {
				h.summary.add(res, rtt, dir, rounds)
			}
			if stopped {
				return errStopped
			}
		}
	}
	return nil
}

// table runs the rounds of one table and returns its results, the rounds it started,
// and whether the deadline or a signal cut it short.
func (h *harness) table(ctx context.Context, w *workload, rows []*row, rtt time.Duration, dir direction, addr string, deadline time.Time, progress io.Writer) (res *results, rounds int, stopped bool) {
	cfg := h.cfg
	res = newResults(rows, cfg.rounds, w.size, cfg.timeout)
	if w.tree != nil {
		res = newTreeResults(rows, cfg.rounds, w.tree, cfg.timeout)
	}
	if w.c == casePipe {
		res.setBase(pipeBaseRow(rows))
	}
	start := time.Now()
	for round := range cfg.rounds {
		if round > 0 && cfg.tableBudget > 0 && time.Since(start) >= cfg.tableBudget {
			break
		}
		rounds++
		// Alternate the order so that no row always runs right after the
		// same neighbour (page cache, CPU frequency, sshd's state).
		order := slices.Clone(rows)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range order {
			if ctx.Err() != nil || time.Now().After(deadline) {
				return res, rounds, true
			}
			// A row that ran into -timeout already shows a bound; running it again
			// would only spend another -timeout on the same bound.
			if res.timedOut(r) {
				continue
			}
			res.set(r, round, h.run(ctx, r, dir, addr, w, round))
			if cfg.verbose {
				fmt.Fprintln(progress, progressLine(res, r, round, dir, rtt))
			}
		}
	}
	return res, rounds, false
}

func writeHeader(w io.Writer, cfg *config, h *harness, rows []*row) {
	e := h.env
	fmt.Fprintf(w, "## sluice comparison, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- machine: %d CPUs, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(w, "- server: %s on %s, sftp-server %s, login %s, files in %s", opensshVersion(), e.sshd.Addr, sshdtest.SFTPServerPath(), e.sshd.User, e.work)
	if !e.onTmpfs {
		fmt.Fprint(w, " (NOT tmpfs: disk I/O is in the figures)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- every client on %s; rows run in alternating order, %d round(s) each\n", sshdtest.CipherAES128GCM, cfg.rounds)
	if slices.Contains(cfg.cases, caseFile) {
		fmt.Fprintln(w, "- MiB/s = bytes / wall time of the client process (connect, authenticate, transfer, close), the same clock for every row")
	}
	if slices.Contains(cfg.cases, caseTree) {
		count := fmt.Sprintf("%d files of %s in %d dirs", cfg.tree.files, formatSize(cfg.tree.fileSize), cfg.tree.dirs)
		if cfg.tree.files == 0 {
			count = fmt.Sprintf("files of %s in %d dirs, %d at RTT 0 and %d behind the proxy (sftp(1) pays several round trips per file; see -tree-files)",
				formatSize(cfg.tree.fileSize), cfg.tree.dirs, cfg.treeFilesFor(0), cfg.treeFilesFor(time.Millisecond))
		}
		fmt.Fprintf(w, "- tree case: %s; files/s = files / wall time of the client process (connect, authenticate, copy, close), the same clock for every row; rows without a recursive copy are left out\n", count)
		fmt.Fprintln(w, "- tree case: sftp(1) runs get -r / put -r; sluice runs Get / Put with Recursive(); every copy is counted and compared file by file")
	}
	if r := findIn(rows, "plain-par"); r != nil {
		fmt.Fprintf(w, "- %s: %d x/crypto SSH connections at once, each running dd over 1/%d of the file (no SFTP): what the link and cores carry with %d windows and %d cipher streams\n",
			r.title, cfg.plainPar, cfg.plainPar, cfg.plainPar, cfg.plainPar)
	}
	if slices.Contains(cfg.cases, casePipe) {
		fmt.Fprintln(w, "- pipe case: sluice NewClientPipe over OpenSSH `ssh -s sftp` processes (same key and options as sftp(1)); ratios there divide the pipe-opener row's rate (or the one-pipe row's without it); CPU and RSS include the ssh processes")
	}
	if slices.Contains(cfg.cases, caseService) {
		fmt.Fprintf(w, "- service case: %d transfers of %s at once on one client; MiB/s = all bytes / first start to last end; peak RSS = the child's own VmHWM, goroutines and Go heap sampled by the child\n",
			cfg.service.transfers, formatSize(cfg.service.size))
	}
	fmt.Fprintf(w, "- sshd MaxSessions %d (room for the fixed-channel rows; OpenSSH's default is 10)\n", cfg.maxSessions)
	if findIn(rows, sluiceDefaultID) != nil {
		fmt.Fprintln(w, "- sluice/row = sluice default rate / row rate (MiB/s, or files/s) in the same round, median over rounds (> 1: sluice is faster)")
	} else {
		fmt.Fprintln(w, "- sluice/row: not available, the sluice default row is not in this run")
	}
	if h.timePath != "" {
		fmt.Fprintln(w, "- peak RSS and CPU (user+sys) of the client process from GNU time; for sftp(1) they include its ssh child (RSS: the larger of the two)")
	} else {
		fmt.Fprintln(w, "- CPU (user+sys) of the client process from rusage; peak RSS not measured (GNU time not installed)")
	}
}

// findGNUTime returns the path of a time(1) that takes -o and -f (GNU time, Debian
// package "time"), or "".
func findGNUTime() string {
	p, err := exec.LookPath("time")
	if err != nil {
		return ""
	}
	if exec.Command(p, "-o", os.DevNull, "-f", "%M", "true").Run() != nil {
		return ""
	}
	return p
}

// opensshVersion asks the ssh client, which is installed alongside sshd and prints the
// same version string (sshd has no version flag).
func opensshVersion() string {
	out, err := exec.Command("ssh", "-V").CombinedOutput()
	if err != nil {
		return "OpenSSH sshd"
	}
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), ",")
	return v + " sshd"
}

func formatRTT(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}
