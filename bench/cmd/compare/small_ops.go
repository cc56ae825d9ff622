package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The small-call workloads, run in a child process on one client: every goroutine
// calls the same operation in a loop until the cell's time is up, timing each call.
// The client is reached through smallClient, so sluice and pkg/sftp run the very same
// loop.

// smallOp is one operation the small-call case measures.
type smallOp string

const (
	opStat      smallOp = "stat"
	opOpen      smallOp = "open"
	opReadFile  smallOp = "readfile"
	opWriteFile smallOp = "writefile"
	opReadDir   smallOp = "readdir"
	opRemove    smallOp = "remove"
	opRename    smallOp = "rename"
	opMkdir     smallOp = "mkdir"
)

// smallOps is every operation, in the order the tables list them.
var smallOps = []smallOp{opStat, opOpen, opReadFile, opWriteFile, opReadDir, opRemove, opRename, opMkdir}

// smallFloor is the fewest round trips one loop iteration of op can take against an
// in-order server: one request and its reply for the single-path calls; OPEN then the
// rest for a whole file or listing. Open's loop also closes the file it opened (the
// Close is not timed, but it is a round trip of the loop).
var smallFloor = map[smallOp]int{
	opStat: 1, opOpen: 2, opReadFile: 2, opWriteFile: 2, opReadDir: 2, opRemove: 1, opRename: 1, opMkdir: 1,
}

const (
	smallFileSize = 4 << 10 // ReadFile's and WriteFile's file
	smallDirSize  = 20      // ReadDir's directory: entries
)

// smallClient is what the small-call loop needs of a client. Each call is one of the
// library's own calls, or what a user of a library without it writes (see the pkg/sftp
// implementation).
type smallClient interface {
	stat(ctx context.Context, p string) error
	// open opens p for reading and returns the file's close, which the loop calls
	// untimed.
	open(ctx context.Context, p string) (func() error, error)
	readFile(ctx context.Context, p string) ([]byte, error)
	writeFile(ctx context.Context, p string, data []byte) error
	readDir(ctx context.Context, p string) (int, error)
	remove(ctx context.Context, p string) error
	rename(ctx context.Context, from, to string) error
	mkdir(ctx context.Context, p string) error
	close() error
}

// smallClients makes a client of each kind on an SSH connection; the sluice one is
// registered only when the sluice package builds.
var smallClients = map[string]func(ctx context.Context, conn *ssh.Client) (smallClient, error){}

// smallJob is what a small-call child runs: one operation on one client for a time.
type smallJob struct {
	Client     string        `json:"client"`
	Op         smallOp       `json:"op"`
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration"`
	// Dir is the cell's directory, the same path locally and on the server (both on
	// this machine): the child creates what the calls need there before it starts.
	Dir string `json:"dir"`
	// Pool is how many files each goroutine may remove (opRemove).
	Pool int `json:"pool,omitempty"`
}

// smallResult is a small-call child's report.
type smallResult struct {
	Calls int64 `json:"calls"`
	// Seconds runs from the start to the end of the last call: calls/s is Calls over
	// it.
	Seconds float64 `json:"seconds"`
	// CallSeconds sums the time of every timed call: over Calls, the mean latency.
	CallSeconds float64 `json:"call_seconds"`
	// MedianSeconds is the median time of one call: on a shared machine, where a
	// busy scheduler now and then delays one, steadier than the mean.
	MedianSeconds float64 `json:"median_seconds"`
	// Exhausted: a goroutine ran out of files to remove before the time was up, so
	// the rate is low.
	Exhausted bool `json:"exhausted,omitempty"`
	// ClientCPUSeconds is the CPU time (user + system) the client process spent in
	// the timed part.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
}

func (r smallResult) rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Seconds
}

// latency is the mean time of one call.
func (r smallResult) latency() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return time.Duration(r.CallSeconds / float64(r.Calls) * float64(time.Second))
}

// median is the median time of one call.
func (r smallResult) median() time.Duration {
	return time.Duration(r.MedianSeconds * float64(time.Second))
}

// smallWorker is one goroutine's loop state: which of its own files it works on.
type smallWorker struct {
	j    *smallJob
	c    smallClient
	id   int
	data []byte // the content of the shared file, and what WriteFile writes
	n    int    // calls made, warm-up included
}

// smallLayout names the cell's files: the shared ones, and each goroutine's own.
func (w *smallWorker) path(name string) string { return filepath.Join(w.j.Dir, name) }

func (w *smallWorker) own(kind string, i int) string {
	return w.path(fmt.Sprintf("%s%03d-%06d", kind, w.id, i))
}

