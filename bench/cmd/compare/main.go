// Command compare measures sluice against the SFTP clients people actually use, side by
// side in one run, as docs/benchmarking.md prescribes: a private OpenSSH sshd on loopback
// serving files from tmpfs, an optional user-space delay proxy for RTT, every client on
// aes128-gcm@openssh.com, clients alternated round by round, and ratios computed per
// round so that the machine's drift cancels out.
//
// Each Go client runs in a child process of this binary so that its peak RSS and CPU time
// are its own; OpenSSH sftp(1) is measured the same way through its own process.
//
//	go run ./cmd/compare -size 64MiB -rounds 1           # smoke check
//	go run ./cmd/compare -rtt 0,10ms,50ms                # the full comparison
//	go run ./cmd/compare -case tree -rtt 0,50ms          # many small files only
//	go run ./cmd/compare -case soak -rtt 50ms            # Stat latency under bulk reads
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// A child re-executed by the harness carries its job in -child=JSON as the first
	// argument; it is deliberately not a registered flag, so -h does not offer it.
	if spec, ok := childArg(os.Args[1:]); ok {
		os.Exit(childMain(spec))
	}
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		stop()
		os.Exit(1)
	}
}

// config is everything the flags decide.
type config struct {
	sizes    []int64 // nil: 1 GiB at RTT 0, 256 MiB behind the proxy
	cases    []benchCase
	tree     treeShape // files 0: 1000 at RTT 0, 200 behind the proxy
	rtts     []time.Duration
	rounds   int
	rows     []*row
	dirs     []direction
	timeout  time.Duration // per transfer
	deadline time.Duration // whole run
	workRoot string
	verbose  bool
	sluice   sluiceOptions
	// plainPar is the plain-par row's connection count.
	plainPar int
	// maxSessions is sshd's MaxSessions: room for the fixed-channel rows.
	maxSessions int
	// tableBudget, if set, stops a table from starting another round once this much
	// time has gone into it; the first round always runs.
	tableBudget time.Duration
	// summary prints one table of every table's key figures at the end (-summary).
	summary bool
	soak    soakOptions
	small   smallOptions
	service serviceOptions
}

// soakOptions shape the soak case (soak.go).
type soakOptions struct {
	workers  int
	duration time.Duration
}

// sluiceOptions are the "sluice tuned" row's settings; 0 leaves the library default.
type sluiceOptions struct {
	Channels int `json:"channels,omitempty"`
	Inflight int `json:"inflight,omitempty"`
	Packet   int `json:"packet,omitempty"`
	Parallel int `json:"parallel,omitempty"` // tree case only: files in flight
	// Dial gives both sluice rows WithDialer (more SSH connections for lanes). Hidden
	// from the tables' headings: for measuring the library's spreading rule.
	Dial bool `json:"dial,omitempty"`
}

