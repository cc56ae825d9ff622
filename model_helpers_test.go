package sftp

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seeds of the model-based tests (model_test.go, model_fileops_test.go). Each test
// runs a fixed set of seeds, so CI is repeatable; a failure logs its seed and what the
// seed chose, and replays with
//
//	SLUICE_MODEL_SEED=<seed>[,<seed>...] go test -race -run '<Test>' .
//
// SLUICE_MODEL_RUNS=<n> adds n seeds drawn from the clock, for a longer hunt by hand;
// they are logged too.

// modelSeeds returns the seeds to run: SLUICE_MODEL_SEED's alone when it is set, else
// fixed, plus SLUICE_MODEL_RUNS random ones.
func modelSeeds(t *testing.T, fixed []uint64) []uint64 {
	t.Helper()
	if env := os.Getenv("SLUICE_MODEL_SEED"); env != "" {
		var seeds []uint64
		for _, f := range strings.Split(env, ",") {
			s, err := strconv.ParseUint(strings.TrimSpace(f), 0, 64)
			if err != nil {
				t.Fatalf("SLUICE_MODEL_SEED: %v", err)
			}
			seeds = append(seeds, s)
		}
		return seeds
	}
	seeds := fixed
	if env := os.Getenv("SLUICE_MODEL_RUNS"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil || n < 0 {
			t.Fatalf("SLUICE_MODEL_RUNS=%q: want a count", env)
		}
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
		for range n {
			seeds = append(seeds, rng.Uint64()>>1)
		}
		t.Logf("SLUICE_MODEL_RUNS: %d seeds besides the fixed ones", n)
	}
	return seeds
}

// fixedSeeds is 1..n.
func fixedSeeds(n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

// modelLog keeps what a seed chose and did, and prints it with the replay line if the
// test fails.
type modelLog struct {
	t     testing.TB
	seed  uint64
	lines []string
}

func newModelLog(t testing.TB, seed uint64) *modelLog {
	l := &modelLog{t: t, seed: seed}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d; replay with SLUICE_MODEL_SEED=%d go test -run '%s' .\n%s",
				seed, seed, strings.SplitN(t.Name(), "/", 2)[0], strings.Join(l.lines, "\n"))
		}
	})
	return l
}

func (l *modelLog) add(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// mix is a hash of a seed and some numbers: a decision that depends on them alone, not
// on the order in which requests happen to arrive (splitmix64's finaliser).
func mix(seed uint64, xs ...uint64) uint64 {
	h := seed
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// boundarySizes are the sizes where a transfer's pieces change shape, for READs or
// WRITEs of chunk bytes and a window of window requests.
func boundarySizes(chunk, window int) []int {
	w := chunk * window
	return []int{0, 1, chunk - 1, chunk, chunk + 1, w - 1, w, w + 1, 2*w + chunk/2, 3*w + 1}
}

// pick returns one of xs.
func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }
