package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Stop, then resume: the model test of Resume (issue 25). A seed draws a transfer (Get
// or Put, its size, request size, window, lanes, round trip, the span W), then stops
// it one to three times at random points, each way a transfer can stop: its ctx,
// Client.Close, its connections killed, and the process running it killed (a child
// process, model_resume_child_test.go, SIGKILLed in the middle of the transfer, with
// requests in flight and pieces being written). Each stop is followed by a run with
// Resume, the last one to the end. The servers: the in-process one answering out of
// order and carrying out each session's WRITEs late (HoldWrites: across sessions they
// land out of order, and a session that dies drops the ones it held), where a killed
// process is modelled (its connections die; a download's part is frozen as it was);
// OpenSSH's sftp-server over pipes, striped over several server processes; and the
// private sshd, striped over its sessions (model_resume_envs_test.go). The property:
//
//   - after every stop, the part file's bytes below B are the source's, B being its
//     size when it carries the resume mark (resumemark.go), else its size minus W
//     (the invariant Resume relies on, resume.go);
//   - a stop the program lives through cuts and marks the part: every Get's but a
//     killed process's, and a Put's stopped by its ctx (once the cut in the background
//     is done); a run killed, or a Put whose connections died, leaves no mark (or the
//     part as it found it, untouched);
//   - every run with Resume continues from exactly B, or, for a Put with the plan's
//     Journal (shared by the runs of this process, see journal.go), from the prefix
//     the last failed run had acknowledged, when that is further and within the part;
//   - a run that returns nil leaves the source's bytes under the destination name,
//     and the last run does: identical bytes or an error, never a wrong file with a
//     nil error.
//
// W is lowered (withSpan) so that transfers of a few hundred KiB do what large ones
// do, and so is the size at which transfers stripe. Seeds replay with
// SLUICE_MODEL_SEED (model_helpers_test.go); SLUICE_MODEL_RUNS adds random ones.

// stopHow is a way a transfer stops.
type stopHow int

const (
	stopNone    stopHow = iota - 1 // the run goes to the end
	stopCtx                        // the call's ctx is cancelled
	stopClose                      // Client.Close
	stopKill                       // every connection of the run dies at once
	stopProcess                    // the process running the transfer is SIGKILLed
	stopFreeze                     // in-process model of stopProcess for a Get: the part stays as it was
)

func (h stopHow) String() string {
	return [...]string{"none", "ctx", "Close", "connection killed", "process killed", "process killed (modelled)"}[h+1]
}

// resumeStop is one stop: how, and once how many bytes have moved.
type resumeStop struct {
	how stopHow
	at  int64
}

// resumePlan is what a seed chose.
type resumePlan struct {
	seed     uint64
	up       bool
	size     int
	chunk    int // WithMaxPacket
	inflight int // WithMaxInflight
	lanes    int // WithChannels; 1 does not stripe
	span     int64
	latency  time.Duration
	reorder  int // testserver Reorder
	hold     int // testserver HoldWrites
	journal  bool
	stops    []resumeStop
}

func newResumePlan(seed uint64, hows []stopHow) resumePlan {
	rng := rand.New(rand.NewPCG(seed, 25))
	p := resumePlan{seed: seed, up: rng.IntN(2) == 0}
	p.chunk = pick(rng, 4096, 8192, 32768)
	p.span = int64(p.chunk * pick(rng, 2, 4, 16))
	p.inflight = pick(rng, 2, 8, 32, 64)
	p.lanes = pick(rng, 1, 1, 2, 4)
	p.latency = pick(rng, 0, 0, 100*time.Microsecond, 500*time.Microsecond)
	p.reorder = pick(rng, 0, 2, 4, 16)
	p.hold = pick(rng, 0, 2, 8)
	p.journal = rng.IntN(2) == 0
	s := int(p.span)
	p.size = pick(rng, rng.IntN(p.chunk), rng.IntN(s), s, s+1+rng.IntN(4*s), 2*s+rng.IntN(3*s))
	for range 1 + rng.IntN(3) {
		p.stops = append(p.stops, resumeStop{how: pick(rng, hows...), at: rng.Int64N(int64(p.size) + 1)})
	}
	return p
}

func (p resumePlan) String() string {
	dir := "Get"
	if p.up {
		dir = "Put"
	}
	return fmt.Sprintf("%s of %d bytes, chunk %d, inflight %d, lanes %d, W %d, latency %v, reorder %d, hold %d, journal %v, stops %v",
		dir, p.size, p.chunk, p.inflight, p.lanes, p.span, p.latency, p.reorder, p.hold, p.journal, p.stops)
}

// clientOpts are the options of every run's Client.
func (p resumePlan) clientOpts() []Option {
	opts := []Option{WithMaxPacket(p.chunk), WithMaxInflight(p.inflight), WithChannels(p.lanes), withSpan(p.span)}
	if p.lanes > 1 {
		opts = append(opts, withStripeMinRTT(0), withStripeFrom(int64(2*p.chunk)))
	}
	return opts
}

// resumeServer is a server the model runs against: a Client for each run, a way to
// kill that run's connections, and the files as the server holds them.
type resumeServer interface {
	// client connects a fresh Client for one run.
	client(t *testing.T, opts ...Option) *Client
	// kill ends every connection of the current run at once, as the death of the
	// process running it does.
	kill()
	// settle returns once the run's server sessions have stopped changing files; the
	// run's Client is closed.
	settle(t *testing.T)
	// remote is the name the Client uses for name.
	remote(name string) string
	// read returns a file as the server holds it (nil, fs.ErrNotExist when missing).
	read(name string) ([]byte, error)
	// marked reports whether a file the server holds carries the resume mark.
	marked(t *testing.T, name string) bool
	write(t *testing.T, name string, data []byte)
	// child sets up how a child process reaches the server (the fields of cfg about
	// that, and the files it inherits), for a run the test kills; false when the
	// server is in this process.
	child(t *testing.T, cfg *childConfig) (files []*os.File, ok bool)
}

// resumeTally counts what the model did: the stops made (runs that ended before the
// transfer did), by how, the runs that continued a part from past its start, and of
// those the ones that continued a marked part, or one from what a Journal knew.
type resumeTally struct {
	mu      sync.Mutex
	byHow   map[stopHow]int
	resumed int
	marked  int
	known   int
}

func (r *resumeTally) stopped(how stopHow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byHow == nil {
		r.byHow = map[stopHow]int{}
	}
	r.byHow[how]++
}

func (r *resumeTally) resumedFrom(off int64, how resumeFrom) {
	if off > 0 {
		r.mu.Lock()
		r.resumed++
		switch how {
		case fromMark:
			r.marked++
		case fromJournal:
			r.known++
		}
		r.mu.Unlock()
	}
}

func (r *resumeTally) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	var by []string
	for how := stopCtx; how <= stopFreeze; how++ {
		total += r.byHow[how]
		by = append(by, fmt.Sprintf("%v %d", how, r.byHow[how]))
	}
	return fmt.Sprintf("%d stops (%s), each followed by a resume; %d runs continued a part from past its start, %d from the mark, %d from a Journal",
		total, strings.Join(by, ", "), r.resumed, r.marked, r.known)
}