// describe lists the settings that apply to a table of case c.
func (o sluiceOptions) describe(c benchCase) string {
	var parts []string
	if o.Channels > 0 {
		parts = append(parts, fmt.Sprintf("channels=%d", o.Channels))
	}
	if o.Inflight > 0 {
		parts = append(parts, fmt.Sprintf("inflight=%d", o.Inflight))
	}
	if o.Packet > 0 {
		parts = append(parts, fmt.Sprintf("packet=%d", o.Packet))
	}
	if c == caseTree && o.Parallel > 0 {
		parts = append(parts, fmt.Sprintf("parallel=%d", o.Parallel))
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}

type direction string

const (
	download direction = "down"
	upload   direction = "up"
)

func (d direction) String() string {
	if d == upload {
		return "upload"
	}
	return "download"
}

// benchCase is what a table moves: one big file, or a tree of small ones.
type benchCase string

const (
	caseFile benchCase = "file"
	caseTree benchCase = "tree"
	// casePipe is one big file moved by pipe clients: sluice over `ssh -s sftp`
	// processes (NewClientPipe), with one pipe and with a pipe opener.
	casePipe benchCase = "pipe"
	caseSoak benchCase = "soak" // Stat latency under bulk load, soak.go; not part of "all"
	// caseSmall is the everyday calls (Stat, ReadFile, ReadDir, …) at 1 to 64
	// goroutines, small.go; not part of "all".
	caseSmall benchCase = "small"
	// caseService is N concurrent transfers on one client, as a service shares it,
	// service.go; not part of "all".
	caseService benchCase = "service"
)

// allCases is every case in the order tables are printed.
var allCases = []benchCase{caseFile, caseTree, casePipe}

// maxFixedChannels bounds -sluice-fixed; the harness's sshd allows this many sessions
// per connection by default (-max-sessions).
const maxFixedChannels = 64

// sluiceFixedPrefix names the -sluice-fixed rows (sluicefixed.go): sluice-ch8 is
// sluice with WithChannels(8).
const sluiceFixedPrefix = "sluice-ch"

// treeShape is the tree case's source: files of fileSize bytes spread over dirs
// directories.
type treeShape struct {
	files    int // 0: chosen by RTT, see treeFilesFor
	dirs     int
	fileSize int64
}

// treeFileSize keeps the tree case about round trips: one READ or WRITE per file.
const treeFileSize = 4 << 10

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var (
		size      = fs.String("size", "auto", "comma-separated bytes per transfer, e.g. 64MiB or 256MiB,1GiB (a table each); auto = 1GiB at RTT 0, 256MiB behind the delay proxy")
		cases     = fs.String("case", "file,tree", "comma-separated cases: file (one big file), tree (many small files), pipe (sluice over ssh -s sftp pipes), soak (Stat latency while reads run on the same Client), small (calls/s of Stat, ReadFile, ReadDir, … against pkg/sftp), service (N concurrent transfers on one client against pkg/sftp), or all (all but soak, small and service)")
		svcSize   = fs.String("service-size", "8MiB", "service case: bytes per transfer")
		smallOpsF = fs.String("small-ops", "all", "small case: comma-separated calls, some of "+fmt.Sprint(smallOps)+", or all")
		smallG    = fs.String("small-goroutines", "1,16,64", "small case: comma-separated goroutine counts sharing one client")
		fixed     = fs.String("sluice-fixed", "", "comma-separated channel counts, e.g. 4,8,16,32: adds a row sluice WithChannels(n) for each (file case)")
		rtts      = fs.String("rtt", "0", "comma-separated round-trip times; 0 connects directly, others go through the delay proxy (one-way = RTT/2)")
		rounds    = fs.Int("rounds", 3, "rounds per row; each round runs every row once, in alternating order")
		rowsFlag  = fs.String("rows", "all", "comma-separated rows: "+strings.Join(rowIDs(), ","))
		dir       = fs.String("dir", "both", "up, down or both")
		timeout   = fs.Duration("timeout", 3*time.Minute, "per transfer; a transfer that takes longer is killed and reported as a bound")
		deadline  = fs.Duration("deadline", 45*time.Minute, "whole run; no transfer starts after it")
		work      = fs.String("work", "/dev/shm", "directory for the test files (tmpfs, so disks stay out of the figures)")
		verbose   = fs.Bool("v", false, "print every transfer to stderr as it finishes")
		cfg       = &config{}
	)
	fs.IntVar(&cfg.sluice.Channels, "sluice-channels", 8, "sluice tuned: WithChannels (0 = library default)")
	fs.IntVar(&cfg.sluice.Inflight, "sluice-inflight", 0, "sluice tuned: WithMaxInflight (0 = library default)")
	fs.IntVar(&cfg.sluice.Packet, "sluice-packet", 0, "sluice tuned: WithMaxPacket (0 = library default)")
	fs.IntVar(&cfg.sluice.Parallel, "sluice-parallel", 64, "sluice tuned, tree case: Parallel (0 = library default)")
	fs.BoolVar(&cfg.sluice.Dial, "sluice-dial", false, "both sluice rows: WithDialer, so lanes may use more SSH connections")
	fs.IntVar(&cfg.tree.files, "tree-files", 0, "files in the tree case; 0 = 1000 at RTT 0, 200 behind the delay proxy")
	fs.IntVar(&cfg.tree.dirs, "tree-dirs", 10, "directories the tree case's files are spread over (every other one nested in the one before)")
	fs.IntVar(&cfg.plainPar, "plain-par", defaultPlainPar, "connections of the plain-par row, each moving 1/N of the file")
	fs.IntVar(&cfg.maxSessions, "max-sessions", maxFixedChannels, "sshd MaxSessions (OpenSSH's default is 10; higher lets fixed-channel rows open their channels)")
	fs.DurationVar(&cfg.tableBudget, "table-budget", 0, "no new round starts in a table after this much time went into it (0 = always -rounds)")
	fs.BoolVar(&cfg.summary, "summary", false, "print one summary table (sftp(1), sluice, ratio, plain-par) at the end")
	fs.IntVar(&cfg.soak.workers, "soak-workers", 64, "soak case: goroutines on the one Client (half Stat, half 4 MiB reads)")
	fs.DurationVar(&cfg.soak.duration, "soak-time", 20*time.Second, "soak case: how long each row runs")
	fs.DurationVar(&cfg.small.duration, "small-time", 3*time.Second, "small case: how long each client runs each cell (call, goroutines)")
	fs.StringVar(&cfg.small.beforeExe, "small-before", "", "small case: a build of this harness with an earlier sluice, measured as one more client (before and after in one run)")
	fs.IntVar(&cfg.service.transfers, "service-n", 32, "service case: transfers at once on the one client")
	fs.StringVar(&cfg.service.profileDir, "service-profile", "", "service case: write a heap profile of every sluice run, taken near its peak heap, into this directory")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if *size != "auto" {
		for _, s := range strings.Split(*size, ",") {
			n, err := parseSize(s)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(cfg.sizes, n) {
				cfg.sizes = append(cfg.sizes, n)
			}
		}
	}
	if cfg.plainPar < 1 || cfg.plainPar > 256 {
		return nil, fmt.Errorf("-plain-par %d: want 1 to 256", cfg.plainPar)
	}
	if cfg.maxSessions < 1 || cfg.maxSessions > 1024 {
		return nil, fmt.Errorf("-max-sessions %d: want 1 to 1024", cfg.maxSessions)
	}
	if cfg.tableBudget < 0 {
		return nil, errors.New("-table-budget must not be negative")
	}
	if cfg.cases, err = parseCases(*cases); err != nil {
		return nil, err
	}
	if cfg.tree.files < 0 || cfg.tree.files > 100000 {
		return nil, fmt.Errorf("-tree-files %d: want 1 to 100000 (0 = auto)", cfg.tree.files)
	}
	if cfg.tree.dirs < 1 || cfg.tree.dirs > 100 {
		return nil, fmt.Errorf("-tree-dirs %d: want 1 to 100", cfg.tree.dirs)
	}
	if cfg.sluice.Parallel < 0 || cfg.sluice.Parallel > 1024 {
		return nil, fmt.Errorf("-sluice-parallel %d: want 1 to 1024 (0 = library default)", cfg.sluice.Parallel)
	}
	if cfg.soak.workers < 2 || cfg.soak.workers > 1024 {
		return nil, fmt.Errorf("-soak-workers %d: want 2 to 1024", cfg.soak.workers)
	}
	if cfg.soak.duration < time.Second || cfg.soak.duration > 10*time.Minute {
		return nil, fmt.Errorf("-soak-time %v: want 1s to 10m", cfg.soak.duration)
	}
	if err := cfg.small.parse(*smallOpsF, *smallG); err != nil {
		return nil, err
	}
	if err := cfg.service.parse(*svcSize); err != nil {
		return nil, err
	}
	cfg.tree.fileSize = treeFileSize
	for _, s := range strings.Split(*rtts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad -rtt value %q", s)
		}
		cfg.rtts = append(cfg.rtts, d)
	}
	if *rounds < 1 || *rounds > 50 {
		return nil, fmt.Errorf("-rounds %d: want 1 to 50", *rounds)
	}
	cfg.rounds = *rounds
	rows, err := selectRows(*rowsFlag)
	if err != nil {
		return nil, err
	}
	if cfg.rows, err = addFixedRows(rows, *fixed); err != nil {
		return nil, err
	}
	switch *dir {
	case "both":
		cfg.dirs = []direction{download, upload}
	case "down", "download":
		cfg.dirs = []direction{download}
	case "up", "upload":
		cfg.dirs = []direction{upload}
	default:
		return nil, fmt.Errorf("-dir %q: want up, down or both", *dir)
	}
	if *timeout <= 0 || *deadline <= 0 {
		return nil, errors.New("-timeout and -deadline must be positive")
	}
	cfg.timeout, cfg.deadline, cfg.workRoot, cfg.verbose = *timeout, *deadline, *work, *verbose
	return cfg, nil
}

