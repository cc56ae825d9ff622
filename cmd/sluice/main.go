// Command sluice copies files to and from SFTP servers with the sluice client:
// put, get, ls, rm and mkdir over SSH, or over a local server process (-D, or
// OpenSSH's sftp-server for a bare path). Run "sluice -h" for usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sftp"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// exitSignal plus the signal number is the shell's convention for a command that
	// stopped on a signal: 130 after Ctrl-C.
	exitSignal = 128
)

func main() {
	ctx, stop := signalContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalContext is the context of a run: SIGINT or SIGTERM cancels it, with a
// signalError as its cause, and the command winds down: the transfers stop, the
// library cuts their part files to what is known written (briefly: see
// interruptGrace), and the connection closes. A second signal ends the process at
// once, with the same exit code, leaving the part files as they are (they resume
// from the point the library proves without the cut). stop stops listening for them.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		cancel(signalError{s.(syscall.Signal)})
		if s, ok := <-sigs; ok {
			os.Exit(exitSignal + int(s.(syscall.Signal)))
		}
	}()
	return ctx, func() { signal.Stop(sigs) }
}

// signalError is the cause of a run's cancellation by a signal.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "interrupted by " + e.sig.String() }

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// app is one invocation: the parsed flags and where output goes.
type app struct {
	cfg    *config
	sshCfg *sshConfig // loaded when a host is reached
	stdin  io.Reader  // put's "-"
	stdout io.Writer
	stderr io.Writer
	// live is set when stderr is a terminal, where put and get redraw a progress line;
	// cols gives its width then.
	live bool
	cols func() int

	promptOnce sync.Once
	replies    replyClock // when the server last sent anything, for --timeout
	prompt     *prompter
	promptStop func() bool // ends the watch that interrupts prompts on ctx's end

	// Test hooks: a prompter on a test's pty, a dialer to an in-process server, a
	// progress observer, and the pause between retries.
	testPrompt   *prompter
	testDial     func(ctx context.Context) (*session, error)
	testProgress func(sftp.Progress)
	// testRedial is told the outcome of each try at an extra connection or -D
	// process for lanes (nil: it is ready); testRedialLogin runs before each extra
	// SSH connection's login.
	testRedial      func(err error)
	testRedialLogin func()
	sleep           func(ctx context.Context, d time.Duration) error
}

// command is one subcommand. setup adds the command's own flags to fs and returns the
// function that runs it with the operands.
type command struct {
	synopsis string // after "sluice [flags] "
	min, max int    // operand counts; max 0 means any number
	// ownL is set for ls, whose -l is the long listing rather than the login user.
	ownL  bool
	setup func(fs *flag.FlagSet) func(ctx context.Context, a *app, args []string) error
}

// commands are the subcommands by name. They are set in init: help and completion
// read the table they are in.
var commands map[string]command

func init() {
	commands = map[string]command{
		"put": xferCommand("put [-r] [-a] [-p] [-f] [-j n] [-q] [--sync] [--checksum] [--verify] [--retries n] LOCAL... REMOTE", (*app).put),
		"get": xferCommand("get [-r] [-a] [-p] [-f] [-j n] [-q] [--sync] [--checksum] [--verify] [--retries n] REMOTE... LOCAL", (*app).get),
		"ls": {"ls [-l] REMOTE...", 1, 0, true, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			long := fs.Bool("l", false, "long listing: mode, size, time, owner where the server says, and link targets")
			return func(ctx context.Context, a *app, args []string) error { return a.ls(ctx, args, *long) }
		}},
		"rm": {"rm [-r] REMOTE...", 1, 0, false, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			recursive := fs.Bool("r", false, "remove directories and everything in them")
			return func(ctx context.Context, a *app, args []string) error { return a.rm(ctx, args, *recursive) }
		}},
		"mkdir": {"mkdir [-p] REMOTE...", 1, 0, false, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			parents := fs.Bool("p", false, "make parent directories as needed; no error if REMOTE exists as a directory")
			return func(ctx context.Context, a *app, args []string) error { return a.mkdir(ctx, args, *parents) }
		}},
		"mv": {"mv REMOTE... REMOTE", 2, 0, false, func(*flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, args []string) error { return a.mv(ctx, args) }
		}},
		"chmod": {"chmod MODE REMOTE...", 2, 0, false, func(*flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, args []string) error { return a.chmod(ctx, args) }
		}},
		"df": {"df [-h] REMOTE...", 1, 0, false, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			human := fs.Bool("h", false, "sizes in powers of 1024 (K, M, G), not 1K-blocks")
			return func(ctx context.Context, a *app, args []string) error { return a.df(ctx, args, *human) }
		}},
		"cat": {"cat REMOTE...", 1, 0, false, func(*flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, args []string) error { return a.cat(ctx, args) }
		}},
		"sum": sumCommand(),
		"help": {"help [COMMAND]", 0, 1, false, func(*flag.FlagSet) func(context.Context, *app, []string) error {
			return func(_ context.Context, a *app, args []string) error { return a.help(args) }
		}},
		"completion": {"completion bash|zsh", 1, 1, false, func(*flag.FlagSet) func(context.Context, *app, []string) error {
			return func(_ context.Context, a *app, args []string) error { return a.completion(args[0]) }
		}},
	}
}

