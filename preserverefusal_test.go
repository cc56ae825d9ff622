package sftp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// On Azure Blob's personality, which refuses to set mode and times: Preserve fails
// each file with a *RefusalError naming the refusal and leaves no file under the
// name; PreserveWherePossible copies the files, records the refusal, and asks no more
// once it is known, for large files, small ones and a tree's directories alike.
func TestPreserveRefused(t *testing.T) {
	for _, size := range []int{100, 3 << 20} {
		c, srv, log, local, data := deliveryServer(t, testserver.AzureBlob(), size)
		ctx := testCtx(t)
		err := c.Put(ctx, local, "dst", Preserve())
		var re *RefusalError
		require.ErrorAs(t, err, &re, "size %d", size)
		require.Equal(t, RefusedSetstat, re.What)
		var se *StatusError
		require.ErrorAs(t, err, &se, "the server's STATUS is kept")
		requireNoRemote(t, srv, "/dst")
		require.Contains(t, c.Capabilities().Refused, RefusedSetstat)

		log.reset()
		require.NoError(t, c.Put(ctx, local, "dst", PreserveWherePossible()), "size %d", size)
		requireRemote(t, srv, "/dst", data)
		require.Zero(t, log.count(testserver.TypeFsetstat)+log.count(testserver.TypeSetstat),
			"asked again once known refused")
	}

	// A fresh Client learns it from the first file, and the tree goes on.
	c, srv, log, _, _ := deliveryServer(t, testserver.AzureBlob(), 1)
	tree := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "d"), 0o755))
	gpWrite(t, filepath.Join(tree, "d", "f"), gpData(5000, 3))
	gpWrite(t, filepath.Join(tree, "g"), gpData(7000, 4))
	require.NoError(t, c.Put(testCtx(t), tree, "up", Recursive(), PreserveWherePossible()))
	requireRemote(t, srv, "/up/d/f", gpData(5000, 3))
	requireRemote(t, srv, "/up/g", gpData(7000, 4))
	require.LessOrEqual(t, log.count(testserver.TypeFsetstat)+log.count(testserver.TypeSetstat), 2,
		"at most the two files' own, sent together: the directories finish after them")
	err := c.Put(testCtx(t), tree, "up2", Recursive(), Preserve())
	var re *RefusalError
	require.ErrorAs(t, err, &re, "Preserve still fails")
	require.Equal(t, RefusedSetstat, re.What)
}
