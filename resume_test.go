package sftp

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Resume continues from the proven point, W (maxSpan) before the part's end
// (resume.go), and proves the part file it reopens is the one it looked at. Tests of
// it on real servers lower W (resumeOpts), so that parts of a few hundred KiB have a
// proven point; the model test of stops and resumes is model_resume_test.go.

// resumeChunk and resumeSpan are the request size and W of resumeOpts: W a few
// requests, as the default is a few windows.
const (
	resumeChunk = 32 << 10
	resumeSpan  = 4 * resumeChunk
)

// resumeOpts are the options of a Client whose Resume tests need a small W.
func resumeOpts() []Option { return []Option{WithMaxPacket(resumeChunk), withSpan(resumeSpan)} }

// resumeClient is getPutClient with resumeOpts.
func resumeClient(t *testing.T, dir string) *Client {
	t.Helper()
	c, _ := sftpServerClient(t, dir, resumeOpts())
	return c
}

// resumedFrom is where Resume continues a part of size bytes under resumeOpts.
func resumedFrom(size int) int64 { return max(0, int64(size)-resumeSpan) }

// Each test below swaps the part for a link between Resume's LSTAT and its OPEN,
// where a third party with write access to the directory could.

func withAfterPartLstat(fn func(part string)) TransferOption {
	return func(o *transferOptions) error { o.afterPartLstat = fn; return nil }
}

func TestResumePutPartSwappedForALink(t *testing.T) {
	const size, k = 1<<20 + 5, 300_001
	data := gpData(size, 21)
	for _, tc := range []struct {
		name   string
		victim func(t *testing.T, victim, part string)
	}{
		// Another file: its attributes differ from the part's.
		{"other file", func(t *testing.T, victim, _ string) {}},
		// A file made to look like the part (same size, mode, owner and time) whose
		// bytes at the resume point are not the source's: the content check refuses it.
		{"look-alike", func(t *testing.T, victim, part string) {
			fake := slices.Clone(data[:k])
			fake[resumedFrom(k)-1] ^= 0xff
			require.NoError(t, os.WriteFile(victim, fake, 0o644))
			fi, err := os.Stat(part)
			require.NoError(t, err)
			require.NoError(t, os.Chmod(victim, fi.Mode().Perm()))
			require.NoError(t, os.Chtimes(victim, fi.ModTime(), fi.ModTime()))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := resumeClient(t, t.TempDir())
			local, remote := gpDirs(t)
			src := filepath.Join(local, "src")
			gpWrite(t, src, data)
			part := filepath.Join(remote, ".dst"+partSuffix)
			gpWrite(t, part, data[:k])
			victim := filepath.Join(t.TempDir(), "authorized_keys")
			gpWrite(t, victim, []byte("ssh-ed25519 AAAA the owner's key"))
			tc.victim(t, victim, part)
			before := gpRead(t, victim)

			var ev events
			swapped := false
			err := c.Put(testCtx(t), src, filepath.Join(remote, "dst"), Resume(), ev.opt(), withAfterPartLstat(func(p string) {
				swapped = true
				require.Equal(t, part, p)
				require.NoError(t, os.Remove(part))
				require.NoError(t, os.Symlink(victim, part))
			}))
			require.NoError(t, err)
			require.True(t, swapped, "Resume did not reopen the part: the test proves nothing")
			require.Equal(t, before, gpRead(t, victim), "the upload was written through the link")
			require.Equal(t, data, gpRead(t, filepath.Join(remote, "dst")))
			require.Zero(t, ev.list[0].Bytes, "the swapped part was resumed")
			require.NoFileExists(t, part)
		})
	}
}

