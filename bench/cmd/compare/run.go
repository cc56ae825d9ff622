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

// run sets up the server, then for each RTT and direction runs every row once per round
// and prints that table as soon as it is complete.
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
	if h.env, err = newEnv(cfg.workRoot); err != nil {
		return err
	}
	defer h.env.close()
	writeHeader(out, cfg, h, rows)

	deadline := time.Now().Add(cfg.deadline)
	for _, rtt := range cfg.rtts {
		size := cfg.sizeFor(rtt)
		if _, err := h.env.source(size); err != nil {
			return err
		}
		addr, where := h.env.sshd.Addr, "direct"
		var proxy *delayproxy.Proxy
		if rtt > 0 {
			if proxy, err = delayproxy.New(h.env.sshd.Addr, rtt/2); err != nil {
				return err
			}
			if err := h.env.addKnownHost(proxy.Addr()); err != nil {
				_ = proxy.Close()
				return err
			}
			addr, where = proxy.Addr(), fmt.Sprintf("delay proxy, %v each way", rtt/2)
		}
		stopped := false
		for _, dir := range cfg.dirs {
			res := newResults(rows, cfg.rounds, size, cfg.timeout)
			for round := range cfg.rounds {
				// Alternate the order so that no row always runs right after the
				// same neighbour (page cache, CPU frequency, sshd's state).
				order := slices.Clone(rows)
				if round%2 == 1 {
					slices.Reverse(order)
				}
				for _, r := range order {
					if ctx.Err() != nil || time.Now().After(deadline) {
						stopped = true
						break
					}
					res.set(r, round, h.run(ctx, r, dir, addr, size, round))
					if cfg.verbose {
						fmt.Fprintln(progress, progressLine(res, r, round, dir, rtt))
					}
				}
			}
			res.write(out, cfg, fmt.Sprintf("%s, RTT %s (%s), %s, %d round(s)", dir, formatRTT(rtt), where, formatSize(size), cfg.rounds))
			if stopped {
				break
			}
		}
		if proxy != nil {
			_ = proxy.Close()
		}
		if stopped {
			return errStopped
		}
	}
	return nil
}

func writeHeader(w io.Writer, cfg *config, h *harness, rows []*row) {
	e := h.env
	fmt.Fprintf(w, "## sluice comparison, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- machine: %d CPUs, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(w, "- server: %s on %s, sftp-server %s, files in %s", opensshVersion(), e.sshd.Addr, sshdtest.SFTPServerPath(), e.work)
	if !e.onTmpfs {
		fmt.Fprint(w, " (NOT tmpfs: disk I/O is in the figures)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- every client on %s; rows run in alternating order, %d round(s) each\n", sshdtest.CipherAES128GCM, cfg.rounds)
	fmt.Fprintln(w, "- MiB/s = bytes / wall time of the client process (connect, authenticate, transfer, close), the same clock for every row")
	if findIn(rows, sluiceDefaultID) != nil {
		fmt.Fprintln(w, "- sluice/row = sluice default MiB/s / row MiB/s in the same round, median over rounds (> 1: sluice is faster)")
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
