package sftp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The resume mark (resumemark.go): a Put stopped by its ctx leaves its part cut to
// the acknowledged prefix and marked once its Client is closed, and the next run
// continues it from its end; a write that lands on the part after the mark takes it
// away; a server that ignores or refuses times, or a cut that fails, leaves no mark;
// a sibling whose CLOSE goes unanswered leaves no mark; a run that continues a marked
// part takes the mark off before it writes a byte. Against the in-process server
// answering out of order and carrying out each session's WRITEs late (HoldWrites),
// striped over four lanes, with W lowered so that a few MiB do what large files do.
// The model (model_resume_test.go) checks the resume point of every run on three
// servers; these check each part of the mark rule (resume.go) on its own.

// markCase is one upload the tests stop and resume.
type markCase struct {
	env  *tsResume
	plan resumePlan
	src  string
	data []byte
}

func newMarkCase(t *testing.T, seed uint64, tune func(*testserver.Options)) *markCase {
	return newMarkCaseOf(t, 3<<20, seed, tune)
}

func newMarkCaseOf(t *testing.T, size int, seed uint64, tune func(*testserver.Options)) *markCase {
	plan := resumePlan{seed: seed, reorder: 4, hold: 8, lanes: 4, chunk: 16 << 10, inflight: 64, span: 512 << 10}
	opts := plan.serverOpts()
	if tune != nil {
		tune(&opts)
	}
	m := &markCase{env: newTSResume(t, opts), plan: plan, data: gpData(size, seed)}
	m.src = filepath.Join(t.TempDir(), "src")
	gpWrite(t, m.src, m.data)
	return m
}

// stopPut runs a Put on a fresh Client, cancels its ctx once at bytes are
// acknowledged, and closes the Client at once (Close lets the cut finish). It returns
// the last progress report's bytes, the prefix the server acknowledged.
func (m *markCase) stopPut(t *testing.T, at int64, opts ...TransferOption) int64 {
	c := m.env.client(t, m.plan.clientOpts()...)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var last int64
	opts = append(opts, OnProgress(func(p Progress) {
		last = p.Bytes
		if p.Bytes >= at {
			cancel()
		}
	}))
	var err error
	within(t, func() { err = c.Put(ctx, m.src, "dst", opts...) })
	require.ErrorIs(t, err, context.Canceled)
	within(t, func() { c.Close() })
	return last
}

// resumePut runs a Put with Resume to the end on a fresh Client and returns where it
// continued from; the copy must be the source.
func (m *markCase) resumePut(t *testing.T, opts ...TransferOption) int64 {
	c := m.env.client(t, m.plan.clientOpts()...)
	first := int64(-1)
	opts = append(opts, Resume(), OnProgress(func(p Progress) {
		if first < 0 {
			first = p.Bytes
		}
	}))
	var err error
	within(t, func() { err = c.Put(testCtx(t), m.src, "dst", opts...) })
	require.NoError(t, err)
	got, err := m.env.read("dst")
	require.NoError(t, err)
	requireSameBytes(t, m.data, got)
	c.Close()
	return first
}

// part is the part file as the server holds it, and whether it carries the mark; it
// must be the source's bytes up to where that says.
func (m *markCase) part(t *testing.T) ([]byte, bool) {
	part, err := m.env.read(".dst" + partSuffix)
	require.NoError(t, err)
	marked := m.env.marked(t, ".dst"+partSuffix)
	proven, _ := expectedResume(part, marked, m.plan.span, 0)
	requireSameBytes(t, m.data[:proven], part[:proven])
	return part, marked
}

// A Put stopped by its ctx, its Client closed at once: the part is cut to the prefix
// acknowledged and marked, and Resume continues it from its end.
func TestStoppedPutResumesAtTheCut(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			m := newMarkCase(t, seed, nil)
			acked := m.stopPut(t, int64(1<<20+seed*97<<10))
			part, marked := m.part(t)
			require.True(t, marked, "the part was not marked")
			require.Equal(t, acked, int64(len(part)), "the part is not cut to the acknowledged prefix")
			require.Equal(t, acked, m.resumePut(t))
		})
	}
}

