package sftp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The landing rule: Get and Put name the copy itself, so the same call run twice lands
// in the same place. Each test runs one call twice against OpenSSH's sftp-server and
// compares the trees after each run.

// TestSameCallTwiceFile: a file's copy is the name given, the second run replaces it
// there.
func TestSameCallTwiceFile(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "f"), gpData(70_000, 1))
	for run := range 2 {
		require.NoError(t, c.Put(ctx, filepath.Join(local, "f"), filepath.Join(remote, "up")), "run %d", run)
		require.Equal(t, []string{"up"}, dirNames(t, remote), "run %d", run)
		require.NoError(t, c.Get(ctx, filepath.Join(remote, "up"), filepath.Join(local, "back")), "run %d", run)
		require.Equal(t, []string{"back", "f"}, dirNames(t, local), "run %d", run)
		require.Equal(t, gpData(70_000, 1), gpRead(t, filepath.Join(local, "back")))
	}
}

// TestSameCallTwiceTree: the second run of a tree merges into the first's copy,
// nothing nested inside it; with Preserve and SkipUnchanged it moves nothing.
func TestSameCallTwiceTree(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	makeTree(t, src)
	want := listTree(t, src)
	up, back := filepath.Join(remote, "up"), filepath.Join(local, "back")

	moved := func(ev *events) (n int) {
		for _, p := range ev.list {
			if p.Done && !p.Skipped {
				n++
			}
		}
		return n
	}
	for run := range 2 {
		var putEv, getEv events
		require.NoError(t, c.Put(ctx, src, up, Recursive(), Preserve(), SkipUnchanged(), putEv.opt()))
		require.Equal(t, want, listTree(t, up), "run %d", run)
		require.NoError(t, c.Get(ctx, up, back, Recursive(), Preserve(), SkipUnchanged(), getEv.opt()))
		require.Equal(t, want, listTree(t, back), "run %d", run)
		if run == 0 {
			require.Equal(t, 301, moved(&putEv))
			require.Equal(t, 301, moved(&getEv))
		} else {
			require.Zero(t, moved(&putEv), "the second Put moved files")
			require.Zero(t, moved(&getEv), "the second Get moved files")
		}
	}
}

// TestSameCallTwiceResume: a tree transfer interrupted in its large file leaves the
// part file where the copy goes, cut and marked (the stop was clean: resumemark.go);
// the same call with Resume finds it and continues from its end.
func TestSameCallTwiceResume(t *testing.T) {
	// W (maxSpan) well below the part an interrupted run leaves: continuing from the
	// part's end, not from W before it, shows the mark was found.
	const span = 1 << 20
	c, _ := sftpServerClient(t, t.TempDir(), []Option{withSpan(span)})
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	src := filepath.Join(local, "src")
	// A Put counts bytes handed to the transfer, up to a window ahead of what the
	// server acknowledged: cancelling past a window's worth leaves a part file.
	cut := int64(c.window()*c.Limits().MaxWrite + 1<<20)
	big := gpData(int(cut)+4<<20, 2)
	gpWrite(t, filepath.Join(src, "sub", "big"), big)
	gpWrite(t, filepath.Join(src, "small"), gpData(100, 3))
	want := listTree(t, src)

	// interrupted runs call, cancelling it once the large file has cut bytes done.
	interrupted := func(call func(ctx context.Context, opt TransferOption) error) {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err := call(cctx, OnProgress(func(p Progress) {
			if filepath.Base(p.Path) == "big" && p.Bytes >= cut {
				cancel()
			}
		}))
		require.ErrorIs(t, err, context.Canceled)
		settle(t, c)
	}
	// resumed runs call with Resume and returns where the large file started.
	resumed := func(call func(ctx context.Context, opt TransferOption) error) int64 {
		t.Helper()
		start := int64(-1)
		require.NoError(t, call(ctx, OnProgress(func(p Progress) {
			if filepath.Base(p.Path) == "big" && start < 0 {
				start = p.Bytes
			}
		})))
		return start
	}

	up := filepath.Join(remote, "up")
	put := func(ctx context.Context, opt TransferOption) error {
		return c.Put(ctx, src, up, Recursive(), Resume(), opt)
	}
	interrupted(put)
	part := gpRead(t, filepath.Join(up, "sub", ".big"+partSuffix))
	require.NotEmpty(t, part)
	require.Equal(t, big[:len(part)], part)
	require.Greater(t, len(part), span, "the interrupted Put left too little to resume")
	require.Equal(t, int64(len(part)), resumed(put), "the second Put did not continue the marked part from its end")
	require.Equal(t, want, listTree(t, up))

	back := filepath.Join(local, "back")
	get := func(ctx context.Context, opt TransferOption) error {
		return c.Get(ctx, up, back, Recursive(), Resume(), opt)
	}
	interrupted(get)
	part = gpRead(t, filepath.Join(back, "sub", "big"+partSuffix))
	require.NotEmpty(t, part)
	require.Equal(t, big[:len(part)], part)
	require.Greater(t, len(part), span, "the interrupted Get left too little to resume")
	require.Equal(t, int64(len(part)), resumed(get), "the second Get did not continue the marked part from its end")
	require.Equal(t, want, listTree(t, back))
	_, err := os.Stat(filepath.Join(back, "back"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