// run is the whole program minus process exit, so tests can drive it: it returns the
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(ctx, args)
}

func newApp(stdout, stderr io.Writer) *app {
	live, cols := detectTerminal(stderr)
	// A local server's stderr is copied by an exec goroutine while the progress display
	// writes too: one lock keeps their lines whole (and a test's buffer race-free).
	stderr = &lockedWriter{w: stderr}
	return &app{cfg: &config{}, stdin: os.Stdin, stdout: stdout, stderr: stderr, live: live, cols: cols}
}

func (a *app) run(ctx context.Context, args []string) int {
	err := a.dispatch(ctx, args)
	if a.promptStop != nil {
		a.promptStop()
	}
	if a.prompt != nil {
		a.prompt.close()
	}
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "sluice: %s\nRun 'sluice -h' for usage.\n", escapeText(ue.msg))
		return exitUsage
	case ctx.Err() != nil:
		// The interrupt stopped the operation: its error would only describe that.
		// Cleanup (part files cut and kept, handles closed, local servers stopped) is
		// done by the time dispatch returns.
		fmt.Fprintln(a.stderr, "sluice: interrupted")
		var se signalError
		if errors.As(context.Cause(ctx), &se) {
			return exitSignal + int(se.sig)
		}
		return exitSignal + int(syscall.SIGINT)
	default:
		fmt.Fprintf(a.stderr, "sluice: %s\n", escapeText(userError(err)))
		return exitFail
	}
}

// dispatch parses the flags, the command and its operands, and runs it. Every flag
// may come anywhere: before the command, after it, among or after the operands ("--"
// ends them). A flag before the command that the command does not take is a usage
// error naming the command. Before the command -l is the login user; after ls it is
// ls's long listing.
func (a *app) dispatch(ctx context.Context, args []string) error {
	name, prefix, rest, err := a.findCommand(args)
	if name == "" || err != nil {
		return err
	}
	cmd := commands[name]
	// Before the command the shared flags win a clash of names (-l), after it the
	// command's own; both FlagSets hold the same flag.Values.
	before, after := newFlagSet(name), newFlagSet(name)
	shared := newFlagSet("sluice")
	a.cfg.register(shared)
	shared.VisitAll(func(f *flag.Flag) { before.Var(f.Value, f.Name, f.Usage) })
	runCmd := cmd.setup(after)
	after.VisitAll(func(f *flag.Flag) {
		if before.Lookup(f.Name) == nil {
			before.Var(f.Value, f.Name, f.Usage)
		}
	})
	shared.VisitAll(func(f *flag.Flag) {
		if after.Lookup(f.Name) == nil {
			after.Var(f.Value, f.Name, f.Usage)
		}
	})
	if err := before.Parse(prefix); err != nil {
		return usagef("%s: %v", name, err)
	}
	operands, err := parseAnywhere(after, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.commandHelp(name, cmd)
			return err
		}
		return usagef("%s: %v", name, err)
	}
	a.recordShared(shared, before, after, cmd)
	if len(operands) < cmd.min || cmd.max > 0 && len(operands) > cmd.max {
		return usagef("%s: want %s operand(s), got %d: usage: sluice [flags] %s", name, operandCount(cmd), len(operands), cmd.synopsis)
	}
	if err := a.checkShared(); err != nil {
		return err
	}
	return runCmd(ctx, a, operands)
}

