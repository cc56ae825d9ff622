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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
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
	size     int64 // 0: 1 GiB at RTT 0, 256 MiB behind the proxy
	rtts     []time.Duration
	rounds   int
	rows     []*row
	dirs     []direction
	timeout  time.Duration // per transfer
	deadline time.Duration // whole run
	workRoot string
	verbose  bool
	sluice   sluiceOptions
}

// sluiceOptions are the "sluice tuned" row's settings; 0 leaves the library default.
type sluiceOptions struct {
	Channels int `json:"channels,omitempty"`
	Inflight int `json:"inflight,omitempty"`
	Packet   int `json:"packet,omitempty"`
}

func (o sluiceOptions) String() string {
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

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var (
		size     = fs.String("size", "auto", "bytes per transfer, e.g. 64MiB, 1GiB; auto = 1GiB at RTT 0, 256MiB behind the delay proxy")
		rtts     = fs.String("rtt", "0", "comma-separated round-trip times; 0 connects directly, others go through the delay proxy (one-way = RTT/2)")
		rounds   = fs.Int("rounds", 3, "rounds per row; each round runs every row once, in alternating order")
		rowsFlag = fs.String("rows", "all", "comma-separated rows: "+strings.Join(rowIDs(), ","))
		dir      = fs.String("dir", "both", "up, down or both")
		timeout  = fs.Duration("timeout", 3*time.Minute, "per transfer; a transfer that takes longer is killed and reported as a bound")
		deadline = fs.Duration("deadline", 45*time.Minute, "whole run; no transfer starts after it")
		work     = fs.String("work", "/dev/shm", "directory for the test files (tmpfs, so disks stay out of the figures)")
		verbose  = fs.Bool("v", false, "print every transfer to stderr as it finishes")
		cfg      = &config{}
	)
	fs.IntVar(&cfg.sluice.Channels, "sluice-channels", 8, "sluice tuned: WithChannels (0 = library default)")
	fs.IntVar(&cfg.sluice.Inflight, "sluice-inflight", 0, "sluice tuned: WithMaxInflight (0 = library default)")
	fs.IntVar(&cfg.sluice.Packet, "sluice-packet", 0, "sluice tuned: WithMaxPacket (0 = library default)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *size != "auto" {
		n, err := parseSize(*size)
		if err != nil {
			return nil, err
		}
		cfg.size = n
	}
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
	cfg.rows = rows
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

// sizeFor is the transfer size at one RTT.
func (c *config) sizeFor(rtt time.Duration) int64 {
	switch {
	case c.size > 0:
		return c.size
	case rtt == 0:
		return 1 << 30
	default:
		return 256 << 20
	}
}

// selectRows resolves -rows against the registry, keeping the registry's order so that
// tables always list rows the same way.
func selectRows(spec string) ([]*row, error) {
	all := registeredRows()
	if spec == "all" {
		return all, nil
	}
	want := map[string]bool{}
	for _, id := range strings.Split(spec, ",") {
		id = strings.TrimSpace(id)
		if !slices.Contains(rowIDs(), id) {
			return nil, fmt.Errorf("unknown row %q (known: %s)", id, strings.Join(rowIDs(), ", "))
		}
		want[id] = true
	}
	var out []*row
	for _, r := range all {
		if want[r.id] {
			out = append(out, r)
		}
	}
	return out, nil
}
