package sftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/fstest"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The read side against a server that answers in random orders: replies held and
// shuffled, DATA cut short at random or at a read cap, and on some seeds EOF for READs
// inside the file (a server that lies, or a file that changes). Whatever it does, the
// property is the one of issue 19: a nil error means every byte is right. Precisely,
// for every reader of the engine:
//
//   - what it hands over is the file's bytes from where it started, with no hole and
//     nothing else;
//   - a clean end (nil, or io.EOF where that is the reader's way to say the file
//     ended) short of the file's real end happens only where the server said EOF and
//     sent no data past it: a consistent server, which the client cannot tell from a
//     shorter file;
//   - otherwise the only failure is the contradiction (the server reported the end at
//     X and sent data past it), at the lowest end the server reported, after exactly
//     the bytes before it.
//
// The server records what it really sent (readEnds of its replies), so the checks
// need no knowledge of what the client did.

// faultPlan is what a seed chose for one run.
type faultPlan struct {
	seed     uint64
	chunk    int // WithMaxPacket: bytes per READ
	inflight int // WithMaxInflight
	size     int
	readCap  int // 0: none
	shortP   int // per mille of READs answered short
	lieP     int // per mille of READs inside the file answered EOF
	reorder  int // testserver Reorder group; 0: in order
}

func newFaultPlan(seed uint64) faultPlan {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := faultPlan{seed: seed, chunk: pick(rng, 512, 1000, 4096), inflight: pick(rng, 1, 2, 3, 5, 8)}
	p.size = pick(rng, boundarySizes(p.chunk, p.inflight)...)
	if rng.IntN(3) == 0 {
		p.readCap = pick(rng, 1, 100, p.chunk/2, p.chunk-1)
	}
	p.shortP = pick(rng, 0, 0, 100, 300, 700)
	if rng.IntN(3) == 0 {
		p.lieP = pick(rng, 20, 100, 300)
	}
	p.reorder = pick(rng, 0, 2, 3, 8, 16)
	return p
}

func (p faultPlan) String() string {
	return fmt.Sprintf("chunk %d, inflight %d, size %d, read cap %d, short %d‰, EOF lies %d‰, reorder %d",
		p.chunk, p.inflight, p.size, p.readCap, p.shortP, p.lieP, p.reorder)
}

// sentEnds records what a server said about the end of its files: readEnds over every
// READ reply it sent.
type sentEnds struct {
	mu   sync.Mutex
	ends readEnds
}

func (e *sentEnds) observe(req testserver.Request, reply []byte) [][]byte {
	if req.Type != testserver.TypeRead || len(reply) < 13 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch reply[4] {
	case testserver.TypeData:
		e.ends.sawData(int64(req.Offset), int64(binary.BigEndian.Uint32(reply[9:13])))
	case testserver.TypeStatus:
		if binary.BigEndian.Uint32(reply[9:13]) == testserver.StatusEOF {
			e.ends.sawEOF(int64(req.Offset))
		}
	}
	return nil
}

func (e *sentEnds) get() readEnds {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ends
}

// faultServer starts a server and Client as plan says, serving data as /f.
func faultServer(t *testing.T, plan faultPlan, data []byte) (*Client, *sentEnds) {
	t.Helper()
	rec := &sentEnds{ends: newReadEnds()}
	opts := testserver.Options{
		ReadCap: plan.readCap,
		Reorder: plan.reorder,
		Seed:    plan.seed,
		Corrupt: rec.observe,
		Shorten: func(off int64, asked int) int {
			h := mix(plan.seed, 1, uint64(off), uint64(asked))
			if asked > 1 && int(h%1000) < plan.shortP {
				return 1 + int(h>>10)%(asked-1)
			}
			return asked
		},
		Fail: func(r testserver.Request) uint32 {
			if r.Type == testserver.TypeRead && int(r.Offset) < plan.size &&
				int(mix(plan.seed, 2, r.Offset)%1000) < plan.lieP {
				return testserver.StatusEOF
			}
			return 0
		},
	}
	c, srv := newTestServerClient(t, opts, WithMaxPacket(plan.chunk), WithMaxInflight(plan.inflight))
	require.NoError(t, srv.WriteFile("/f", data, 0o644))
	return c, rec
}