// resumeFrom is what a resume point rests on.
type resumeFrom int

const (
	fromSpan    resumeFrom = iota // W before the part's end
	fromMark                      // the part's end: it carries the mark
	fromJournal                   // the prefix a failed run of this process had acknowledged
)

// expectedResume is where a run with Resume continues the part left: its end when it
// carries the mark, else W before it, or the prefix the Journal holds (known) when
// that is further and within the part.
func expectedResume(part []byte, marked bool, span, known int64) (int64, resumeFrom) {
	size := int64(len(part))
	if size == 0 {
		return 0, fromSpan
	}
	if marked {
		return size, fromMark
	}
	from := max(0, size-span)
	if known > from && known <= size {
		return known, fromJournal
	}
	return from, fromSpan
}

// cleanStop reports whether a stop leaves the program alive to cut and mark the part:
// every stop of a Get but the process's death; a Put's only by its ctx (its
// connections are alive to take the cut; Close and a kill take them away).
func cleanStop(how stopHow, up bool) bool {
	if up {
		return how == stopCtx
	}
	return how == stopCtx || how == stopClose || how == stopKill
}

// resumeModel runs one plan against srv and checks the property, counting in tally.
func resumeModel(t *testing.T, srv resumeServer, plan resumePlan, tally *resumeTally) {
	log := newModelLog(t, plan.seed)
	log.add("plan: %v", plan)
	data := randBytes(plan.size, plan.seed)
	local := t.TempDir()
	var rt resumeRun
	if plan.up {
		rt = &putRun{src: filepath.Join(local, "src"), srv: srv}
		gpWrite(t, filepath.Join(local, "src"), data)
	} else {
		rt = &getRun{dst: filepath.Join(local, "dst"), srv: srv}
		srv.write(t, "src", data)
	}
	resume := false
	var j *Journal // this process's, when the plan keeps one
	var known int64
	if plan.journal {
		j = NewJournal()
	}
	for i, st := range append(plan.stops, resumeStop{how: stopNone}) {
		before, _ := rt.part()
		beforeMarked := rt.marked(t)
		from, why := int64(0), fromSpan
		if resume {
			k := known
			if st.how == stopProcess {
				k = 0 // another process: it has no Journal of this one's
			}
			from, why = expectedResume(before, beforeMarked, plan.span, k)
		}
		var first, last int64
		var frozen []byte
		var err error
		if st.how == stopProcess {
			first, err = runChild(t, srv, plan, rt, st, resume)
			j, known = nil, 0 // the child's Journal died with it
			if plan.journal {
				j = NewJournal()
			}
		} else {
			first, last, frozen, err = runOnce(t, srv, plan, rt, st, resume, j)
			if j != nil && plan.up && err != nil && last >= 0 {
				known = last
			}
		}
		log.add("run %d (stop %v at %d): resumed from %d (expected %d), last report %d, err %v", i, st.how, st.at, first, from, last, err)
		require.Equal(t, from, first, "run %d did not resume from the proven point", i)
		tally.resumedFrom(first, why)
		if err == nil {
			got, rerr := rt.dest()
			require.NoError(t, rerr)
			requireSameBytes(t, data, got)
			_, perr := rt.part()
			require.ErrorIs(t, perr, fs.ErrNotExist, "a part file is left beside a finished copy")
			return
		}
		require.NotEqual(t, stopNone, st.how, "the run without a stop failed: %v", err)
		tally.stopped(st.how)
		if frozen != nil {
			rt.setPart(t, frozen)
		}
		part, perr := rt.part()
		if perr == nil {
			marked := rt.marked(t)
			log.add("part of %d bytes, marked %v", len(part), marked)
			require.LessOrEqual(t, len(part), len(data), "the part is longer than the source")
			proven, _ := expectedResume(part, marked, plan.span, 0)
			requireSameBytes(t, data[:proven], part[:proven])
			switch {
			case cleanStop(st.how, plan.up) && len(part) > 0 && !(plan.up && plan.size <= plan.chunk):
				require.True(t, marked, "a %v stop left the part unmarked", st.how)
			case !cleanStop(st.how, plan.up) && marked:
				require.True(t, beforeMarked && bytes.Equal(before, part), "a %v stop left a mark on a part it changed", st.how)
			}
		} else {
			require.ErrorIs(t, perr, fs.ErrNotExist)
		}
		// The stop may have come as the part was renamed into place (the reply lost
		// with the connection): whatever is under the final name is the whole file.
		if got, derr := rt.dest(); !errors.Is(derr, fs.ErrNotExist) {
			require.NoError(t, derr)
			requireSameBytes(t, data, got)
		}
		resume = true
	}
	t.Fatal("the last run neither finished nor failed")
}

