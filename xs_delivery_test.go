//go:build linux

package sftp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// How uploads reach their names (delivery.go) on every server: Put over an existing
// file with the defaults, and Put and PutReader, of a file and of a tree, with the
// one option docs/servers.md names for the server, where it needs one.

// xsPutOption is the option a server needs for Put: none, except where it has no
// rename (MinIO) or lets the account only upload (the drop folder).
var xsPutOption = map[string]TransferOption{xsMinIO: InPlace(), xsDrop: NoCheckDest()}

// putOutcome is what a Put and a PutReader did, and what the destination then held.
type putOutcome struct {
	put, putReader error
	got, gotReader string
	parts          []string // part files left in the served directory
}

func xsPutOver(e *xsEnv, opts ...TransferOption) putOutcome {
	src := filepath.Join(e.TempDir(), "src")
	require.NoError(e, os.WriteFile(src, []byte("new"), 0o644))
	var o putOutcome
	o.put = e.c.Put(e.ctx, src, "dst", opts...)
	_, o.putReader = e.c.PutReader(e.ctx, strings.NewReader("streamed"), "dst2", opts...)
	o.got, o.gotReader = string(readLocalMaybe(e.local("dst"))), string(readLocalMaybe(e.local("dst2")))
	ents, err := os.ReadDir(e.dir)
	require.NoError(e, err)
	for _, d := range ents {
		if strings.HasSuffix(d.Name(), partSuffix) {
			o.parts = append(o.parts, d.Name())
		}
	}
	return o
}

func readLocalMaybe(name string) []byte {
	b, _ := os.ReadFile(name)
	return b
}

// xsReplaced: both uploads replaced the old files, and no part file is left.
func xsReplaced(e *xsEnv, o putOutcome) {
	require.NoError(e, o.put)
	require.NoError(e, o.putReader)
	require.Equal(e, "new", o.got)
	require.Equal(e, "streamed", o.gotReader)
	require.Empty(e, o.parts)
}

func xsDeliveryScenarios() []xsScenario {
	old := xsFiles(map[string]string{"dst": "old", "dst2": "old"})
	// replacedByRemove: the plain RENAME onto the file was refused; Put removed the
	// old file and renamed again.
	replacedByRemove := func(e *xsEnv, o putOutcome) {
		xsReplaced(e, o)
		require.Contains(e, e.c.Capabilities().Refused, RefusedRenameReplace)
	}
	return []xsScenario{
		xsCase("put/over-existing", old, func(e *xsEnv) putOutcome { return xsPutOver(e) },
			xsAll(xsReplaced).with(replacedByRemove, xsAzure, xsHetzner).with(func(e *xsEnv, o putOutcome) {
				// No RENAME: the part file can never reach its name, and goes.
				require.ErrorIs(e, o.put, errors.ErrUnsupported)
				require.ErrorContains(e, o.put, "InPlace")
				require.ErrorIs(e, o.putReader, errors.ErrUnsupported)
				require.Equal(e, "old", o.got)
				require.Empty(e, o.parts)
				require.Contains(e, e.c.Capabilities().Refused, RefusedRename)
			}, xsMinIO).with(func(e *xsEnv, o putOutcome) {
				require.ErrorIs(e, o.put, fs.ErrPermission)
				require.ErrorContains(e, o.put, "NoCheckDest")
				require.Equal(e, "old", o.got)
			}, xsDrop)),

		xsCase("put/with-option", old, func(e *xsEnv) putOutcome {
			return xsPutOver(e, xsPutOption[e.server])
		}, xsAll(xsReplaced).with(replacedByRemove, xsAzure, xsHetzner)),

		xsCase("tree/put-get/with-option", nil, func(e *xsEnv) treeOutcome {
			src := filepath.Join(e.TempDir(), "src")
			xsMakeTree(e.T, src, false)
			to := "up"
			if e.server == xsDrop {
				to = "." // the drop folder itself: nothing else can be made there
			}
			o := treeOutcome{src: listTree(e.T, src)}
			o.put = e.c.Put(e.ctx, src, to, Recursive(), xsPutOption[e.server])
			if o.put == nil {
				back := filepath.Join(e.TempDir(), "back")
				o.get = e.c.Get(e.ctx, to, back, Recursive())
				o.back = listTree(e.T, back)
			}
			return o
		}, xsAll(func(e *xsEnv, o treeOutcome) {
			require.NoError(e, o.put)
			require.NoError(e, o.get)
			require.Equal(e, o.src, o.back)
		}).with(func(e *xsEnv, o treeOutcome) {
			// Directories cannot be made (MKDIR denied); the files at the top are
			// uploaded whole.
			require.ErrorIs(e, o.put, fs.ErrPermission)
			var te *TreeError
			require.ErrorAs(e, o.put, &te)
			require.Equal(e, string(xsData(70000)), string(readLocal(e, e.local("b.bin"))))
			require.FileExists(e, e.local("a.txt"))
		}, xsDrop)),
	}
}

// treeOutcome is what a tree's Put and Get back did.
type treeOutcome struct {
	put, get  error
	src, back map[string]string
}

// TestDeliveryScenariosNamed keeps xsPutOption to servers of the suite.
func TestDeliveryScenariosNamed(t *testing.T) {
	names := xsServerNames()
	for s := range xsPutOption {
		require.Contains(t, names, s)
	}
}