// readOutcome is what one reader handed over: got, read from start, and how it ended.
// clean is a nil error, or io.EOF where the reader reports the file's end with it.
type readOutcome struct {
	start int64
	limit int64 // the reader's own end (ReadAt's buffer), or -1
	got   []byte
	clean bool
	err   error
}

// faultReader reads /f one way; rng chooses its offsets and buffer sizes.
type faultReader func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome

var faultReaders = map[string]faultReader{
	"WriteTo/WriterAt": func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome {
		f, start := openAt(t, c, rng, plan)
		lf, err := os.CreateTemp(t.TempDir(), "out")
		require.NoError(t, err)
		defer lf.Close()
		var n int64
		within(t, func() { n, err = f.WriteTo(lf) })
		pos, serr := lf.Seek(0, io.SeekCurrent)
		require.NoError(t, serr)
		require.Equal(t, n, pos, "the file is left after the n bytes")
		b, rerr := os.ReadFile(lf.Name())
		require.NoError(t, rerr)
		if err == nil {
			require.Len(t, b, int(n), "nothing written past n on success")
		}
		require.GreaterOrEqual(t, len(b), int(n))
		return readOutcome{start: start, limit: -1, got: b[:n], clean: err == nil, err: err}
	},
	"WriteTo/Writer": func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome {
		f, start := openAt(t, c, rng, plan)
		var b bytes.Buffer
		var n int64
		var err error
		within(t, func() { n, err = f.WriteTo(&b) })
		require.Equal(t, int64(b.Len()), n)
		return readOutcome{start: start, limit: -1, got: b.Bytes(), clean: err == nil, err: err}
	},
	"ReadAt": func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome {
		f, err := c.Open(testCtx(t), "/f")
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		off := int64(rng.IntN(plan.size + plan.chunk + 1))
		p := make([]byte, max(1, pick(rng, boundarySizes(plan.chunk, plan.inflight)...)))
		var n int
		within(t, func() { n, err = f.ReadAt(p, off) })
		if err == nil {
			require.Equal(t, len(p), n, "ReadAt returns fewer only with an error")
		}
		return readOutcome{start: off, limit: off + int64(len(p)), got: p[:n], clean: err == nil || err == io.EOF, err: err}
	},
	"Read": func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome {
		f, start := openAt(t, c, rng, plan)
		var got []byte
		var err error
		within(t, func() {
			for {
				p := make([]byte, max(1, pick(rng, 1, 7, plan.chunk-1, plan.chunk, plan.chunk+1, 3*plan.chunk)))
				var n int
				n, err = f.Read(p)
				got = append(got, p[:n]...)
				if err != nil {
					return
				}
				require.Positive(t, n, "Read returned 0 bytes and no error")
			}
		})
		return readOutcome{start: start, limit: -1, got: got, clean: err == io.EOF, err: err}
	},
	"ReadAll": func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome {
		f, start := openAt(t, c, rng, plan)
		var got []byte
		var err error
		within(t, func() { got, err = io.ReadAll(f) })
		return readOutcome{start: start, limit: -1, got: got, clean: err == nil, err: err}
	},
	"Get": func(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) readOutcome {
		dst := filepath.Join(t.TempDir(), "f")
		err := c.Get(testCtx(t), "/f", dst)
		if err == nil {
			return readOutcome{limit: -1, got: readLocal(t, dst), clean: true}
		}
		_, serr := os.Lstat(dst)
		require.ErrorIs(t, serr, os.ErrNotExist, "a failed Get leaves nothing under the name")
		part, perr := os.ReadFile(dst + partSuffix)
		if errors.Is(perr, os.ErrNotExist) {
			part = nil // a part without data is removed
		} else {
			require.NoError(t, perr)
		}
		return readOutcome{limit: -1, got: part, err: err}
	},
}