// findCommand finds the command among args: the first operand once every flag any
// command takes is skipped, with its value. It handles -h, -h all and --version, for
// which it returns no name.
func (a *app) findCommand(args []string) (name string, prefix, rest []string, err error) {
	all := newFlagSet("sluice")
	a.cfg.register(all)
	showVersion := all.Bool("version", false, "print the version and exit")
	for _, n := range commandNames() {
		own := newFlagSet(n)
		commands[n].setup(own)
		own.VisitAll(func(f *flag.Flag) {
			// df's -h is its own: before any command -h is help.
			if all.Lookup(f.Name) == nil && f.Name != "h" {
				all.Var(f.Value, f.Name, f.Usage) // values thrown away: only the syntax counts
			}
		})
	}
	// The throwaway values above must not be the real ones: parse into a copy of
	// the config, then start from a clean one.
	saved := *a.cfg
	defer func() { *a.cfg = saved }()
	if err := all.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if r := all.Args(); len(r) > 0 && r[0] == "all" {
				printAllFlags(a.stdout)
			} else {
				printUsage(a.stdout)
			}
			return "", nil, nil, err
		}
		return "", nil, nil, usagef("%v", err)
	}
	if *showVersion {
		fmt.Fprintln(a.stdout, versionString())
		return "", nil, nil, nil
	}
	if all.NArg() == 0 {
		return "", nil, nil, usagef("missing command (%s)", strings.Join(commandNames(), ", "))
	}
	name = all.Arg(0)
	if _, ok := commands[name]; !ok {
		if name == "all" && len(args) > 0 {
			printAllFlags(a.stdout)
			return "", nil, nil, nil
		}
		return "", nil, nil, usagef("unknown command %q (want %s)", name, strings.Join(commandNames(), ", "))
	}
	used := len(args) - all.NArg()
	return name, args[:used], args[used+1:], nil
}

// commandHelp is "sluice COMMAND -h": the command's own flags.
func (a *app) commandHelp(name string, cmd command) {
	fmt.Fprintf(a.stdout, "Usage: sluice [flags] %s\n", cmd.synopsis)
	own := newFlagSet(name) // the command's own flags only
	cmd.setup(own)
	own.SetOutput(a.stdout)
	own.PrintDefaults()
	fmt.Fprintf(a.stdout, "\nRun 'sluice help %s' for more, 'sluice -h all' for the shared flags.\n", name)
}

// recordShared notes which shared flags were given anywhere, for the checks that
// refuse SSH flags without a host. ls's own -l after the command is not the login user.
func (a *app) recordShared(shared, before, after *flag.FlagSet, cmd command) {
	if a.cfg.set == nil {
		a.cfg.set = map[string]bool{}
	}
	before.Visit(func(f *flag.Flag) {
		if shared.Lookup(f.Name) != nil {
			a.cfg.set[f.Name] = true
		}
	})
	after.Visit(func(f *flag.Flag) {
		if shared.Lookup(f.Name) != nil && !(cmd.ownL && f.Name == "l") {
			a.cfg.set[f.Name] = true
		}
	})
}