// sizesFor is the transfer sizes at one RTT, a table each.
func (c *config) sizesFor(rtt time.Duration) []int64 {
	switch {
	case len(c.sizes) > 0:
		return c.sizes
	case rtt == 0:
		return []int64{1 << 30}
	default:
		return []int64{256 << 20}
	}
}

// treeFilesFor is the tree case's file count at one RTT. Behind the proxy, sftp(1)
// copies one file at a time at several round trips each: 1000 files at 50 ms would take
// minutes per transfer.
func (c *config) treeFilesFor(rtt time.Duration) int {
	switch {
	case c.tree.files > 0:
		return c.tree.files
	case rtt == 0:
		return 1000
	default:
		return 200
	}
}

// parseCases reads -case, keeping the order of allCases whatever the order given, so the
// big-file tables come first.
func parseCases(spec string) ([]benchCase, error) {
	if spec == "all" {
		return slices.Clone(allCases), nil
	}
	want := map[benchCase]bool{}
	for _, s := range strings.Split(spec, ",") {
		c := benchCase(strings.TrimSpace(s))
		if !slices.Contains(allCases, c) && c != caseSoak && c != caseSmall && c != caseService {
			return nil, fmt.Errorf("-case %q: want file, tree, pipe, soak, small, service or all", s)
		}
		want[c] = true
	}
	var out []benchCase
	for _, c := range append(slices.Clone(allCases), caseSoak, caseSmall, caseService) {
		if want[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// selectRows resolves -rows against the registry, keeping the registry's order so that
// tables always list rows the same way.
func selectRows(spec string) ([]*row, error) {
	all := registeredRows()
	if spec == "all" {
		return all, nil
	}
	want := map[string]bool{}
	var members []*row // family rows named in spec, e.g. sluice-ch8
	for _, id := range strings.Split(spec, ",") {
		id = strings.TrimSpace(id)
		switch r := findRow(id); {
		case r == nil:
			return nil, fmt.Errorf("unknown row %q (known: %s)", id, strings.Join(rowIDs(), ", "))
		case !slices.Contains(rowIDs(), id) && findIn(members, id) == nil:
			members = append(members, r)
		}
		want[id] = true
	}
	var out []*row
	for _, r := range all {
		if want[r.id] {
			out = append(out, r)
		}
	}
	return sortRows(append(out, members...)), nil
}

// addFixedRows adds a sluice WithChannels(n) row for each n in spec (-sluice-fixed) that
// rows does not hold yet.
func addFixedRows(rows []*row, spec string) ([]*row, error) {
	if strings.TrimSpace(spec) == "" {
		return rows, nil
	}
	f := findFamily(sluiceFixedPrefix)
	if f == nil {
		return nil, errors.New("-sluice-fixed: the sluice rows are not in this build (-tags nosluice)")
	}
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > f.max {
			return nil, fmt.Errorf("-sluice-fixed %q: want channel counts from 1 to %d", s, f.max)
		}
		if r := f.make(n); findIn(rows, r.id) == nil {
			rows = append(rows, r)
		}
	}
	return sortRows(rows), nil
}

// sortRows orders rows as the tables list them.
func sortRows(rows []*row) []*row {
	slices.SortStableFunc(rows, func(a, b *row) int { return a.order - b.order })
	return rows
}
