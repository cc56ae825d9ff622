package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// How a failed upload leaves its part file (partcut.go): cut through its handle to the
// acknowledged prefix, never by name; removed, when nothing of it is known written,
// only if a regular file is still at its name.

// settleAll waits for the work every channel of c has in the background (the CLOSEs
// and cuts of calls whose ctx ended), as settle does for the main channel.
func settleAll(c *Client) {
	c.chans.mu.Lock()
	conns := slices.Clone(c.chans.conns)
	c.chans.mu.Unlock()
	for _, cn := range conns {
		cn.bg.Wait()
	}
}

// Issue 26: a co-tenant who swaps the part of a failing upload for a link gets the
// link's target cut when the cleanup truncates by name. Through the handle the cut
// acts on the part the upload wrote, wherever its name has gone, and the link and
// its target are left alone. When nothing was acknowledged, the link is not removed
// either: only an empty regular file is.
func TestFailedPutCutsThroughTheHandle(t *testing.T) {
	data := gpData(8<<20, 31)
	for _, tc := range []struct {
		name  string
		after int64 // progress bytes at which the part is swapped and the Put stopped
	}{
		{"with data acknowledged", 3 << 20},
		{"with nothing acknowledged", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := getPutClient(t, t.TempDir())
			local, remote := gpDirs(t)
			src := filepath.Join(local, "src")
			gpWrite(t, src, data)
			victim := filepath.Join(t.TempDir(), "authorized_keys")
			keys := gpData(4<<20, 32)
			gpWrite(t, victim, keys)
			part := filepath.Join(remote, ".dst"+partSuffix)
			moved := part + ".moved"

			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			var once sync.Once
			err := c.Put(ctx, src, filepath.Join(remote, "dst"), OnProgress(func(p Progress) {
				if p.Bytes < tc.after || p.Done || p.Err != nil {
					return
				}
				once.Do(func() {
					require.NoError(t, os.Rename(part, moved))
					require.NoError(t, os.Symlink(victim, part))
					cancel()
				})
			}))
			require.ErrorIs(t, err, context.Canceled)
			settle(t, c)

			require.Equal(t, keys, gpRead(t, victim), "the link's target was changed")
			target, err := os.Readlink(part)
			require.NoError(t, err, "the link at the part's name was removed")
			require.Equal(t, victim, target)
			kept := gpRead(t, moved)
			require.Equal(t, data[:len(kept)], kept, "the part the upload wrote is not a prefix of the source")
			if tc.after > 0 {
				require.NotEmpty(t, kept, "nothing was acknowledged: the test proves nothing")
			} else {
				require.Empty(t, kept, "the part was not cut to the nothing acknowledged")
			}
		})
	}
}

// A part of which nothing was acknowledged is removed.
func TestFailedPutRemovesAnUnprovenPart(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	gpWrite(t, src, gpData(8<<20, 33))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	err := c.Put(ctx, src, filepath.Join(remote, "dst"), OnProgress(func(Progress) { cancel() }))
	require.ErrorIs(t, err, context.Canceled)
	settle(t, c)
	require.NoFileExists(t, filepath.Join(remote, ".dst"+partSuffix))
}

// An upload that fails while its call goes on (the server refuses a WRITE) cuts its
// part once every sibling lane's CLOSE is answered, so no sibling's WRITE lands after
// the cut: the part is then a prefix of the source, with no hole, no nonce and nothing
// past it, against a server that answers out of order and carries out each session's
// WRITEs late.
func TestFailedStripedPutLeavesAPrefix(t *testing.T) {
	const size, chunk = 3 << 20, 16 << 10
	data := gpData(size, 34)
	cut := 0
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			refuseAt := uint64(chunk * (40 + 7*seed))
			plan := resumePlan{seed: seed, reorder: 4, hold: 8, lanes: 4, chunk: chunk, inflight: 64, span: 1 << 20}
			opts := plan.serverOpts()
			opts.Fail = func(r testserver.Request) uint32 {
				if r.Type == testserver.TypeWrite && r.Offset == refuseAt && r.Len > nonceLen {
					return testserver.StatusFailure
				}
				return 0
			}
			env := newTSResume(t, opts)
			c := env.client(t, plan.clientOpts()...)
			src := filepath.Join(t.TempDir(), "src")
			gpWrite(t, src, data)
			err := c.Put(testCtx(t), src, "dst")
			require.Error(t, err)
			require.NotErrorIs(t, err, context.Canceled)
			part, rerr := env.read(".dst" + partSuffix)
			if errors.Is(rerr, fs.ErrNotExist) {
				// Nothing was acknowledged: the first chunk was the one a stripe round
				// held behind its nonce, and after a refused WRITE nothing more goes.
				return
			}
			require.NoError(t, rerr, "after %v", err)
			require.LessOrEqual(t, len(part), int(refuseAt), "the part goes past the refused WRITE")
			requireSameBytes(t, data[:len(part)], part)
			cut += len(part)
		})
	}
	require.Positive(t, cut, "no part held anything: the test proves nothing")
}