// call makes one call of the operation and checks what it returned. errPoolEmpty
// means a Remove goroutine has no file left.
func (w *smallWorker) call(ctx context.Context) (timed time.Duration, err error) {
	i := w.n
	w.n++
	start := time.Now()
	switch w.j.Op {
	case opStat:
		err = w.c.stat(ctx, w.path("f4k"))
	case opOpen:
		var closeFile func() error
		closeFile, err = w.c.open(ctx, w.path("f4k"))
		timed = time.Since(start)
		if err == nil {
			err = closeFile()
		}
		return timed, err
	case opReadFile:
		var b []byte
		if b, err = w.c.readFile(ctx, w.path("f4k")); err == nil && !bytes.Equal(b, w.data) {
			err = fmt.Errorf("ReadFile returned %d bytes, not the file's %d", len(b), len(w.data))
		}
	case opWriteFile:
		err = w.c.writeFile(ctx, w.own("w", 0), w.data)
	case opReadDir:
		var n int
		if n, err = w.c.readDir(ctx, w.path("d20")); err == nil && n != smallDirSize {
			err = fmt.Errorf("ReadDir listed %d entries, want %d", n, smallDirSize)
		}
	case opRemove:
		if i >= w.j.Pool {
			return 0, errPoolEmpty
		}
		err = w.c.remove(ctx, w.own("rm", i))
	case opRename:
		from, to := w.own("mv", i%2), w.own("mv", (i+1)%2)
		err = w.c.rename(ctx, from, to)
	case opMkdir:
		err = w.c.mkdir(ctx, w.own("mk", i))
	default:
		err = fmt.Errorf("unknown operation %q", w.j.Op)
	}
	return time.Since(start), err
}

var errPoolEmpty = errors.New("no file left to remove")

// smallContent is the shared file's content: random, so nothing on the way can
// shortcut it.
func smallContent() []byte {
	b := make([]byte, smallFileSize)
	rng := rand.NewChaCha8([32]byte{'s', 'm', 'a', 'l', 'l'})
	_, _ = rng.Read(b)
	return b
}

// prepareSmall creates what the calls of j need in j.Dir, locally: the file Stat,
// Open and ReadFile use, ReadDir's directory, each goroutine's files to remove and
// to rename. The directory is open to every user: the server may run as another
// account (see benchUser), and removes and renames there.
func prepareSmall(j *smallJob, data []byte) error {
	if err := os.MkdirAll(j.Dir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(j.Dir, 0o777); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(j.Dir, "f4k"), data, 0o644); err != nil {
		return err
	}
	d := filepath.Join(j.Dir, "d20")
	if err := os.Mkdir(d, 0o755); err != nil {
		return err
	}
	for i := range smallDirSize {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("e%02d", i)), data[:i], 0o644); err != nil {
			return err
		}
	}
	for g := range j.Goroutines {
		w := &smallWorker{j: j, id: g}
		switch j.Op {
		case opRename:
			if err := os.WriteFile(w.own("mv", 0), nil, 0o644); err != nil {
				return err
			}
		case opRemove:
			for i := range j.Pool {
				if err := os.WriteFile(w.own("rm", i), nil, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runSmall runs j on c: each goroutine makes one untimed call first (which opens the
// channels a client opens on first use), then ready is called, and once it returns
// every goroutine calls in a loop until j.Duration has passed.
func runSmall(ctx context.Context, c smallClient, j *smallJob, ready func() error) (smallResult, error) {
	data := smallContent()
	workers := make([]*smallWorker, j.Goroutines)
	for g := range workers {
		workers[g] = &smallWorker{j: j, c: c, id: g, data: data}
	}
	if err := eachWorker(workers, func(w *smallWorker) error {
		_, err := w.call(ctx)
		return err
	}); err != nil {
		return smallResult{}, fmt.Errorf("warm-up: %w", err)
	}
	if err := ready(); err != nil {
		return smallResult{}, err
	}
	var (
		mu    sync.Mutex
		res   smallResult
		end   time.Time
		times []time.Duration
	)
	cpu0 := processCPU()
	start := time.Now()
	stop := start.Add(j.Duration)
	err := eachWorker(workers, func(w *smallWorker) error {
		var mine []time.Duration
		var spent time.Duration
		var last time.Time
		var err error
		for time.Now().Before(stop) {
			var d time.Duration
			if d, err = w.call(ctx); err != nil {
				break
			}
			mine = append(mine, d)
			spent += d
			last = time.Now()
		}
		mu.Lock()
		defer mu.Unlock()
		res.Calls += int64(len(mine))
		res.CallSeconds += spent.Seconds()
		times = append(times, mine...)
		if last.After(end) {
			end = last
		}
		if errors.Is(err, errPoolEmpty) {
			res.Exhausted = true
			return nil
		}
		return err
	})
	if err != nil {
		return smallResult{}, err
	}
	if res.Calls == 0 {
		return smallResult{}, errors.New("no call completed")
	}
	res.Seconds = end.Sub(start).Seconds()
	slices.Sort(times)
	res.MedianSeconds = times[len(times)/2].Seconds()
	res.ClientCPUSeconds = (processCPU() - cpu0).Seconds()
	return res, nil
}

// eachWorker runs fn for every worker at once and returns the first error.
func eachWorker(workers []*smallWorker, fn func(w *smallWorker) error) error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for g, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = fn(w)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