// A server that will not open a file for reading and writing cannot give the proof:
// the Put says so rather than write through a handle it cannot check.
func TestResumePutNeedsReadWriteOpen(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Fail: func(r testserver.Request) uint32 {
		if r.Type == testserver.TypeOpen && r.Path == "/.dst"+partSuffix {
			return testserver.StatusPermissionDenied
		}
		return 0
	}}, withSpan(512)) // the part of 1000 bytes has a proven point: Resume opens it
	data := gpData(100_000, 22)
	require.NoError(t, srv.WriteFile("/.dst"+partSuffix, data[:1000], 0o644))
	src := filepath.Join(t.TempDir(), "src")
	gpWrite(t, src, data)
	err := c.Put(testCtx(t), src, "/dst", Resume())
	require.ErrorIs(t, err, errResumeRDWR)
	require.ErrorIs(t, err, os.ErrPermission)
	got, err := srv.ReadFile("/.dst" + partSuffix)
	require.NoError(t, err)
	require.Equal(t, data[:1000], got, "the part was changed")
	require.Zero(t, srv.OpenHandles())
}

// rclone's server truncates a file whenever it is opened for writing, READ|WRITE too.
// The part a Resume reopens is then not the one it looked at (FSTAT shows it empty):
// the upload starts over, and is whole.
func TestResumePutOnRclone(t *testing.T) {
	dir := serverDir(t)
	data := gpData(1<<20, 23)
	gpWrite(t, filepath.Join(dir, ".dst"+partSuffix), data[:300_000])
	c := newRcloneClient(t, dir, resumeOpts()...)
	src := filepath.Join(t.TempDir(), "src")
	gpWrite(t, src, data)
	var ev events
	require.NoError(t, c.Put(testCtx(t), src, "/dst", Resume(), ev.opt()))
	require.Zero(t, ev.list[0].Bytes, "resumed from a part the open truncated")
	require.Equal(t, data, gpRead(t, filepath.Join(dir, "dst")))
}

// A striped upload stopped while its stripe round's nonce is in the file and the chunk
// it was written over is not (the server refuses that chunk and says nothing, then
// every connection dies): the nonce lies where Resume sends again (reopen.go), and the
// resumed upload is the source.
func TestResumeAfterAStopAtTheNonce(t *testing.T) {
	const size, chunk, span = 2<<20 + 100, 16 << 10, 256 << 10
	data := gpData(size, 35)
	var mu sync.Mutex
	nonceAt, nonceHandle := int64(-1), ""
	heldChunk := func(r testserver.Request) bool {
		return r.Type == testserver.TypeWrite && int64(r.Offset) == nonceAt && r.Handle == nonceHandle && r.Len > nonceLen
	}
	plan := resumePlan{seed: 35, lanes: 4, chunk: chunk, inflight: 64, span: span}
	opts := plan.serverOpts()
	opts.Fail = func(r testserver.Request) uint32 {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Type == testserver.TypeWrite && r.Len == nonceLen && nonceAt < 0:
			nonceAt, nonceHandle = int64(r.Offset), r.Handle
		case heldChunk(r):
			return testserver.StatusFailure // not carried out
		}
		return 0
	}
	opts.Stall = func(r testserver.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		return heldChunk(r) // and not answered
	}
	env := newTSResume(t, opts)
	src := filepath.Join(t.TempDir(), "src")
	gpWrite(t, src, data)

	c := env.client(t, plan.clientOpts()...)
	done := tsGo(func() error { return c.Put(testCtx(t), src, "dst") })
	tsWaitStalled(t, env.srv, 1)
	env.kill()
	require.Error(t, tsRecv(t, done, "the Put"))
	c.Close()
	env.settle(t)

	part, err := env.read(".dst" + partSuffix)
	require.NoError(t, err)
	require.GreaterOrEqual(t, int64(len(part)), nonceAt+nonceLen, "the part does not reach the nonce: the test proves nothing")
	require.NotEqual(t, data[nonceAt:nonceAt+nonceLen], part[nonceAt:nonceAt+nonceLen], "no nonce in the part: the test proves nothing")
	from := max(0, int64(len(part))-span)
	require.LessOrEqual(t, from, nonceAt, "the nonce is below the resume point")
	requireSameBytes(t, data[:from], part[:from])

	c = env.client(t, plan.clientOpts()...)
	var ev events
	require.NoError(t, c.Put(testCtx(t), src, "dst", Resume(), ev.opt()))
	require.Equal(t, from, ev.list[0].Bytes)
	got, err := env.read("dst")
	require.NoError(t, err)
	requireSameBytes(t, data, got)
}