// runOnce runs the transfer once on a fresh Client, stopping it as st says, keeping j
// if not nil. It returns where it started (the first progress report's bytes: where a
// resumed file continues), the last report's (for a failed Put, the prefix the server
// acknowledged, which j holds), for stopFreeze the part file as it was when the
// process died, and the transfer's error.
func runOnce(t *testing.T, srv resumeServer, plan resumePlan, rt resumeRun, st resumeStop, resume bool, j *Journal) (first, last int64, frozen []byte, err error) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	c := srv.client(t, plan.clientOpts()...)
	var once sync.Once
	var pending sync.WaitGroup
	first, last = -1, -1
	progress := OnProgress(func(p Progress) {
		if first < 0 {
			first = p.Bytes
		}
		last = p.Bytes
		if st.how == stopNone || p.Bytes < st.at || p.Done || p.Err != nil {
			return
		}
		once.Do(func() {
			switch st.how {
			case stopCtx:
				cancel()
			case stopClose:
				pending.Go(func() { c.Close() })
			case stopKill:
				pending.Go(srv.kill)
			case stopFreeze:
				frozen, _ = rt.part() // what a process killed now leaves
				if frozen == nil {
					frozen = []byte{}
				}
				cancel()
			}
		})
	})
	opts := []TransferOption{progress}
	if resume {
		opts = append(opts, Resume())
	}
	if j != nil {
		opts = append(opts, KeepJournal(j))
	}
	within(t, func() { err = rt.run(ctx, c, opts) })
	pending.Wait()
	if st.how == stopCtx {
		settleAll(c) // the clean-up the call left in the background: Put's cut
	}
	c.Close()
	srv.settle(t)
	return first, last, frozen, err
}

// resumeRun is the transfer a model runs: a Put or a Get.
type resumeRun interface {
	run(ctx context.Context, c *Client, opts []TransferOption) error
	part() ([]byte, error) // the part file (nil, fs.ErrNotExist when there is none)
	marked(t *testing.T) bool
	setPart(t *testing.T, data []byte)
	dest() ([]byte, error) // the finished copy
	// describe fills in what a child process needs to run the same transfer.
	describe(cfg *childConfig)
}

type putRun struct {
	src string
	srv resumeServer
}

func (r *putRun) run(ctx context.Context, c *Client, opts []TransferOption) error {
	return c.Put(ctx, r.src, r.srv.remote("dst"), opts...)
}

func (r *putRun) part() ([]byte, error)             { return r.srv.read(".dst" + partSuffix) }
func (r *putRun) marked(t *testing.T) bool          { return r.srv.marked(t, ".dst"+partSuffix) }
func (r *putRun) setPart(t *testing.T, data []byte) { r.srv.write(t, ".dst"+partSuffix, data) }
func (r *putRun) dest() ([]byte, error)             { return r.srv.read("dst") }

func (r *putRun) describe(cfg *childConfig) {
	cfg.Up, cfg.Local, cfg.Remote = true, r.src, r.srv.remote("dst")
}

type getRun struct {
	dst string
	srv resumeServer
}

func (r *getRun) run(ctx context.Context, c *Client, opts []TransferOption) error {
	return c.Get(ctx, r.srv.remote("src"), r.dst, opts...)
}

func (r *getRun) part() ([]byte, error)    { return os.ReadFile(r.dst + partSuffix) }
func (r *getRun) marked(t *testing.T) bool { return localMarked(t, r.dst+partSuffix) }

// localMarked reports whether the local file name carries the resume mark; false when
// it does not exist.
func localMarked(t *testing.T, name string) bool {
	fi, err := os.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	require.NoError(t, err)
	return markedLocal(fi)
}
func (r *getRun) dest() ([]byte, error) { return os.ReadFile(r.dst) }

func (r *getRun) setPart(t *testing.T, data []byte) {
	require.NoError(t, os.WriteFile(r.dst+partSuffix, data, 0o644))
}

func (r *getRun) describe(cfg *childConfig) {
	cfg.Up, cfg.Local, cfg.Remote = false, r.dst, r.srv.remote("src")
}

// tsResume is the in-process server as a resumeServer: each run's Client stripes over
// sessions of one server, whose file system outlives them.
type tsResume struct{ srv *testserver.Server }

func newTSResume(t *testing.T, opts testserver.Options) *tsResume {
	srv := testserver.New(opts)
	t.Cleanup(func() { srv.Close() })
	return &tsResume{srv: srv}
}

// serverOpts are the faults the plan asks of the in-process server.
func (p resumePlan) serverOpts() testserver.Options {
	return testserver.Options{Reorder: p.reorder, HoldWrites: p.hold, Seed: p.seed, Latency: p.latency}
}

func (e *tsResume) client(t *testing.T, opts ...Option) *Client {
	r, w := e.srv.Conn()
	open := func(context.Context) (io.Reader, io.WriteCloser, error) {
		r, w := e.srv.Conn()
		return r, w, nil
	}
	c, err := NewClientPipe(testCtx(t), r, w, append(opts, WithPipeOpener(open))...)
	require.NoError(t, err)
	pinLanes(c, c.opts.channels)
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *tsResume) kill()                     { e.srv.KillSessions() }
func (e *tsResume) settle(t *testing.T)       { e.srv.KillSessions() }
func (e *tsResume) remote(name string) string { return name }

func (e *tsResume) child(*testing.T, *childConfig) ([]*os.File, bool) { return nil, false }

func (e *tsResume) read(name string) ([]byte, error) {
	b, err := e.srv.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return b, err
}

func (e *tsResume) marked(t *testing.T, name string) bool {
	a, err := e.srv.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	require.NoError(t, err)
	return a.Mtime == markTime
}

func (e *tsResume) write(t *testing.T, name string, data []byte) {
	require.NoError(t, e.srv.WriteFile(name, data, 0o644))
}

// The in-process server: where a process is killed, a Put's connections die (the
// server drops what it held), and a Get's part stays as it was at that moment.
func TestModelResumeAfterStops(t *testing.T) {
	var tally resumeTally
	hows := []stopHow{stopCtx, stopClose, stopKill, stopProcess}
	for _, seed := range modelSeeds(t, fixedSeeds(100)) {
		plan := newResumePlan(seed, hows)
		for i, st := range plan.stops {
			if st.how == stopProcess {
				plan.stops[i].how = stopFreeze
				if plan.up {
					plan.stops[i].how = stopKill
				}
			}
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			tsNoLeaks(t)
			resumeModel(t, newTSResume(t, plan.serverOpts()), plan, &tally)
		})
	}
	t.Log(tally.String())
}
