package sftp

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Issue 26, item 5: what a tree's failures hold is charged to the call's memory
// account. A recursive Get whose every OPEN was refused with a 250 KB STATUS message
// returned a *TreeError holding 243 MiB under the default 64 MiB limit: each failure
// kept the whole message, and only their count was bounded.

// retainedHeap is the heap in use once everything unreachable is collected (twice:
// sync.Pool keeps what it holds through one collection).
func retainedHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// getTreeError runs a recursive Get of /refused and returns its *TreeError with the
// heap it holds: the heap in use with it, less the heap in use once it is dropped. (The
// in-process server's own buffers stay either way.)
func getTreeError(t *testing.T, c *Client) (te *TreeError, held int64) {
	t.Helper()
	err := c.Get(testCtx(t), "/refused", filepath.Join(t.TempDir(), "out"), Recursive())
	require.ErrorAs(t, err, &te)
	// A copy without the failures, for the caller's checks of what the error says:
	// made first, it is in the heap both times.
	kept := &TreeError{Op: te.Op, Count: te.Count, Stopped: te.Stopped, Failed: make([]error, len(te.Failed))}
	for i, f := range te.Failed {
		kept.Failed[i] = summarize(f)
	}
	msg := te.Error()
	with := retainedHeap()
	runtime.KeepAlive(err)
	err, te = nil, nil
	held = with - retainedHeap()
	t.Logf("the TreeError holds %.2f MiB in %d of %d failures", float64(held)/(1<<20), len(kept.Failed), kept.Count)
	kept.Stopped = errors.New(msg) // its text, for the checks
	return kept, held
}

// summarize is a small error standing for f: its *StatusError, or a short text.
func summarize(f error) error {
	var se *StatusError
	if errors.As(f, &se) {
		return &StatusError{Code: se.Code, Message: strings.Clone(se.Message)}
	}
	return errors.New("not a StatusError")
}

// refusedTree is a server whose directory /refused lists files, perPage to a READDIR,
// named by name, and refuses the OPEN of each with a STATUS FAILURE of msgLen bytes.
func refusedTree(t *testing.T, files, perPage int, name func(i int) string, msgLen int, limit int64) *Client {
	t.Helper()
	msg := strings.Repeat("m", msgLen)
	c, srv := newTestServerClient(t, testserver.Options{
		Listing: func(p string) testserver.Lister {
			if p != "/refused" {
				return nil
			}
			return func(page int) []testserver.ListEntry {
				var out []testserver.ListEntry
				for i := page * perPage; i < min(files, (page+1)*perPage); i++ {
					out = append(out, testserver.ListEntry{Name: name(i), Mode: 0o100644, Size: 10})
				}
				return out
			}
		},
		Corrupt: func(req testserver.Request, _ []byte) [][]byte {
			if req.Type == testserver.TypeOpen && strings.HasPrefix(req.Path, "/refused/") {
				return [][]byte{statusReply(req.ID, sshfx.StatusFailure, msg)}
			}
			return nil
		},
	}, WithMemoryLimit(limit))
	require.NoError(t, srv.Mkdir("/refused", 0o755))
	return c
}

// Each failure keeps a bounded prefix of the server's message, which says that it was
// cut and how long it was; the TreeError lists every failure and holds well within the
// call's limit.
func TestHostileTreeFailuresHoldBoundedMessages(t *testing.T) {
	const files, msgLen = 300, 250_000
	limit := testMemoryLimit(8 << 20)
	c := refusedTree(t, files, 100, func(i int) string { return fmt.Sprintf("f%04d", i) }, msgLen, limit)
	te, held := getTreeError(t, c)
	require.Equal(t, files, te.Count)
	require.Len(t, te.Failed, files, "each one is kept: they are small now")
	for _, f := range te.Failed {
		var se *StatusError
		require.ErrorAs(t, f, &se)
		require.Equal(t, StatusFailure, se.Code)
		require.LessOrEqual(t, len(se.Message), maxStatusMessage+100)
		require.True(t, strings.HasPrefix(se.Message, strings.Repeat("m", 100)), "the message's start is kept")
		require.Contains(t, se.Message, fmt.Sprintf("of %d bytes", msgLen), "the error says the message was cut")
	}
	require.Less(t, held, int64(limit/failureShare), "within the failures' share of the limit")
	require.Less(t, held, int64(files*(maxStatusMessage+1<<10)), "about the cut message, each")
}

