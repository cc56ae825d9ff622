package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// The soak case: small-call latency under bulk load on one Client. Many goroutines
// share one sluice Client for a bounded time; half call Stat in a loop and time each
// call, the other half read a 4 MiB file over and over. The row without the bulk half
// is the baseline: what a Stat costs on that link with nothing else going on. A client
// whose small calls queue behind bulk data shows a Stat p50 of several round trips in
// the bulk row (issue 11, item 4: about six at 50 ms); one that keeps them apart stays
// near one.

// soakBulkSize is the file the bulk goroutines read: under stripeMin, so each read is
// one lane, the way many small transfers at once load a client.
const soakBulkSize = 4 << 20

// soakJob is what a soak child runs: the connection as in job, and the workload.
type soakJob struct {
	Bulk     bool          `json:"bulk"`     // run the bulk half as well
	Workers  int           `json:"workers"`  // goroutines in all; half of them Stat
	Duration time.Duration `json:"duration"` // how long the goroutines run
	StatPath string        `json:"stat_path"`
	BulkPath string        `json:"bulk_path"`
}

// soakResult is the soak child's one line of output.
type soakResult struct {
	Stats     int     `json:"stats"`
	StatP50Ms float64 `json:"stat_p50_ms"`
	StatP90Ms float64 `json:"stat_p90_ms"`
	StatP99Ms float64 `json:"stat_p99_ms"`
	BulkBytes int64   `json:"bulk_bytes"`
	Seconds   float64 `json:"seconds"`
}

// soakWorkload runs a soakJob on a new connection; set by soak_sluice.go, nil when the
// sluice package is left out of the build (-tags nosluice).
var soakWorkload func(ctx context.Context, j *job) (soakResult, error)

// soakRow is one row of the soak table.
type soakRow struct {
	title string
	bulk  bool
}

var soakRows = []soakRow{
	{"sluice default, Stat only", false},
	{"sluice default, Stat + 4 MiB reads", true},
}

// soakTable runs the soak case at one RTT, each row once per round in alternating
// order, and prints its table.
func (h *harness) soakTable(ctx context.Context, rtt time.Duration, deadline time.Time, out, progress io.Writer) error {
	cfg := h.cfg
	if soakWorkload == nil {
		fmt.Fprintln(progress, "compare: this build has no sluice rows; leaving the soak case out")
		return nil
	}
	bulkPath, err := h.env.source(soakBulkSize)
	if err != nil {
		return err
	}
	addr, where, closeLink, err := h.link(rtt, false)
	if err != nil {
		return err
	}
	defer closeLink()
	results := make([][]soakResult, len(soakRows))
	stopped := false
	for round := range cfg.rounds {
		order := []int{0, 1}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			if ctx.Err() != nil || time.Now().After(deadline) {
				stopped = true
				break
			}
			j := &job{Addr: addr, User: h.env.sshd.User, KeyFile: h.env.sshd.KeyFile, HostKey: h.env.hostKey,
				Timeout: cfg.soak.duration + time.Minute,
				Soak: &soakJob{Bulk: soakRows[i].bulk, Workers: cfg.soak.workers, Duration: cfg.soak.duration,
					StatPath: h.env.work, BulkPath: bulkPath}}
			res, err := h.soakChild(ctx, j)
			if err != nil {
				return fmt.Errorf("soak, %s, round %d: %w", soakRows[i].title, round+1, err)
			}
			results[i] = append(results[i], res)
			if cfg.verbose {
				fmt.Fprintf(progress, "soak rtt=%s %s round %d: %d Stats, p50 %.1f ms, p90 %.1f ms, bulk %.1f MiB/s\n",
					formatRTT(rtt), soakRows[i].title, round+1, res.Stats, res.StatP50Ms, res.StatP90Ms, res.bulkRate())
			}
		}
		if stopped {
			break
		}
	}
	writeSoakTable(out, fmt.Sprintf("soak, RTT %s (%s), %d goroutines for %v, %d round(s)",
		formatRTT(rtt), where, cfg.soak.workers, cfg.soak.duration, cfg.rounds), rtt, cfg.soak.workers, results)
	if stopped {
		return errStopped
	}
	return nil
}

func (r soakResult) bulkRate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.BulkBytes) / (1 << 20) / r.Seconds
}

// soakChild runs one soak in a child process, so that its Client shares a runtime with
// neither the harness nor the delay proxy.
func (h *harness) soakChild(ctx context.Context, j *job) (soakResult, error) {
	var res soakResult
	if err := h.childJSON(ctx, j, &res); err != nil {
		return soakResult{}, err
	}
	if res.Stats == 0 {
		return soakResult{}, errors.New("the soak made no Stat call")
	}
	return res, nil
}

// soakChildMain is childMain for a soak job.
func soakChildMain(j *job) int {
	if soakWorkload == nil {
		fmt.Fprintln(os.Stderr, "child: no sluice in this build")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout)
	defer cancel()
	res, err := soakWorkload(ctx, j)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: soak:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// writeSoakTable prints the medians over rounds of each row's figures, latencies also
// in round trips.
func writeSoakTable(w io.Writer, heading string, rtt time.Duration, workers int, results [][]soakResult) {
	fmt.Fprintf(w, "\n### %s\n\n", heading)
	fmt.Fprintf(w, "%d goroutines call Stat in a loop; in the bulk row %d more read a %s file in a loop (ReadFile).\n\n",
		workers/2, workers-workers/2, formatSize(soakBulkSize))
	fmt.Fprintln(w, "| row | Stats | Stat p50 ms | Stat p90 ms | Stat p99 ms | p50 RTTs | p90 RTTs | bulk MiB/s |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for i, row := range soakRows {
		rs := results[i]
		if len(rs) == 0 {
			fmt.Fprintf(w, "| %s | | | | | | | |\n", row.title)
			continue
		}
		med := func(f func(soakResult) float64) float64 {
			v, _ := medianBy(rs, f)
			return v
		}
		p50 := med(func(r soakResult) float64 { return r.StatP50Ms })
		p90 := med(func(r soakResult) float64 { return r.StatP90Ms })
		p99 := med(func(r soakResult) float64 { return r.StatP99Ms })
		stats := med(func(r soakResult) float64 { return float64(r.Stats) })
		inRTT := func(ms float64) string {
			if rtt <= 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", ms/(float64(rtt)/float64(time.Millisecond)))
		}
		bulk := "–"
		if row.bulk {
			bulk = fmt.Sprintf("%.1f", med(soakResult.bulkRate))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %.1f | %.1f | %s | %s | %s |\n",
			row.title, stats, p50, p90, p99, inRTT(p50), inRTT(p90), bulk)
	}
}

// percentile returns the p-th percentile (0 < p <= 1) of sorted samples, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}
