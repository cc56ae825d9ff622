package sftp

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// deliveryServer is a testserver with opts (a personality's), a Client on it and the
// log of its requests; local is a source file of size bytes.
func deliveryServer(t *testing.T, opts testserver.Options, size int) (c *Client, srv *testserver.Server, log *requestLog, local string, data []byte) {
	t.Helper()
	log = &requestLog{}
	if opts.Fail == nil {
		opts.Fail = log.fail
	}
	c, srv = newTestServerClient(t, opts)
	data = gpData(size, 28)
	local = filepath.Join(t.TempDir(), "src")
	gpWrite(t, local, data)
	return c, srv, log, local, data
}

func requireRemote(t *testing.T, srv *testserver.Server, name string, want []byte) {
	t.Helper()
	got, err := srv.ReadFile(name)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "%s holds %d bytes, want %d", name, len(got), len(want))
}

func requireNoRemote(t *testing.T, srv *testserver.Server, name string) {
	t.Helper()
	_, err := srv.Stat(name)
	require.ErrorIs(t, err, fs.ErrNotExist, name)
}

// InPlace writes the destination itself, created exclusively (an existing file is
// removed first), and never renames; a Put of several MiB and a small one alike.
func TestInPlaceWritesTheName(t *testing.T) {
	for _, size := range []int{100, 3 << 20} {
		c, srv, log, local, data := deliveryServer(t, testserver.Options{}, size)
		require.NoError(t, srv.WriteFile("/dst", []byte("old"), 0o600))
		require.NoError(t, c.Put(testCtx(t), local, "dst", InPlace()))
		requireRemote(t, srv, "/dst", data)
		require.Zero(t, log.count(testserver.TypeRename), "no rename")
		for _, ext := range log.of(testserver.TypeExtended) {
			require.NotEqual(t, extPosixRename, ext.ExtName)
		}
		for _, open := range log.of(testserver.TypeOpen) {
			require.Equal(t, "dst", open.Path, "nothing but the name is opened")
		}
		require.Equal(t, 1, log.count(testserver.TypeRemove), "the old file went before the exclusive create")
		requireNoRemote(t, srv, "/.dst.sluice-part")
	}
}

// A failed InPlace upload removes what it wrote: no partial file stays under the
// final name. A write-only account's (NoCheckDest) stays, as the server would refuse
// to remove it.
func TestInPlaceFailureLeavesNoPartialFile(t *testing.T) {
	failWrite := func(log *requestLog) func(testserver.Request) uint32 {
		return func(r testserver.Request) uint32 {
			log.fail(r)
			if r.Type == testserver.TypeWrite && r.Offset >= 1<<20 {
				return testserver.StatusFailure
			}
			return 0
		}
	}
	log := &requestLog{}
	c, srv, _, local, _ := deliveryServer(t, testserver.Options{Fail: failWrite(log)}, 3<<20)
	err := c.Put(testCtx(t), local, "dst", InPlace())
	requireStatus(t, err, StatusFailure)
	requireNoRemote(t, srv, "/dst")

	log = &requestLog{}
	opts := testserver.DropFolder()
	opts.Fail = failWrite(log)
	c, srv, _, local, _ = deliveryServer(t, opts, 3<<20)
	err = c.Put(testCtx(t), local, "dst", NoCheckDest())
	requireStatus(t, err, StatusFailure)
	fi, serr := srv.Stat("/dst")
	require.NoError(t, serr, "left as it is")
	require.GreaterOrEqual(t, fi.Size, uint64(1<<20))
	require.Zero(t, log.count(testserver.TypeRemove)+log.count(testserver.TypeLstat)+log.count(testserver.TypeSetstat))
}

// An InPlace upload's File keeps to one lane, so its WRITEs go out in offset order.
func TestInPlaceOneLane(t *testing.T) {
	c, _, _, _, _ := deliveryServer(t, testserver.Options{}, 0)
	ctx := testCtx(t)
	for _, d := range []delivery{deliverInPlace, deliverBlind} {
		tc, err := c.newCall(ctx, nil)
		require.NoError(t, err)
		tc.o.delivery = d
		f, err := tc.openUpload(ctx, "f", 0o644)
		require.NoError(t, err)
		ls := f.newLanes(ctx, 1, 0, true)
		require.False(t, ls.canStripe())
		require.NoError(t, f.Close())
	}
}

// NoCheckDest: a Put, a PutReader and a tree into a write-only account send nothing
// but OPEN (write, create, truncate), WRITE and CLOSE (and the tree's MKDIRs).
func TestNoCheckDestWriteOnly(t *testing.T) {
	c, srv, log, local, data := deliveryServer(t, testserver.DropFolder(), 100000)
	ctx := testCtx(t)
	require.NoError(t, srv.WriteFile("/dst", []byte("old"), 0o644))
	require.NoError(t, c.Put(ctx, local, "dst", NoCheckDest()))
	requireRemote(t, srv, "/dst", data)
	n, err := c.PutReader(ctx, strings.NewReader("stream"), "s", NoCheckDest())
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
	requireRemote(t, srv, "/s", []byte("stream"))
	tree := filepath.Join(t.TempDir(), "tree")
	gpWrite(t, filepath.Join(tree, "top"), []byte("top"))
	gpWrite(t, filepath.Join(tree, "sub", "below"), []byte("below"))
	err = c.Put(ctx, tree, ".", Recursive(), NoCheckDest())
	require.ErrorIs(t, err, fs.ErrPermission, "MKDIR of sub is denied")
	requireRemote(t, srv, "/top", []byte("top"))
	require.NoError(t, c.PutAll(ctx, []string{local}, ".", NoCheckDest()))
	requireRemote(t, srv, "/src", data)
	for _, typ := range []uint8{testserver.TypeLstat, testserver.TypeStat, testserver.TypeRemove, testserver.TypeRename, testserver.TypeSetstat, testserver.TypeOpendir} {
		require.Zero(t, log.count(typ), "request type %d", typ)
	}
}

// Without NoCheckDest, Put into a write-only account fails at its first LSTAT, and
// says which option to use.
func TestDeniedLookNamesNoCheckDest(t *testing.T) {
	c, _, _, local, _ := deliveryServer(t, testserver.DropFolder(), 10)
	ctx := testCtx(t)
	for _, err := range []error{
		c.Put(ctx, local, "dst"),
		c.Put(ctx, filepath.Dir(local), "d", Recursive()),
		c.PutAll(ctx, []string{local}, "d"),
	} {
		require.ErrorIs(t, err, fs.ErrPermission)
		require.ErrorContains(t, err, "NoCheckDest")
	}
}

// Over a file, a plain RENAME that will not replace it (Hetzner's code 11) is followed
// by LSTATs of both names, a REMOVE and the RENAME again; a new file takes one RENAME.
func TestReplaceByRemove(t *testing.T) {
	c, srv, log, local, data := deliveryServer(t, testserver.HetznerStorageBox(), 1000)
	ctx := testCtx(t)
	require.NoError(t, c.Put(ctx, local, "new"))
	require.Equal(t, 1, log.count(testserver.TypeRename))
	require.NotContains(t, c.Capabilities().Refused, RefusedRenameReplace)

	require.NoError(t, srv.WriteFile("/dst", []byte("old"), 0o644))
	log.reset()
	require.NoError(t, c.Put(ctx, local, "dst"))
	requireRemote(t, srv, "/dst", data)
	require.Equal(t, 2, log.count(testserver.TypeRename))
	require.Equal(t, 1, log.count(testserver.TypeRemove))
	var se *StatusError
	require.ErrorAs(t, c.Capabilities().Refused[RefusedRenameReplace], &se)
	require.EqualValues(t, 11, se.Code)
	requireNoRemote(t, srv, "/.dst.sluice-part")
}

// The old file is removed only when the part is there to take its place: a part gone
// before the REMOVE leaves the destination alone, and the RENAME's refusal is the
// error.
func TestReplaceByRemoveNeedsThePart(t *testing.T) {
	log := &requestLog{}
	opts := testserver.HetznerStorageBox()
	opts.Fail = func(r testserver.Request) uint32 {
		log.fail(r)
		if r.Type == testserver.TypeLstat && strings.HasSuffix(r.Path, partSuffix) {
			return testserver.StatusNoSuchFile // as if a co-tenant removed it
		}
		return 0
	}
	c, srv, _, local, _ := deliveryServer(t, opts, 1000)
	require.NoError(t, srv.WriteFile("/dst", []byte("old"), 0o644))
	err := c.Put(testCtx(t), local, "dst")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.EqualValues(t, 11, se.Code)
	requireRemote(t, srv, "/dst", []byte("old"))
	require.Zero(t, log.count(testserver.TypeRemove))
}

// A server that refuses RENAME: the first upload's part goes, and later uploads by
// part file fail before they send a byte.
func TestRenameRefusedFailsFast(t *testing.T) {
	c, srv, log, local, _ := deliveryServer(t, testserver.MinIO(), 100000)
	ctx := testCtx(t)
	err := c.Put(ctx, local, "a")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	requireNoRemote(t, srv, "/.a.sluice-part")
	log.reset()
	err = c.Put(ctx, local, "b")
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorContains(t, err, "InPlace")
	require.Zero(t, log.count(testserver.TypeOpen)+log.count(testserver.TypeWrite))
	require.NoError(t, c.Put(ctx, local, "b", InPlace()))
}

// The options a delivery cannot honour are refused before anything is sent.
func TestDeliveryOptionConflicts(t *testing.T) {
	c, _, log, local, _ := deliveryServer(t, testserver.Options{}, 10)
	ctx := testCtx(t)
	for _, opts := range [][]TransferOption{
		{InPlace(), Resume()}, {NoCheckDest(), Resume()}, {NoCheckDest(), SkipUnchanged()},
	} {
		require.Error(t, c.Put(ctx, local, "dst", opts...))
		_, err := c.PutReader(ctx, strings.NewReader("x"), "dst", opts...)
		require.Error(t, err)
	}
	require.Empty(t, log.of(testserver.TypeOpen))
}

// InPlace composes with progress, SkipFiles and trees: each file reports its final
// name, skipped files are not sent.
func TestInPlaceTreeProgressSkip(t *testing.T) {
	c, srv, _, _, _ := deliveryServer(t, testserver.MinIO(), 0)
	tree := filepath.Join(t.TempDir(), "tree")
	gpWrite(t, filepath.Join(tree, "a"), gpData(300000, 1))
	gpWrite(t, filepath.Join(tree, "sub", "b"), []byte("b"))
	gpWrite(t, filepath.Join(tree, "skip"), []byte("s"))
	var dests []string
	err := c.Put(testCtx(t), tree, "up", Recursive(), InPlace(),
		SkipFiles(func(src string, _ fs.FileInfo) bool { return filepath.Base(src) == "skip" }),
		OnProgress(func(p Progress) {
			if p.Done {
				dests = append(dests, p.Dest)
			}
		}))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"up/a", "up/sub/b"}, dests)
	requireRemote(t, srv, "/up/a", gpData(300000, 1))
	requireRemote(t, srv, "/up/sub/b", []byte("b"))
	requireNoRemote(t, srv, "/up/skip")
}
