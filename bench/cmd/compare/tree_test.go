package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTreeLayout(t *testing.T) {
	dirs, files := treeLayout(7, 3)
	require.Equal(t, []string{"d00", "d00/d01", "d02"}, dirs)
	require.Equal(t, []string{"d00/f00000.bin", "d00/d01/f00001.bin", "d02/f00002.bin",
		"d00/f00003.bin", "d00/d01/f00004.bin", "d02/f00005.bin", "d00/f00006.bin"}, files)
	dirs, files = treeLayout(1000, 10)
	require.Len(t, dirs, 10)
	require.Len(t, files, 1000)
	require.Equal(t, "d08/d09/f00999.bin", files[999])
}

// newTestTree builds a small source tree the way a run does.
func newTestTree(t *testing.T) *treeSource {
	e := &env{work: t.TempDir(), trees: map[string]*treeSource{}}
	src, err := e.tree(treeShape{files: 6, dirs: 3, fileSize: 4096})
	require.NoError(t, err)
	again, err := e.tree(treeShape{files: 6, dirs: 3, fileSize: 4096})
	require.NoError(t, err)
	require.Same(t, src, again, "a tree is made once per shape")
	require.Equal(t, int64(6*4096), src.size())
	require.Equal(t, "tree of 6 × 4 KiB files in 3 dirs (24 KiB)", src.describe())
	a, err := os.ReadFile(filepath.Join(src.root, "d00", "f00000.bin"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(src.root, "d00", "f00003.bin"))
	require.NoError(t, err)
	require.Len(t, a, 4096)
	require.NotEqual(t, a, b, "files differ, so one copied under the wrong name is caught")
	return src
}

func TestVerifyTree(t *testing.T) {
	src := newTestTree(t)
	copyOf := func() string {
		dst := filepath.Join(t.TempDir(), "copy")
		require.NoError(t, os.CopyFS(dst, os.DirFS(src.root)))
		return dst
	}
	require.NoError(t, verifyTree(src, copyOf()))

	err := verifyTree(src, filepath.Join(t.TempDir(), "absent"))
	require.ErrorContains(t, err, "does not exist")

	dst := copyOf()
	require.NoError(t, os.Remove(filepath.Join(dst, "d02", "f00005.bin")))
	require.ErrorContains(t, verifyTree(src, dst), "5 of 6 files; missing e.g. [d02/f00005.bin]")

	dst = copyOf()
	require.NoError(t, os.WriteFile(filepath.Join(dst, "d00", ".f00000.bin.sluice-part"), nil, 0o644))
	require.ErrorContains(t, verifyTree(src, dst), "unexpected entry d00/.f00000.bin.sluice-part")

	dst = copyOf()
	p := filepath.Join(dst, "d00", "d01", "f00004.bin")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[100] ^= 1
	require.NoError(t, os.WriteFile(p, b, 0o644))
	require.ErrorContains(t, verifyTree(src, dst), "d00/d01/f00004.bin differs")

	dst = copyOf()
	require.NoError(t, os.Truncate(filepath.Join(dst, "d02", "f00002.bin"), 4095))
	require.ErrorContains(t, verifyTree(src, dst), "d02/f00002.bin differs from its source (4095 bytes, source 4096)")

	dst = copyOf()
	require.NoError(t, os.Rename(filepath.Join(dst, "d00", "f00003.bin"), filepath.Join(dst, "f00003.bin")))
	require.ErrorContains(t, verifyTree(src, dst), "unexpected entry f00003.bin")
}

func TestServerLogMovedUnder(t *testing.T) {
	l := &serverLog{path: filepath.Join(t.TempDir(), "log")}
	require.NoError(t, os.WriteFile(l.path, []byte(
		`close "/w/up/d00/.f1.sluice-part" bytes read 0 written 4096`+"\n"+
			`closedir "/w/up/d00"`+"\n"+
			`close "/w/up/d00/d01/f2" bytes read 0 written 4096`+"\n"+
			`close "/w/upper/f3" bytes read 0 written 4096`+"\n"+
			`close "/w/up" bytes read 0 written 1`+"\n"), 0o600))
	r, w, err := l.movedUnder("/w/up")
	require.NoError(t, err)
	require.Zero(t, r)
	require.Equal(t, int64(8192), w, "files below /w/up only: not /w/upper, not /w/up itself")
	require.NoError(t, l.awaitUnder("/w/up/", upload, 8192, time.Second))
	require.ErrorContains(t, l.awaitUnder("/w/up", upload, 8193, 50*time.Millisecond), "logged 8192 bytes written for /w/up/…")
}

// TestTreeTable checks the tree table's units: files/s, wall seconds, CPU per transfer.
func TestTreeTable(t *testing.T) {
	base := &row{id: sluiceDefaultID, title: "sluice default"}
	tuned := &row{id: "sluice-tuned", title: "sluice tuned",
		detail: func(c *config, bc benchCase) string { return c.sluice.describe(bc) }}
	peer := &row{id: "peer", title: "peer"}
	src := &treeSource{files: make([]string, 200), dirs: 10, fileSize: 4096}
	res := newTreeResults([]*row{peer, base, tuned}, 3, src, 100*time.Second)
	require.Equal(t, int64(200*4096), res.size)
	at := func(seconds, cpu float64) measurement {
		return measurement{ran: true, wall: time.Duration(seconds * float64(time.Second)),
			rssKiB: 10240, cpu: time.Duration(cpu * float64(time.Second))}
	}
	// files/s: sluice 100, 50, 40; peer 20, 10, timed out (200/100 s = 2, a bound).
	for round, s := range []float64{2, 4, 5} {
		res.set(base, round, at(s, 0.1))
		res.set(tuned, round, at(s/2, 0.2))
	}
	res.set(peer, 0, at(10, 1.5))
	res.set(peer, 1, at(20, 2.5))
	res.set(peer, 2, measurement{ran: true, timedOut: true})

	s := res.summarize(peer)
	require.InDelta(t, 10, s.rate, 1e-9, "median of 20, 10 and the bound 2")
	require.InDelta(t, 20, s.wall, 1e-9, "median of 10, 20 and the timeout 100")
	require.InDelta(t, 5, s.ratio, 1e-9, "median of 100/20, 50/10, 40/2")
	require.InDelta(t, 2, s.cpu, 1e-9, "CPU per transfer, completed rounds only")
	require.True(t, s.rateBound)

	var b strings.Builder
	cfg := &config{sluice: sluiceOptions{Channels: 8, Parallel: 64}}
	res.write(&b, cfg, "download, tree")
	out := b.String()
	require.Contains(t, out, "| row | files/s (median) | wall s (median) | sluice/row | peak RSS MiB | CPU s |")
	require.Contains(t, out, "| peer | 10.0\\* | 20.00\\* | 5.00\\* | 10.0 | 2.00 |")
	require.Contains(t, out, "| sluice default | 50.0 | 4.00 | 1.00 | 10.0 | 0.10 |")
	require.Contains(t, out, "| sluice tuned (channels=8 parallel=64) | 100.0 | 2.00 | 0.50 | 10.0 | 0.20 |")
	require.Contains(t, out, "counted as 200 files/timeout")

	// The file table of the same tuned row leaves Parallel out: it does not apply there.
	require.Equal(t, "sluice tuned (channels=8)", tuned.label(cfg, caseFile))
	require.Equal(t, "defaults", sluiceOptions{Parallel: 64}.describe(caseFile))

	line := progressLine(res, peer, 0, download, 0)
	require.Contains(t, line, "20.0 files/s  wall  10.00s")
	res.set(peer, 1, measurement{ran: true, err: errors.New("boom")})
	b.Reset()
	res.write(&b, cfg, "download, tree")
	require.Contains(t, b.String(), "- peer, round 2: boom")
}

func TestTreeRows(t *testing.T) {
	for id, want := range map[string]bool{"plain": false, "pkgsftp": false, "pkgsftp-tuned": false, "openssh": true} {
		require.Equal(t, want, findRow(id).runs(caseTree), id)
		require.True(t, findRow(id).runs(caseFile), id)
	}
	if r := findRow(sluiceDefaultID); r != nil { // absent in a -tags nosluice build
		require.True(t, r.runs(caseTree))
		require.NotNil(t, r.childFunc(&job{Tree: true}))
	}
}

func TestOpenSSHTreeCommand(t *testing.T) {
	h := &harness{sftpPath: "/usr/bin/sftp", env: &env{knownHosts: "/w/known_hosts"}}
	j := &job{Addr: "127.0.0.1:2222", User: "u", KeyFile: "/w/key", Tree: true, Dir: download,
		Remote: "/w/tree-20", Local: "/w/down-tree-openssh-0"}
	stdin := func() string {
		cc, err := h.opensshCommand(j)
		require.NoError(t, err)
		require.Contains(t, cc.args, "2222")
		b, err := io.ReadAll(cc.stdin)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "get -r \"/w/tree-20\" \"/w/down-tree-openssh-0\"\n", stdin())
	j.Dir, j.Local, j.Remote = upload, "/w/tree-20", "/w/up-tree-openssh-0"
	require.Equal(t, "put -r \"/w/tree-20\" \"/w/up-tree-openssh-0\"\n", stdin())
	j.Tree, j.Dir, j.Remote = false, download, "/w/src.bin"
	require.Equal(t, "get \"/w/src.bin\" /dev/null\n", stdin())
}