// A WRITE that lands on a marked part, here from another session whose WRITEs the
// server carries out late, takes the mark away: the part may no longer be whole
// below its end, and Resume goes back W.
func TestLateWriteRemovesTheMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(size int64) int64 // where the late WRITE lands
	}{
		{"inside the part", func(size int64) int64 { return size - 100 }},
		{"past its end", func(size int64) int64 { return size + 64<<10 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMarkCase(t, 7, nil)
			m.stopPut(t, 2<<20)
			part, marked := m.part(t)
			require.True(t, marked)

			c := m.env.client(t)
			f, err := c.OpenFile(testCtx(t), ".dst"+partSuffix, os.O_RDWR, 0)
			require.NoError(t, err)
			within(t, func() { _, err = f.WriteAt([]byte("stray bytes, a nonce say"), tc.at(int64(len(part)))) })
			require.NoError(t, err)
			require.NoError(t, f.Close())
			c.Close()

			after, marked := m.part(t)
			require.False(t, marked, "the mark survived a write")
			require.Equal(t, max(0, int64(len(after))-m.plan.span), m.resumePut(t))
		})
	}
}

// A server that answers OK to times and ignores them (SFTPGo's setstat_mode 1), or one
// that refuses them: the part is cut but not marked, and Resume goes back W.
func TestMarkNeedsTheTimes(t *testing.T) {
	refused := func(o *testserver.Options) {
		var mu sync.Mutex
		seen := map[string]int{}
		o.Fail = func(r testserver.Request) uint32 {
			if r.Type != testserver.TypeFsetstat {
				return 0
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[r.Handle]++; seen[r.Handle] == 2 { // the cut's, then the mark's
				return testserver.StatusFailure
			}
			return 0
		}
	}
	for _, tc := range []struct {
		name string
		tune func(*testserver.Options)
	}{
		{"ignored", func(o *testserver.Options) { o.IgnoreSetTimes = true }},
		{"refused", refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMarkCase(t, 8, tc.tune)
			acked := m.stopPut(t, 1<<20)
			part, marked := m.part(t)
			require.False(t, marked)
			require.Equal(t, acked, int64(len(part)), "the cut did not stand")
			require.Equal(t, max(0, acked-m.plan.span), m.resumePut(t))
		})
	}
}

// A cut the server refuses is not followed by the mark: the times go only after the
// size's OK (a server may apply the times of a request whose size fails).
func TestNoMarkAfterAFailedCut(t *testing.T) {
	var fsetstats atomic.Int32
	m := newMarkCase(t, 9, func(o *testserver.Options) {
		o.Fail = func(r testserver.Request) uint32 {
			if r.Type == testserver.TypeFsetstat {
				fsetstats.Add(1)
				return testserver.StatusFailure
			}
			return 0
		}
	})
	m.stopPut(t, 1<<20)
	part, marked := m.part(t)
	require.False(t, marked)
	require.EqualValues(t, 1, fsetstats.Load(), "something followed the refused cut")
	require.Equal(t, max(0, int64(len(part))-m.plan.span), m.resumePut(t))
}

// The siblings' CLOSEs never answered (their WRITEs could land later, for all the
// client knows): Client.Close gives the cut its grace and then goes, and the part is
// not marked. Every CLOSE sent from the stop on goes unanswered.
func TestNoMarkWithoutTheSiblingsClosed(t *testing.T) {
	var stall atomic.Bool // from the stop on
	var mu sync.Mutex
	writers := map[string]bool{} // handles WRITEs came on
	// Large enough that the siblings join long before the end.
	m := newMarkCaseOf(t, 32<<20, 10, func(o *testserver.Options) {
		// Nothing held: a sibling reads the stripe round's nonce as soon as it is
		// written, and joins (a nonce held late turns it away: then no sibling
		// writes, and the test proves nothing).
		o.HoldWrites = 0
		o.Stall = func(r testserver.Request) bool {
			if r.Type == testserver.TypeWrite {
				mu.Lock()
				writers[r.Handle] = true
				mu.Unlock()
			}
			return stall.Load() && r.Type == testserver.TypeClose
		}
	})
	// A wide span: a stripe round's held chunk then waits for its siblings' proof,
	// where with a narrow one it goes out first and turns them away.
	m.plan.span = 8 << 20
	c := m.env.client(t, append(m.plan.clientOpts(), withStallGrace(100*time.Millisecond))...)
	ctx, cancel := context.WithCancel(testCtx(t))
	var err error
	within(t, func() {
		err = c.Put(ctx, m.src, "dst", OnProgress(func(p Progress) {
			mu.Lock()
			striped := len(writers) > 1
			mu.Unlock()
			if p.Bytes >= 1<<20 && striped { // a sibling has written
				stall.Store(true)
				cancel()
			}
		}))
	})
	require.ErrorIs(t, err, context.Canceled, "the upload ended before a sibling wrote")
	within(t, func() { c.Close() })
	m.env.srv.KillSessions()
	stall.Store(false)
	part, marked := m.part(t)
	require.False(t, marked, "marked with the siblings' CLOSEs unanswered")
	require.Equal(t, max(0, int64(len(part))-m.plan.span), m.resumePut(t))
}

// A run that continues a marked part takes the mark off, and has the answer, before
// any WRITE arrives; when the server refuses, the part is started over.
func TestResumeTakesTheMarkOffFirst(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refuse), func(t *testing.T) {
			var mu sync.Mutex
			var arrivals []uint8
			var record atomic.Bool
			m := newMarkCase(t, 11, func(o *testserver.Options) {
				o.Fail = func(r testserver.Request) uint32 {
					if !record.Load() {
						return 0
					}
					mu.Lock()
					defer mu.Unlock()
					arrivals = append(arrivals, r.Type)
					if refuse && r.Type == testserver.TypeFsetstat && !slices.Contains(arrivals, testserver.TypeWrite) {
						return testserver.StatusFailure
					}
					return 0
				}
			})
			acked := m.stopPut(t, 1<<20)
			_, marked := m.part(t)
			require.True(t, marked)
			record.Store(true)
			from := m.resumePut(t)
			mu.Lock()
			defer mu.Unlock()
			unmark := slices.Index(arrivals, testserver.TypeFsetstat)
			write := slices.Index(arrivals, testserver.TypeWrite)
			require.GreaterOrEqual(t, unmark, 0, "the mark was not taken off")
			require.Less(t, unmark, write, "a WRITE arrived before the mark was taken off")
			if refuse {
				require.Zero(t, from, "a part whose mark stays was continued")
			} else {
				require.Equal(t, acked, from)
			}
		})
	}
}

// A Put to the part of one stopped on the same Client waits for the stopped one's end
// (its cut and mark, in the background) before it looks at the part: the cut would
// otherwise land under it, through the old handle. The replies come late (2 ms), so
// that end takes a few round trips after the first Put returned.
func TestNextPutWaitsForTheCut(t *testing.T) {
	var mu sync.Mutex
	var events []string
	m := newMarkCase(t, 12, func(o *testserver.Options) {
		o.Latency = 2 * time.Millisecond
		o.Fail = func(r testserver.Request) uint32 {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Type == testserver.TypeFsetstat:
				events = append(events, "fsetstat")
			case r.Type == testserver.TypeLstat && r.Path == testPart:
				events = append(events, "lstat")
			}
			return 0
		}
	})
	c := m.env.client(t, m.plan.clientOpts()...)
	ctx, cancel := context.WithCancel(testCtx(t))
	var last int64
	var err error
	within(t, func() {
		err = c.Put(ctx, m.src, "dst", OnProgress(func(p Progress) {
			if last = p.Bytes; p.Bytes >= 1<<20 {
				cancel()
			}
		}))
	})
	require.ErrorIs(t, err, context.Canceled)
	first := int64(-1)
	within(t, func() {
		err = c.Put(testCtx(t), m.src, "dst", Resume(), OnProgress(func(p Progress) {
			if first < 0 {
				first = p.Bytes
			}
		}))
	})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"fsetstat", "fsetstat", "lstat", "fsetstat"}, events[:4],
		"the next Put looked at the part before the cut and mark (then its own unmark)")
	require.Equal(t, last, first, "the next Put did not continue from the cut")
}
