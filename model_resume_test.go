package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Stop, then resume: the model test of Resume (issue 25). A seed draws a transfer (Get
// or Put, its size, request size, window, lanes, round trip, the span W) and a server
// that answers out of order and carries out each session's WRITEs late (HoldWrites:
// across sessions they land out of order, and a session that dies drops the ones it
// held); then stops the transfer one to three times at random points, each way a
// transfer can stop: its ctx, Client.Close, the connection killed (every session of
// the run at once, as when the process running it dies), and for a download the
// process killed (the part file frozen as it was at that moment: nothing cuts it).
// Each stop is followed by a run with Resume, the last one to the end. The property:
//
//   - after every stop, the part file's bytes below its size minus W are the source's
//     (the invariant Resume relies on, resume.go);
//   - every run with Resume continues from exactly that point, max(0, size-W);
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
	stopNone   stopHow = iota - 1 // the run goes to the end
	stopCtx                       // the call's ctx is cancelled
	stopClose                     // Client.Close
	stopKill                      // every connection of the run dies at once
	stopFreeze                    // the process dies: the local part stays as it was (Get)
)

func (h stopHow) String() string {
	return [...]string{"none", "ctx", "Close", "connection killed", "process killed"}[h+1]
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
	s := int(p.span)
	p.size = pick(rng, rng.IntN(p.chunk), rng.IntN(s), s, s+1+rng.IntN(4*s), 2*s+rng.IntN(3*s))
	for range 1 + rng.IntN(3) {
		how := pick(rng, hows...)
		if how == stopFreeze && p.up {
			how = stopKill // an upload's process dying is its connections dying
		}
		p.stops = append(p.stops, resumeStop{how: how, at: rng.Int64N(int64(p.size) + 1)})
	}
	return p
}

func (p resumePlan) String() string {
	dir := "Get"
	if p.up {
		dir = "Put"
	}
	return fmt.Sprintf("%s of %d bytes, chunk %d, inflight %d, lanes %d, W %d, latency %v, reorder %d, hold %d, stops %v",
		dir, p.size, p.chunk, p.inflight, p.lanes, p.span, p.latency, p.reorder, p.hold, p.stops)
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
	// read returns a file as the server holds it (nil, fs.ErrNotExist when missing).
	read(name string) ([]byte, error)
	write(t *testing.T, name string, data []byte)
}

// resumeModel runs one plan against srv and checks the property. It counts the stops
// made (runs that ended before the transfer did) in stops.
func resumeModel(t *testing.T, srv resumeServer, plan resumePlan, stops *atomic.Int64) {
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
	for i, st := range append(plan.stops, resumeStop{how: stopNone}) {
		before, _ := rt.part()
		from := int64(0)
		if resume && len(before) > 0 {
			from = max(0, int64(len(before))-plan.span)
		}
		first, frozen, err := runOnce(t, srv, plan, rt, st, resume)
		log.add("run %d (stop %v at %d): resumed from %d, err %v", i, st.how, st.at, first, err)
		require.Equal(t, from, first, "run %d did not resume from the proven point", i)
		if err == nil {
			got, rerr := rt.dest()
			require.NoError(t, rerr)
			requireSameBytes(t, data, got)
			_, perr := rt.part()
			require.ErrorIs(t, perr, fs.ErrNotExist, "a part file is left beside a finished copy")
			return
		}
		require.NotEqual(t, stopNone, st.how, "the run without a stop failed: %v", err)
		stops.Add(1)
		if frozen != nil {
			rt.setPart(t, frozen)
		}
		part, perr := rt.part()
		if perr == nil {
			require.LessOrEqual(t, len(part), len(data), "the part is longer than the source")
			proven := max(0, len(part)-int(plan.span))
			requireSameBytes(t, data[:proven], part[:proven])
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

// runOnce runs the transfer once on a fresh Client, stopping it as st says. It returns
// where it started (the first progress report's bytes: where a resumed file
// continues), for stopFreeze the part file as it was when the process died, and the
// transfer's error.
func runOnce(t *testing.T, srv resumeServer, plan resumePlan, rt resumeRun, st resumeStop, resume bool) (first int64, frozen []byte, err error) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	c := srv.client(t, plan.clientOpts()...)
	var once sync.Once
	var pending sync.WaitGroup
	first = -1
	progress := OnProgress(func(p Progress) {
		if first < 0 {
			first = p.Bytes
		}
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
	within(t, func() { err = rt.run(ctx, c, opts) })
	pending.Wait()
	if st.how == stopCtx {
		settleAll(c) // the clean-up the call left in the background: Put's cut
	}
	c.Close()
	srv.settle(t)
	return first, frozen, err
}

// resumeRun is the transfer a model runs: a Put or a Get.
type resumeRun interface {
	run(ctx context.Context, c *Client, opts []TransferOption) error
	part() ([]byte, error) // the part file (nil, fs.ErrNotExist when there is none)
	setPart(t *testing.T, data []byte)
	dest() ([]byte, error) // the finished copy
}

type putRun struct {
	src string
	srv resumeServer
}

func (r *putRun) run(ctx context.Context, c *Client, opts []TransferOption) error {
	return c.Put(ctx, r.src, "dst", opts...)
}
func (r *putRun) part() ([]byte, error)             { return r.srv.read(".dst" + partSuffix) }
func (r *putRun) setPart(t *testing.T, data []byte) { r.srv.write(t, ".dst"+partSuffix, data) }
func (r *putRun) dest() ([]byte, error)             { return r.srv.read("dst") }
func (r *getRun) run(ctx context.Context, c *Client, opts []TransferOption) error {
	return c.Get(ctx, "src", r.dst, opts...)
}
func (r *getRun) part() ([]byte, error) { return os.ReadFile(r.dst + partSuffix) }
func (r *getRun) setPart(t *testing.T, data []byte) {
	require.NoError(t, os.WriteFile(r.dst+partSuffix, data, 0o644))
}
func (r *getRun) dest() ([]byte, error) { return os.ReadFile(r.dst) }

type getRun struct {
	dst string
	srv resumeServer
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

func (e *tsResume) kill()               { e.srv.KillSessions() }
func (e *tsResume) settle(t *testing.T) { e.srv.KillSessions() }

func (e *tsResume) read(name string) ([]byte, error) {
	b, err := e.srv.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return b, err
}

func (e *tsResume) write(t *testing.T, name string, data []byte) {
	require.NoError(t, e.srv.WriteFile(name, data, 0o644))
}

func TestModelResumeAfterStops(t *testing.T) {
	var stops atomic.Int64
	hows := []stopHow{stopCtx, stopClose, stopKill, stopFreeze}
	for _, seed := range modelSeeds(t, fixedSeeds(100)) {
		plan := newResumePlan(seed, hows)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			tsNoLeaks(t)
			resumeModel(t, newTSResume(t, plan.serverOpts()), plan, &stops)
		})
	}
	t.Logf("%d stops, each followed by a resume", stops.Load())
}