// checkShared refuses shared flags whose values the library or x/crypto would refuse
// later, before anything is started.
func (a *app) checkShared() error {
	if a.cfg.set["D"] && len(splitCommand(a.cfg.serverCmd)) == 0 {
		return usagef("-D: empty server command")
	}
	if err := a.cfg.checkCipher(); err != nil {
		return err
	}
	if err := a.cfg.checkOptions(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// commandNames lists the commands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func operandCount(c command) string {
	switch {
	case c.max == c.min:
		return strconv.Itoa(c.min)
	case c.max == 0:
		return "at least " + strconv.Itoa(c.min)
	}
	return fmt.Sprintf("%d to %d", c.min, c.max)
}

// target parses a REMOTE operand. With -D it is a path, whatever it looks like: the
// command decides where the files are.
func (a *app) target(arg string) (remote, error) {
	var r remote
	if a.cfg.serverCmd != "" || a.testDial != nil {
		if arg == "" {
			return r, usagef("empty REMOTE path")
		}
		r = remote{Path: arg}
	} else {
		var err error
		if r, err = parseRemote(arg); err != nil {
			return r, usagef("%v", err)
		}
	}
	if !r.hasHost() {
		for _, f := range sshOnlyFlags {
			if a.cfg.set[f] {
				why := "REMOTE " + arg + " has no host"
				if a.cfg.serverCmd != "" {
					why = "-D is given"
				}
				return r, usagef("-%s is for SSH, but %s (write host:path)", f, why)
			}
		}
	}
	return r, nil
}

// targets parses several REMOTE operands, which must all name the same server: one
// connection serves a command.
func (a *app) targets(args []string) ([]remote, error) {
	var out []remote
	for _, arg := range args {
		r, err := a.target(arg)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && (r.Host != out[0].Host || r.User != out[0].User || r.Port != out[0].Port) {
			return nil, usagef("%s and %s are on different servers: one command talks to one server", out[0], r)
		}
		out = append(out, r)
	}
	return out, nil
}

// interruptGrace is how long after ctx ends (an interrupt) the session stays open for
// the command to wind down by itself: its library calls return at once, and closing
// the session lets the stopped uploads cut and mark their part files (Client.Close
// waits for that, a few round trips at most), so that the next -a continues them from
// their end. Past it the session is closed under whatever has not ended.
const interruptGrace = 5 * time.Second

// open connects for r. When ctx ends (an interrupt), the command's calls end with it
// and the command closes the session; if it has not within interruptGrace, open's
// watch closes it.
func (a *app) open(ctx context.Context, r remote) (*session, func() error, error) {
	if r.hasHost() && a.sshCfg == nil {
		c, err := loadSSHConfig(a.cfg.configFile, a.cfg.options)
		if err != nil {
			return nil, nil, err
		}
		a.sshCfg = c
		for _, w := range c.warnings {
			fmt.Fprintf(a.stderr, "sluice: warning: ssh_config %s\n", escapeText(w))
		}
	}
	s, err := a.connect(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	stop := afterGrace(ctx, interruptGrace, func() { _ = s.Close() })
	return s, func() error {
		stop()
		return s.Close()
	}, nil
}

// afterGrace runs fn in its own goroutine grace after ctx ends, unless stop is called
// first.
func afterGrace(ctx context.Context, grace time.Duration, fn func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var timer *time.Timer
	unhook := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(grace, fn)
		}
	})
	return func() {
		unhook()
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
}

// openTargets parses the remote operands args and connects to the host of the first:
// the start of every command that acts on remote paths. The caller closes the session
// with closeFn.
func (a *app) openTargets(ctx context.Context, args []string) ([]remote, *session, func() error, error) {
	rs, err := a.targets(args)
	if err != nil {
		return nil, nil, nil, err
	}
	s, closeFn, err := a.open(ctx, rs[0])
	if err != nil {
		return nil, nil, nil, err
	}
	return rs, s, closeFn, nil
}

// openPaths is openTargets for a command on remote paths (op names it in errors):
// the operands as the server names them (remotePaths), on their host's session.
func (a *app) openPaths(ctx context.Context, op string, args []string) ([]string, *session, func() error, error) {
	rs, s, closeFn, err := a.openTargets(ctx, args)
	if err != nil {
		return nil, nil, nil, err
	}
	paths, err := a.remotePaths(ctx, s.client, rs)
	if err != nil {
		closeFn()
		return nil, nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return paths, s, closeFn, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// closeInto closes via closeFn and keeps its error if err is nil: a command has not
// succeeded until its connection (and a local server) shut down cleanly.
func closeInto(err *error, closeFn func() error) {
	if cerr := closeFn(); *err == nil && cerr != nil {
		*err = cerr
	}
}
