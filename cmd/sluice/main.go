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
	"strconv"
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
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if s, ok := <-sigs; ok {
			cancel(signalError{s.(syscall.Signal)})
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
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

var commands = map[string]command{
	"put": xferCommand("put [-r] [-a] [-p] [-f] [-j n] [-q] [--sync] [--retries n] LOCAL... REMOTE", (*app).put),
	"get": xferCommand("get [-r] [-a] [-p] [-f] [-j n] [-q] [--sync] [--retries n] REMOTE... LOCAL", (*app).get),
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
		// The interrupt closed the connection under the operation: its error would
		// only describe that. Cleanup (part files kept, handles closed, local servers
		// stopped) is done by the time dispatch returns.
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

// dispatch parses the shared flags, the command and its flags, and runs it. Shared
// flags may come before or after the command name, and every flag may come after the
// operands: both FlagSets hold the same flag.Values.
func (a *app) dispatch(ctx context.Context, args []string) error {
	global := newFlagSet("sluice")
	a.cfg.register(global)
	showVersion := global.Bool("version", false, "print the version and exit")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if rest := global.Args(); len(rest) > 0 && rest[0] == "all" {
				printAllFlags(a.stdout)
			} else {
				printUsage(a.stdout)
			}
			return err
		}
		return usagef("%v", err)
	}
	if *showVersion {
		fmt.Fprintln(a.stdout, versionString())
		return nil
	}
	a.cfg.recordSet(global)
	if global.NArg() == 0 {
		return usagef("missing command (put, get, ls, rm or mkdir)")
	}
	name := global.Arg(0)
	cmd, ok := commands[name]
	if !ok {
		if name == "all" && len(args) > 0 {
			printAllFlags(a.stdout)
			return nil
		}
		return usagef("unknown command %q (want put, get, ls, rm or mkdir)", name)
	}
	fs := newFlagSet(name)
	global.VisitAll(func(f *flag.Flag) {
		if !(cmd.ownL && f.Name == "l") && f.Name != "version" {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	runCmd := cmd.setup(fs)
	operands, err := parseAnywhere(fs, global.Args()[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(a.stdout, "Usage: sluice [flags] %s\n", cmd.synopsis)
			own := newFlagSet(name) // the command's own flags only
			cmd.setup(own)
			own.SetOutput(a.stdout)
			own.PrintDefaults()
			fmt.Fprintln(a.stdout, "\nRun 'sluice -h all' for the shared flags.")
			return err
		}
		return usagef("%s: %v", name, err)
	}
	fs.Visit(func(f *flag.Flag) {
		// Only the shared flags count: ls's own -l is not the login user.
		if global.Lookup(f.Name) != nil && !(cmd.ownL && f.Name == "l") {
			a.cfg.set[f.Name] = true
		}
	})
	if len(operands) < cmd.min || cmd.max > 0 && len(operands) > cmd.max {
		return usagef("%s: want %s operand(s), got %d: usage: sluice [flags] %s", name, operandCount(cmd), len(operands), cmd.synopsis)
	}
	if a.cfg.set["D"] && len(splitCommand(a.cfg.serverCmd)) == 0 {
		return usagef("-D: empty server command")
	}
	if err := a.cfg.checkCipher(); err != nil {
		return err
	}
	if err := a.cfg.checkOptions(); err != nil {
		return usagef("%v", err)
	}
	return runCmd(ctx, a, operands)
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

// open connects for r and closes the session when ctx ends, which is what stops a
// transfer in progress on SIGINT.
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
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	return s, func() error {
		stop()
		return s.Close()
	}, nil
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
