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
	"strings"
	"sync"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// app is one invocation: the parsed shared flags and where output goes.
type app struct {
	cfg    *config
	stdout io.Writer
	stderr io.Writer
	// live is set when stderr is a terminal, where put and get redraw a progress line;
	// cols gives its width then.
	live bool
	cols func() int
}

// command is one subcommand. setup adds the command's own flags to fs and returns the
// function that runs it with the operands.
type command struct {
	synopsis string // after "sluice [flags] "
	operands int
	setup    func(fs *flag.FlagSet) func(ctx context.Context, a *app, args []string) error
}

var commands = map[string]command{
	"put": xferCommand("put [-r] [-a] [-p] [-f] [-j n] [-q] LOCAL REMOTE", (*app).put),
	"get": xferCommand("get [-r] [-a] [-p] [-f] [-j n] [-q] REMOTE LOCAL", (*app).get),
	"ls": {"ls REMOTE", 1, func(*flag.FlagSet) func(context.Context, *app, []string) error {
		return func(ctx context.Context, a *app, args []string) error { return a.ls(ctx, args[0]) }
	}},
	"rm": {"rm REMOTE", 1, func(*flag.FlagSet) func(context.Context, *app, []string) error {
		return func(ctx context.Context, a *app, args []string) error { return a.rm(ctx, args[0]) }
	}},
	"mkdir": {"mkdir [-p] REMOTE", 1, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		parents := fs.Bool("p", false, "make parent directories as needed; no error if REMOTE exists as a directory")
		return func(ctx context.Context, a *app, args []string) error { return a.mkdir(ctx, args[0], *parents) }
	}},
}

// run is the whole program minus process exit, so tests can drive it: it returns the
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	live, cols := detectTerminal(stderr)
	// A local server's stderr is copied by an exec goroutine while the progress display
	// writes too: one lock keeps their lines whole (and a test's buffer race-free).
	stderr = &lockedWriter{w: stderr}
	a := &app{cfg: &config{}, stdout: stdout, stderr: stderr, live: live, cols: cols}
	err := a.dispatch(ctx, args)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sluice: %s\nRun 'sluice -h' for usage.\n", ue.msg)
		return exitUsage
	case ctx.Err() != nil:
		// The interrupt closed the connection under the operation: its error would
		// only describe that.
		fmt.Fprintln(stderr, "sluice: interrupted")
		return exitFail
	default:
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return exitFail
	}
}

// dispatch parses the shared flags, the command and its flags, and runs it. The
// shared flags may come before or after the command name: both FlagSets hold the
// same flag.Values.
func (a *app) dispatch(ctx context.Context, args []string) error {
	global := newFlagSet("sluice")
	a.cfg.register(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(a.stdout)
			return err
		}
		return usagef("%v", err)
	}
	a.cfg.recordSet(global)
	if global.NArg() == 0 {
		return usagef("missing command (put, get, ls, rm or mkdir)")
	}
	name := global.Arg(0)
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q (want put, get, ls, rm or mkdir)", name)
	}
	fs := newFlagSet(name)
	global.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	runCmd := cmd.setup(fs)
	if err := fs.Parse(global.Args()[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(a.stdout, "Usage: sluice [flags] %s\n", cmd.synopsis)
			own := newFlagSet(name) // the command's own flags only
			cmd.setup(own)
			own.SetOutput(a.stdout)
			own.PrintDefaults()
			fmt.Fprintln(a.stdout, "\nRun 'sluice -h' for the shared flags and the REMOTE syntax.")
			return err
		}
		return usagef("%s: %v", name, err)
	}
	a.cfg.recordSet(fs)
	if fs.NArg() != cmd.operands {
		hint := ""
		for _, arg := range fs.Args() {
			if strings.HasPrefix(arg, "-") && len(arg) > 1 {
				hint = " (flags go before the operands)"
			}
		}
		return usagef("%s: want %d operand(s), got %d%s: usage: sluice [flags] %s", name, cmd.operands, fs.NArg(), hint, cmd.synopsis)
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
	return runCmd(ctx, a, fs.Args())
}

// target parses a REMOTE operand. With -D it is a path, whatever it looks like: the
// command decides where the files are.
func (a *app) target(arg string) (remote, error) {
	var r remote
	if a.cfg.serverCmd != "" {
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

// open connects for r and closes the session when ctx ends, which is what stops a
// transfer in progress on SIGINT.
func (a *app) open(ctx context.Context, r remote) (*session, func() error, error) {
	s, err := connect(ctx, a.cfg, r, a.stderr)
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