// openAt opens /f and seeks to an offset the reader starts from: mostly 0, else
// anywhere up to a chunk past the end.
func openAt(t *testing.T, c *Client, rng *rand.Rand, plan faultPlan) (*File, int64) {
	t.Helper()
	f, err := c.Open(testCtx(t), "/f")
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	var off int64
	if rng.IntN(3) == 0 {
		off = int64(rng.IntN(plan.size + plan.chunk + 1))
		_, err := f.Seek(off, io.SeekStart)
		require.NoError(t, err)
	}
	return f, off
}

// checkFaultOutcome asserts the property on what one reader handed over.
func checkFaultOutcome(t *testing.T, data []byte, sent readEnds, o readOutcome) {
	t.Helper()
	end := int64(len(data))
	if o.limit >= 0 {
		end = min(end, o.limit)
	}
	want := data[min(o.start, end):end]
	require.LessOrEqual(t, len(o.got), len(want), "more bytes than the file holds from %d", o.start)
	require.True(t, bytes.Equal(want[:len(o.got)], o.got), "the bytes from %d differ from the file's", o.start)
	got := o.start + int64(len(o.got))
	if o.clean {
		require.NoError(t, sent.conflict(), "the server contradicted itself, yet the read ended cleanly (%v)", o.err)
		if len(o.got) < len(want) {
			require.Equal(t, got, sent.eof, "a clean end at %d short of the file's %d where the server reported no end", got, end)
		}
		return
	}
	var ec *eofConflictError
	require.True(t, errors.As(o.err, &ec), "the only failure is a contradiction; got %v", o.err)
	require.Error(t, sent.conflict(), "a contradiction the server did not commit")
	require.Equal(t, sent.eof, ec.at, "the contradiction is at the lowest end reported")
	if o.start < ec.at {
		require.Equal(t, ec.at, got, "everything before the reported end is handed over, then the error")
	}
}

func TestModelReadsUnderFaults(t *testing.T) {
	for _, seed := range modelSeeds(t, fixedSeeds(24)) {
		plan := newFaultPlan(seed)
		data := randBytes(plan.size, seed)
		for _, name := range slices.Sorted(maps.Keys(faultReaders)) {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, name), func(t *testing.T) {
				log := newModelLog(t, seed)
				log.add("plan: %v", plan)
				c, rec := faultServer(t, plan, data)
				o := faultReaders[name](t, c, rand.New(rand.NewPCG(seed, 2)), plan)
				log.add("%s from %d (limit %d): %d bytes, err %v; server sent ends %+v", name, o.start, o.limit, len(o.got), o.err, rec.get())
				checkFaultOutcome(t, data, rec.get(), o)
			})
		}
	}
}

// fstest.TestFS over FS() and iotest.TestReader over a File, against the in-process
// server answering in random orders, short and at a read cap (no EOF lies: these
// check a consistent server): the path of issue 19 item 10, where a ReadAt of one byte
// follows reads that left replies in flight, under every order the seeds draw.
func TestModelFSUnderFaults(t *testing.T) {
	for _, seed := range modelSeeds(t, fixedSeeds(8)) {
		plan := newFaultPlan(seed)
		plan.lieP = 0
		plan.size = max(plan.size, 3*plan.chunk+1)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			log := newModelLog(t, seed)
			log.add("plan: %v", plan)
			data := randBytes(plan.size, seed)
			c, rec := faultServer(t, plan, data)
			within(t, func() { require.NoError(t, fstest.TestFS(c.DirFS("/"), "f")) })
			f, err := c.Open(testCtx(t), "/f")
			require.NoError(t, err)
			defer f.Close()
			within(t, func() { require.NoError(t, iotest.TestReader(f, data)) })
			require.NoError(t, rec.get().conflict())
		})
	}
}