// Failures whose paths are long (names of 60 KB) are kept only while they fit in a
// quarter of the call's limit; the rest are counted, and the error says how many.
func TestHostileTreeFailuresWithinTheLimit(t *testing.T) {
	const files = 200
	limit := testMemoryLimit(8 << 20)
	long := strings.Repeat("n", 60_000)
	c := refusedTree(t, files, 4, func(i int) string { return fmt.Sprintf("%s%04d", long, i) }, 250_000, limit)
	te, held := getTreeError(t, c)
	require.Equal(t, files, te.Count)
	require.NotEmpty(t, te.Failed)
	require.Less(t, len(te.Failed), files, "not all of them fit")
	require.Contains(t, te.Stopped.Error(), fmt.Sprintf("%d failed", files), "the error counts them all")
	require.LessOrEqual(t, held, int64(limit/failureShare))
	for _, f := range te.Failed {
		require.ErrorIs(t, f, &StatusError{Code: StatusFailure})
	}
}

// failureCost bounds the heap a kept failure takes, for the shapes a tree's failures
// have: a server's refusal (its message cut to maxStatusMessage) inside the path
// errors of the OPEN and of the tree, with a short or a long path, and one explained
// by fmt.Errorf on top (as existError and ctxError wrap).
func TestFailureCostBoundsTheHeap(t *testing.T) {
	const n = 2000
	for _, shape := range []struct {
		name string
		make func(i int) error
	}{
		{"refused", func(i int) error {
			src := fmt.Sprintf("/refused/f%04d", i)
			se := &StatusError{Code: StatusFailure, Message: statusText([]byte(strings.Repeat("m", 4000)), maxStatusMessage)}
			return pathErr("get", src, pathErr("open", src, se))
		}},
		{"long path", func(i int) error {
			src := fmt.Sprintf("/refused/%s%04d", strings.Repeat("n", 5000), i)
			return pathErr("get", src, pathErr("open", src, &StatusError{Code: StatusNoSuchFile}))
		}},
		{"explained", func(i int) error {
			src := fmt.Sprintf("/refused/f%04d", i)
			se := &StatusError{Code: StatusFailure, Message: strings.Repeat("m", 500)}
			return pathErr("put", src, pathErr("open", src+".part", fmt.Errorf("sftp: %w", fmt.Errorf("%w (%w)", errors.ErrUnsupported, se))))
		}},
	} {
		var errs []error
		var charged int64
		live := liveHeapOf(func() {
			errs = make([]error, 0, n)
			for i := range n {
				errs = append(errs, shape.make(i))
			}
		})
		for _, err := range errs {
			charged += failureCost(err)
		}
		t.Logf("%s: %d bytes held, %d charged each", shape.name, live/n, charged/n)
		require.LessOrEqual(t, live, charged, shape.name)
		runtime.KeepAlive(errs)
	}
}

// A STATUS message longer than maxStatusMessage is cut at a character's start and says
// so; the language tag is cut to maxStatusLang.
func TestStatusTextIsBounded(t *testing.T) {
	require.Equal(t, "short", statusText([]byte("short"), maxStatusMessage))
	exact := strings.Repeat("x", maxStatusMessage)
	require.Equal(t, exact, statusText([]byte(exact), maxStatusMessage))
	long := strings.Repeat("é", maxStatusMessage) // two bytes each: the cut falls inside one
	got := statusText([]byte(long), maxStatusMessage)
	prefix, marker, ok := strings.Cut(got, " [... ")
	require.True(t, ok, got)
	require.Equal(t, strings.Repeat("é", maxStatusMessage/2), prefix)
	require.Equal(t, fmt.Sprintf("the first %d of %d bytes]", maxStatusMessage, 2*maxStatusMessage), marker)

	body := sshfx.AppendUint32(nil, uint32(StatusFailure))
	body = sshfx.AppendString(body, strings.Repeat("m", 250_000))
	body = sshfx.AppendString(body, strings.Repeat("l", 1000))
	var se *StatusError
	require.ErrorAs(t, decodeStatus(body), &se)
	require.LessOrEqual(t, len(se.Message), maxStatusMessage+40)
	require.LessOrEqual(t, len(se.Lang), maxStatusLang+40)
	require.Contains(t, se.Error(), "the first 1024 of 250000 bytes")
}
