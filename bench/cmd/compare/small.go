package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The small-call case (-case small): calls per second and round trips per call of
// the everyday calls (Stat, Open, ReadFile and WriteFile of 4 KiB, ReadDir of 20
// entries, Remove, Rename, Mkdir), made by 1, 16 and 64 goroutines sharing one
// client, sluice and pkg/sftp side by side. Each cell (call, goroutine count) runs
// every client once per round, in alternating order, each in a child process of its
// own on a fresh connection for -small-time. Round trips per call are the mean time
// of one call over the RTT; behind the proxy at one goroutine, that is the round
// trips the call costs. The server's CPU (every sftp-server process of the
// connection) is sampled from /proc around the timed part, so the tables show how
// close a cell at RTT 0 runs to the single-threaded server's limit.

const (
	smallSluice  = "sluice"
	smallPkgSFTP = "pkgsftp-tuned"
	// smallBefore is sluice as built into the binary -small-before names: an earlier
	// version, measured in the same run (its child runs with client smallSluice).
	smallBefore = "sluice-before"
)

// smallClientTitles names the clients of the small-call case, in table order. Every
// ratio divides the first one's calls/s by another's.
var smallClientTitles = []struct{ id, title string }{
	{smallSluice, "sluice"},
	{smallPkgSFTP, "pkg/sftp"},
	{smallBefore, "sluice before"},
}

// smallOptions shape the small-call case.
type smallOptions struct {
	ops        []smallOp
	goroutines []int
	duration   time.Duration
	// beforeExe is a build of this harness with an earlier sluice (-small-before),
	// run as one more client so that before and after alternate in one run.
	beforeExe string
}

// smallClientsFor lists the clients a run measures, in table order.
func smallClientsFor(o smallOptions) []string {
	var clients []string
	for _, c := range smallClientTitles {
		if smallClients[c.id] != nil || (c.id == smallBefore && o.beforeExe != "") {
			clients = append(clients, c.id)
		}
	}
	return clients
}

// parse reads -small-ops and -small-goroutines, and checks -small-time.
func (o *smallOptions) parse(ops, goroutines string) error {
	var err error
	if o.ops, err = parseSmallOps(ops); err != nil {
		return err
	}
	if o.goroutines, err = parseGoroutines(goroutines); err != nil {
		return err
	}
	if o.duration < 500*time.Millisecond || o.duration > 5*time.Minute {
		return fmt.Errorf("-small-time %v: want 500ms to 5m", o.duration)
	}
	return nil
}

