package sftp

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// Issue 26, item 5: what the small files of a tree hold in flight is what they are
// charged (smallCost, against smallBudget). Each was charged 4 KiB beyond its listed
// size, but its READ past the listed end (the probe) asked for a whole READ, 255 KiB,
// and every READ reply over 1 KiB is read into a pooled buffer of the largest reply's
// size, held until the file was done: 512 files listed as empty, whose probes a server
// answered in full while their CLOSEs were slow, held 129 MiB.

// heapSmallTree serves /small, listing files regular files of size bytes, and answers
// their OPENs, READs and CLOSEs itself: a READ with as much as it asks for up to
// data bytes from 0, and EOF past them.
type heapSmallTree struct {
	files, size, data int

	mu      sync.Mutex
	handles int
	probes  map[uint32]bool // the READ lengths asked past the listed end
}

func (s *heapSmallTree) options() testserver.Options {
	return testserver.Options{
		Listing: func(p string) testserver.Lister {
			if p != "/small" {
				return nil
			}
			return func(page int) []testserver.ListEntry {
				var out []testserver.ListEntry
				for i := page * 100; i < min(s.files, (page+1)*100); i++ {
					out = append(out, testserver.ListEntry{Name: fmt.Sprintf("f%04d", i), Mode: 0o100644, Size: uint64(s.size)})
				}
				return out
			}
		},
		Corrupt: s.corrupt,
	}
}

func (s *heapSmallTree) corrupt(req testserver.Request, _ []byte) [][]byte {
	switch {
	case req.Type == testserver.TypeOpen && strings.HasPrefix(req.Path, "/small/"):
		s.mu.Lock()
		s.handles++
		h := "small:" + strconv.Itoa(s.handles)
		s.mu.Unlock()
		return [][]byte{handleReply(req.ID, h)}
	case req.Type == testserver.TypeRead && strings.HasPrefix(req.Handle, "small:"):
		if req.Offset == uint64(s.size) {
			s.mu.Lock()
			if s.probes == nil {
				s.probes = map[uint32]bool{}
			}
			s.probes[req.Len] = true
			s.mu.Unlock()
		}
		if req.Offset >= uint64(s.data) {
			return [][]byte{statusReply(req.ID, sshfx.StatusEOF, "")}
		}
		n := min(int(req.Len), s.data-int(req.Offset))
		return [][]byte{dataReply(req.ID, strings.Repeat("d", n))}
	case req.Type == testserver.TypeClose && strings.HasPrefix(req.Handle, "small:"):
		return [][]byte{statusReply(req.ID, sshfx.StatusOK, "")}
	}
	return nil
}

// runStalled runs a recursive Get of /small whose replies stall accepts are withheld,
// until files of them are: then it returns the live heap's growth over what it was
// before the Get, lets them go, and checks the Get's outcome.
func runStalled(t *testing.T, s *heapSmallTree, stall func(testserver.Request) bool) int64 {
	var stalling atomic.Bool
	stalling.Store(true)
	opts := s.options()
	opts.Stall = func(req testserver.Request) bool { return stalling.Load() && stall(req) }
	c, srv := newTestServerClient(t, opts)
	require.NoError(t, srv.Mkdir("/small", 0o755))
	out := filepath.Join(t.TempDir(), "out")
	base := retainedHeap() // two collections: an earlier test's pools are gone
	done := tsGo(func() error { return c.Get(testCtx(t), "/small", out, Recursive()) })
	tsWaitStalled(t, srv, s.files)
	grew := retainedHeap() - base
	stalling.Store(false)
	srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, done, "the Get"))
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, s.files)
	t.Logf("live heap grew by %.1f MiB with %d files in flight", float64(grew)/(1<<20), s.files)
	return grew
}

func isSmallHandle(req testserver.Request) bool { return strings.HasPrefix(req.Handle, "small:") }

// 512 files listed as empty, whose READs past the listed end are answered with all
// they ask, and whose CLOSEs are held: the probe asks for little, and what it brought
// is charged, so the heap stays within smallBudget.
func TestHostileSmallFilesProbesAnsweredInFull(t *testing.T) {
	s := &heapSmallTree{files: defaultSmallParallel, size: 0, data: 255 << 10}
	grew := runStalled(t, s, func(req testserver.Request) bool {
		return req.Type == testserver.TypeClose && isSmallHandle(req)
	})
	require.Less(t, grew, int64(smallBudget))
	for n := range s.probes {
		require.LessOrEqual(t, int64(n)+int64(4<<10), smallCost(0), "the probe's READ of %d bytes is charged", n)
	}
}

// 512 files of 2 KiB whose first READs are answered and whose probes are held: what
// each first READ brought is held at its size, not in a reply buffer of 256 KiB.
func TestHostileSmallFilesProbesHeld(t *testing.T) {
	s := &heapSmallTree{files: defaultSmallParallel, size: 2 << 10, data: 2 << 10}
	grew := runStalled(t, s, func(req testserver.Request) bool {
		return req.Type == testserver.TypeRead && isSmallHandle(req) && req.Offset == uint64(s.size)
	})
	require.Less(t, grew, int64(smallBudget))
}