// parseSmallOps reads -small-ops: "all" or a list of operations.
func parseSmallOps(spec string) ([]smallOp, error) {
	if spec == "all" {
		return slices.Clone(smallOps), nil
	}
	var out []smallOp
	for _, s := range strings.Split(spec, ",") {
		op := smallOp(strings.TrimSpace(s))
		if !slices.Contains(smallOps, op) {
			return nil, fmt.Errorf("-small-ops %q: want some of %v, or all", s, smallOps)
		}
		if !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	return out, nil
}

// parseGoroutines reads -small-goroutines.
func parseGoroutines(spec string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("-small-goroutines %q: want counts from 1 to 256", s)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// removePool is how many files each goroutine of a Remove cell gets: more than it can
// remove in the cell's time. A Remove is at least one round trip behind the proxy; at
// RTT 0 one goroutine makes fewer than 15000 calls/s, and all of them together fewer
// than 60000 (about 30000 were seen on two cores).
func removePool(rtt, d time.Duration, goroutines int) int {
	if rtt > 0 {
		return int(d/rtt)*5/4 + 16
	}
	return int(min(15000, 60000/float64(goroutines))*d.Seconds()) + 16
}

// smallCell is one cell's measurements: per client, one per round.
type smallCell struct {
	op         smallOp
	goroutines int
	res        map[string][]smallMeasure
	failed     map[string]error
}

// smallMeasure is one run of a cell by one client.
type smallMeasure struct {
	smallResult
	round int
	// sftpCPU and sshdCPU are the CPU seconds the connection's sftp-server processes
	// and its sshd processes used during the timed calls.
	sftpCPU, sshdCPU float64
}

// perCall is seconds of CPU over the calls made, in µs.
func (m smallMeasure) perCall(seconds float64) float64 {
	if m.Calls == 0 {
		return 0
	}
	return seconds / float64(m.Calls) * 1e6
}

// procCPU is one server process's CPU time so far.
type procCPU struct {
	cpu        time.Duration
	sftpServer bool
}

// busy is the fraction of one core that seconds of CPU are over the timed calls.
func (m smallMeasure) busy(seconds float64) float64 {
	if m.Seconds <= 0 {
		return 0
	}
	return seconds / m.Seconds
}

// smallTable runs the small-call case at one RTT and prints its table.
func (h *harness) smallTable(ctx context.Context, rtt time.Duration, deadline time.Time, out, progress io.Writer) error {
	cfg := h.cfg
	clients := smallClientsFor(cfg.small)
	addr, where, closeLink, err := h.link(rtt, false)
	if err != nil {
		return err
	}
	defer closeLink()
	var cells []*smallCell
	stopped := false
	for _, op := range cfg.small.ops {
		for _, g := range cfg.small.goroutines {
			cell := &smallCell{op: op, goroutines: g, res: map[string][]smallMeasure{}, failed: map[string]error{}}
			cells = append(cells, cell)
			if stopped = h.smallRounds(ctx, cell, clients, rtt, addr, deadline, progress); stopped {
				break
			}
		}
		if stopped {
			break
		}
	}
	writeSmallTable(out, fmt.Sprintf("small calls, RTT %s (%s), %v per cell, %d round(s)",
		formatRTT(rtt), where, cfg.small.duration, cfg.rounds), rtt, clients, cells)
	if stopped {
		return errStopped
	}
	return nil
}

// smallRounds runs one cell's rounds, alternating the clients' order, and reports
// whether the deadline or a signal stopped it.
func (h *harness) smallRounds(ctx context.Context, cell *smallCell, clients []string, rtt time.Duration, addr string, deadline time.Time, progress io.Writer) bool {
	cfg := h.cfg
	for round := range cfg.rounds {
		order := slices.Clone(clients)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, client := range order {
			if ctx.Err() != nil || time.Now().After(deadline) {
				return true
			}
			if cell.failed[client] != nil {
				continue
			}
			dir := filepath.Join(h.env.work, fmt.Sprintf("small-%s-%s-%d-%d", client, cell.op, cell.goroutines, round))
			j := &job{Addr: addr, User: h.env.sshd.User, KeyFile: h.env.sshd.KeyFile, HostKey: h.env.hostKey,
				Timeout: cfg.small.duration + cfg.timeout,
				Small: &smallJob{Client: client, Op: cell.op, Goroutines: cell.goroutines, Duration: cfg.small.duration,
					Dir: dir, Pool: removePool(rtt, cfg.small.duration, cell.goroutines)}}
			exe := h.exe
			if client == smallBefore {
				exe, j.Small.Client = cfg.small.beforeExe, smallSluice
			}
			m, err := h.smallChild(ctx, exe, j)
			_ = os.RemoveAll(dir)
			if err != nil {
				cell.failed[client] = fmt.Errorf("round %d: %w", round+1, err)
				fmt.Fprintf(progress, "small rtt=%s %s %s g=%d: %v\n", formatRTT(rtt), client, cell.op, cell.goroutines, err)
				continue
			}
			m.round = round
			cell.res[client] = append(cell.res[client], m)
			if cfg.verbose {
				fmt.Fprintf(progress, "small rtt=%s %-13s %-9s g=%-3d round %d: %8.1f calls/s, mean %v, median %v, CPU sftp-server %.0f%% sshd %.0f%% client %.0f%%\n",
					formatRTT(rtt), client, cell.op, cell.goroutines, round+1, m.rate(), m.latency().Round(time.Microsecond), m.median().Round(time.Microsecond),
					100*m.busy(m.sftpCPU), 100*m.busy(m.sshdCPU), 100*m.busy(m.ClientCPUSeconds))
			}
		}
	}
	return false
}

// smallChild runs one cell for one client in a child process. The child says "ready"
// once connected and warmed up, and starts its calls when told; the server's CPU is
// sampled at that moment and again when the child reports, while its connection (and
// so its sftp-server processes) is still up; then the child is let go.
func (h *harness) smallChild(ctx context.Context, exe string, j *job) (smallMeasure, error) {
	spec, err := json.Marshal(j)
	if err != nil {
		return smallMeasure{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, exe, childFlag+string(spec))
	stderr := &cappedBuffer{max: 16 << 10}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return smallMeasure{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return smallMeasure{}, err
	}
	killTreeOnCancel(cmd)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return smallMeasure{}, err
	}
	m, err := h.smallTalk(bufio.NewReader(stdout), stdin)
	_ = stdin.Close()
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return smallMeasure{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return m, nil
}

// smallTalk is the harness's side of the child's protocol (smallChildMain).
func (h *harness) smallTalk(out *bufio.Reader, in io.Writer) (smallMeasure, error) {
	line, err := out.ReadString('\n')
	if err != nil || line != "ready\n" {
		return smallMeasure{}, fmt.Errorf("child did not get ready (%q, %v)", line, err)
	}
	pid := h.env.sshd.Pid()
	before := serverCPU(pid)
	if _, err := io.WriteString(in, "go\n"); err != nil {
		return smallMeasure{}, err
	}
	line, err = out.ReadString('\n')
	after := serverCPU(pid)
	if err != nil {
		return smallMeasure{}, fmt.Errorf("child reported nothing (%v)", err)
	}
	var m smallMeasure
	if err := json.Unmarshal([]byte(line), &m.smallResult); err != nil {
		return smallMeasure{}, fmt.Errorf("child output %q: %v", line, err)
	}
	var sftp, sshd time.Duration
	for p, t := range after {
		d := t.cpu - before[p].cpu
		if t.sftpServer {
			sftp += d
		} else {
			sshd += d
		}
	}
	m.sftpCPU, m.sshdCPU = sftp.Seconds(), sshd.Seconds()
	return m, nil
}

// smallChildMain is childMain for a small-call job: prepare the cell's files, connect,
// warm up, say "ready", wait for "go", run, report, and hold the connection until the
// harness closes stdin.
func smallChildMain(j *job) int {
	s := j.Small
	mk := smallClients[s.Client]
	if mk == nil {
		fmt.Fprintf(os.Stderr, "child: no client %q in this build\n", s.Client)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout)
	defer cancel()
	if err := prepareSmall(s, smallContent()); err != nil {
		fmt.Fprintln(os.Stderr, "child: prepare:", err)
		return 1
	}
	conn, err := dial(ctx, j)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: dial:", err)
		return 1
	}
	defer conn.Close()
	c, err := mk(ctx, conn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: client:", err)
		return 1
	}
	defer c.close()
	in := bufio.NewReader(os.Stdin)
	res, err := runSmall(ctx, c, s, func() error {
		if _, err := fmt.Fprintln(os.Stdout, "ready"); err != nil {
			return err
		}
		line, err := in.ReadString('\n')
		if err == nil && line != "go\n" {
			err = fmt.Errorf("harness said %q", line)
		}
		return err
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "child: %s %s x%d: %v\n", s.Client, s.Op, s.Goroutines, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, in) // until the harness has sampled the server
	return 0
}

// writeSmallTable prints one row per cell: medians over rounds of calls/s and of the
// mean call time (in round trips behind the proxy), the median per-round ratio of
// sluice's calls/s to pkg/sftp's, and the server's CPU.
func writeSmallTable(w io.Writer, heading string, rtt time.Duration, clients []string, cells []*smallCell) {
	fmt.Fprintf(w, "\n### %s\n\n", heading)
	fmt.Fprintln(w, "Each client makes the call in a loop on every goroutine, all on one connection and one client. "+
		"ReadFile/WriteFile: 4 KiB; ReadDir: 20 entries; Open is timed alone, and its loop also closes the file (untimed, one more round trip). "+
		"pkg/sftp: Open+io.ReadAll+Close for ReadFile, OpenFile(O_WRONLY|O_CREATE|O_TRUNC)+Write+Close for WriteFile.")
	if rtt > 0 {
		fmt.Fprintln(w, "RTTs/call = median time of one call / RTT (mean in parentheses). floor×0.9 = 0.9 × goroutines / (fewest round trips of the loop × RTT), the 64-goroutine target.")
	} else {
		fmt.Fprintln(w, "µs/call = median time of one call (mean in parentheses).")
	}
	fmt.Fprintln(w, "CPU µs/call = CPU time of the timed calls over the calls made, as sftp-server / sshd / client (all three share the machine's cores, with whatever else runs). "+
		"server bound = 10⁶ / sftp-server's µs/call: the calls/s the single-threaded sftp-server could serve with a core to itself.")
	fmt.Fprintln(w)
	per := "µs/call"
	if rtt > 0 {
		per = "RTTs/call"
	}
	head := []string{"call", "goroutines"}
	for _, c := range clients {
		head = append(head, smallTitle(c)+" calls/s")
	}
	for _, c := range clients[min(1, len(clients)):] {
		head = append(head, smallTitle(clients[0])+"/"+smallTitle(c))
	}
	for _, c := range clients {
		head = append(head, smallTitle(c)+" "+per)
	}
	if rtt > 0 {
		head = append(head, "floor×0.9 calls/s")
	}
	for _, c := range clients {
		head = append(head, smallTitle(c)+" CPU µs/call")
	}
	for _, c := range clients {
		head = append(head, smallTitle(c)+" server bound")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("--:|", len(head)))
	for _, cell := range cells {
		fmt.Fprintln(w, smallRow(cell, rtt, clients))
	}
	var failed []string
	for _, cell := range cells {
		for _, c := range clients {
			if err := cell.failed[c]; err != nil {
				failed = append(failed, fmt.Sprintf("- %s %s ×%d: %v", smallTitle(c), cell.op, cell.goroutines, err))
			}
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFailed cells:\n%s\n", strings.Join(failed, "\n"))
	}
}

func smallTitle(id string) string {
	for _, c := range smallClientTitles {
		if c.id == id {
			return c.title
		}
	}
	return id
}

// smallRow formats one cell of writeSmallTable.
func smallRow(cell *smallCell, rtt time.Duration, clients []string) string {
	med := medianBy[smallMeasure]
	fields := []string{string(cell.op), strconv.Itoa(cell.goroutines)}
	for _, c := range clients {
		v, ok := med(cell.res[c], smallMeasure.rate)
		fields = append(fields, smallCellText(v, ok, 0, exhausted(cell.res[c])))
	}
	for _, c := range clients[min(1, len(clients)):] {
		v, ok := median(smallRatios(cell.res[clients[0]], cell.res[c]))
		fields = append(fields, smallCellText(v, ok, 2, false))
	}
	unit, prec := float64(time.Microsecond), 0
	if rtt > 0 {
		unit, prec = float64(rtt), 2
	}
	for _, c := range clients {
		p50, ok := med(cell.res[c], func(m smallMeasure) float64 { return float64(m.median()) / unit })
		mean, _ := med(cell.res[c], func(m smallMeasure) float64 { return float64(m.latency()) / unit })
		s := smallCellText(p50, ok, prec, false)
		if ok {
			s += " (" + smallCellText(mean, ok, prec, false) + ")"
		}
		fields = append(fields, s)
	}
	if rtt > 0 {
		fields = append(fields, fmt.Sprintf("%.0f", 0.9*float64(cell.goroutines)/(float64(smallFloor[cell.op])*rtt.Seconds())))
	}
	for _, c := range clients {
		sftp, ok := med(cell.res[c], func(m smallMeasure) float64 { return m.perCall(m.sftpCPU) })
		sshd, _ := med(cell.res[c], func(m smallMeasure) float64 { return m.perCall(m.sshdCPU) })
		client, _ := med(cell.res[c], func(m smallMeasure) float64 { return m.perCall(m.ClientCPUSeconds) })
		s := ""
		if ok {
			s = fmt.Sprintf("%.0f / %.0f / %.0f", sftp, sshd, client)
		}
		fields = append(fields, s)
	}
	for _, c := range clients {
		sftp, ok := med(cell.res[c], func(m smallMeasure) float64 { return m.perCall(m.sftpCPU) })
		s := ""
		if ok && sftp > 0 {
			s = fmt.Sprintf("%.0f", 1e6/sftp)
		}
		fields = append(fields, s)
	}
	return "| " + strings.Join(fields, " | ") + " |"
}

// smallRatios pairs a's and b's runs by round and returns a's rate over b's for each.
func smallRatios(a, b []smallMeasure) []float64 {
	var out []float64
	for _, x := range a {
		for _, y := range b {
			if x.round == y.round && y.rate() > 0 {
				out = append(out, x.rate()/y.rate())
			}
		}
	}
	return out
}

func exhausted(ms []smallMeasure) bool {
	return slices.ContainsFunc(ms, func(m smallMeasure) bool { return m.Exhausted })
}

// smallCellText prints v with prec decimals, "" when there is none, and a "*" when a
// run ran out of files to remove (its rate is then a lower bound).
func smallCellText(v float64, ok bool, prec int, bound bool) string {
	if !ok {
		return ""
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if bound {
		s += "*"
	}
	return s
}
