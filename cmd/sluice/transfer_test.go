package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// treeSummary matches the line a finished tree transfer prints.
var treeSummary = regexp.MustCompile(`^(put|get) (.+) -> (.+): (\d+) files?, (\d+) bytes in \d+\.\d\d s, \d+\.\d MiB/s$`)

func requireTreeSummary(t *testing.T, stderr, op, from, to string, files int, n int64) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 1, "stderr: %s", stderr)
	m := treeSummary.FindStringSubmatch(lines[0])
	require.NotNil(t, m, "stderr: %s", stderr)
	require.Equal(t, []string{op, from, to, strconv.Itoa(files), strconv.FormatInt(n, 10)}, m[1:6])
}

// makeTree writes nested directories holding 50 small files of assorted sizes (one
// empty), and an empty directory. It returns the files' total size.
func makeTree(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	for i := range 50 {
		dir := filepath.Join(root, "d"+strconv.Itoa(i%4))
		if i%3 == 0 {
			dir = filepath.Join(dir, "sub", "deeper")
		}
		require.NoError(t, os.MkdirAll(dir, 0o755))
		data := make([]byte, (i*977)%5000)
		_, err := rand.Read(data)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.bin", i)), data, 0o644))
		total += int64(len(data))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "empty"), 0o755))
	return total
}

// requireSameTree checks that b holds exactly a's directories and files, byte for byte.
func requireSameTree(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			switch {
			case de.IsDir():
				m[rel] = "dir"
			case de.Type().IsRegular():
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				m[rel] = string(data)
			default:
				m[rel] = "other " + de.Type().String()
			}
			return nil
		}))
		return m
	}
	want, got := list(a), list(b)
	if filepath.Base(a) != "tree" { // makeTree's, not one of a test's own
		// 50 files, the root, d0 to d3, sub and sub/deeper in each of them, empty.
		require.Equal(t, 50+1+4+4*2+1, len(want), "the tree as made")
	}
	require.Equal(t, len(want), len(got))
	for k, v := range want {
		require.Equal(t, v, got[k], "%s", k)
	}
}

// put -r and get -r move a tree, in the default local sftp-server mode, with one file
// in flight or eight. A directory lands inside DST under its own name, whether DST
// exists or not, so the same command run again lands in the same place; with a
// trailing slash its contents land in DST.
func TestPutGetTree(t *testing.T) {
	needLocalServer(t)
	for _, j := range []string{"1", "8"} {
		t.Run("j"+j, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			size := makeTree(t, src)

			remote := filepath.Join(dir, "remote") // absent: made, and the copy is remote/src
			for range 2 {
				r := runCLI(t, "put", "-r", "-j", j, src, remote)
				requireOK(t, r)
				requireTreeSummary(t, r.stderr, "put", src, filepath.Join(remote, "src"), 50, size)
				requireSameTree(t, src, filepath.Join(remote, "src"))
				requireEntries(t, remote, "src")
			}

			back := filepath.Join(dir, "back")
			for range 2 {
				r := runCLI(t, "get", "-r", "-j", j, filepath.Join(remote, "src"), back)
				requireOK(t, r)
				requireTreeSummary(t, r.stderr, "get", filepath.Join(remote, "src"), filepath.Join(back, "src"), 50, size)
				requireSameTree(t, src, filepath.Join(back, "src"))
				requireEntries(t, back, "src")
			}

			// A trailing slash: the contents land in DST, which is made if missing.
			flat := filepath.Join(dir, "flat")
			r := runCLI(t, "get", "-r", "-q", "-j", j, filepath.Join(remote, "src")+"/", flat)
			requireOK(t, r)
			require.Empty(t, r.stderr, "-q")
			requireSameTree(t, src, flat)
			r = runCLI(t, "put", "-r", "-q", "-j", j, src+"/", filepath.Join(dir, "flatup"))
			requireOK(t, r)
			requireSameTree(t, src, filepath.Join(dir, "flatup"))
		})
	}
}

// requireEntries checks that dir holds exactly the names given.
func requireEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	require.ElementsMatch(t, names, got, "in %s", dir)
}

func TestTreeRefusals(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	makeTree(t, src)

	r := runCLI(t, "get", src, filepath.Join(dir, "x"))
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: get: "+src+" is a directory (use -r to copy it and everything in it)\n", r.stderr)
	r = runCLI(t, "put", src, filepath.Join(dir, "x"))
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: put: "+src+" is a directory (use -r to copy it and everything in it)\n", r.stderr)
	require.NoFileExists(t, filepath.Join(dir, "x"))

	// Into itself, like cp: directly (src is a directory, so the copy would be src/src)
	// or below.
	for _, dst := range []string{src, filepath.Join(src, "d1", "new")} {
		for _, op := range []string{"put", "get"} {
			r = runCLI(t, op, "-r", src, dst)
			require.Equal(t, exitFail, r.code, "%s %s", op, dst)
			require.Contains(t, r.stderr, "sluice: "+op+": cannot copy the directory "+src+" into itself")
		}
	}
	require.NoDirExists(t, filepath.Join(src, "src"))
	require.NoDirExists(t, filepath.Join(src, "d1", "new"))
}

// -a continues a part file rather than starting over, from the point the library
// proves: W (64 MiB) before the part's end, below which a stopped transfer has written
// everything (see sftp.Resume). The part files hold the source's bytes below that
// point and zeros above it, as a killed transfer's holes: only a transfer that went on
// from the proven point, not from the part's end, yields the source.
func TestResume(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	const span, proven = 64 << 20, 300_000
	src, data := randomFile(t, dir, "src.bin", span+1<<20+12345)
	holed := make([]byte, proven+span)
	copy(holed, data[:proven])

	// get: the part file is "<dest>.sluice-part".
	dst := filepath.Join(dir, "got.bin")
	require.NoError(t, os.WriteFile(dst+".sluice-part", holed, 0o644))
	r := runCLI(t, "get", "-a", src, dst)
	requireOK(t, r)
	require.Regexp(t, `^get `+regexp.QuoteMeta(src+" -> "+dst)+`: `+strconv.Itoa(len(data))+` bytes \(300000 resumed\) in \d+\.\d\d s, \d+\.\d MiB/s\n$`, r.stderr)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the download is not the source")
	require.NoFileExists(t, dst+".sluice-part")

	// put: the part file is ".<name>.sluice-part" beside the destination. An upload
	// is resumed only from a part whose bytes before the resume point are the
	// source's (the library checks them before writing through the reopened part).
	up := filepath.Join(dir, "up.bin")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".up.bin.sluice-part"), holed, 0o644))
	r = runCLI(t, "put", "-a", src, up)
	requireOK(t, r)
	require.Contains(t, r.stderr, "(300000 resumed)")
	got, err = os.ReadFile(up)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the upload is not the source")
	require.NoFileExists(t, filepath.Join(dir, ".up.bin.sluice-part"))

	// Without -a a part file is started over.
	require.NoError(t, os.WriteFile(dst+".sluice-part", holed, 0o644))
	r = runCLI(t, "get", src, dst)
	requireOK(t, r)
	requireSummary(t, r.stderr, "get", src, dst, len(data))
	got, err = os.ReadFile(dst)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the download is not the source")

	// A tree resumes file by file.
	tree := filepath.Join(dir, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o755))
	require.NoError(t, os.Rename(src, filepath.Join(tree, "sub", "f")))
	out := filepath.Join(dir, "out") // exists: the copy is out/tree
	require.NoError(t, os.MkdirAll(filepath.Join(out, "tree", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "tree", "sub", "f.sluice-part"), holed, 0o644))
	r = runCLI(t, "get", "-r", "-a", tree, out)
	requireOK(t, r)
	require.Contains(t, r.stderr, "get "+tree+" -> "+filepath.Join(out, "tree")+": 1 file, "+strconv.Itoa(len(data))+" bytes (300000 resumed) in ")
	got, err = os.ReadFile(filepath.Join(out, "tree", "sub", "f"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the tree's file is not the source")
	require.NoError(t, os.Rename(filepath.Join(tree, "sub", "f"), src))

	// A part file longer than the source is refused, and left alone.
	long := append(append([]byte(nil), data...), 'z')
	require.NoError(t, os.WriteFile(dst+".sluice-part", long, 0o644))
	r = runCLI(t, "get", "-a", src, dst)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "more than the")
	got, err = os.ReadFile(dst + ".sluice-part")
	require.NoError(t, err)
	require.Equal(t, long, got)
}

// -p keeps modes and times, of files and directories, both ways; without it the times
// are those of the copy.
func TestPreserve(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	f := filepath.Join(src, "sub", "f")
	require.NoError(t, os.WriteFile(f, []byte("preserve me"), 0o600))
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	older := old.Add(-time.Hour)
	require.NoError(t, os.Chmod(f, 0o640))
	require.NoError(t, os.Chtimes(f, old, old))
	require.NoError(t, os.Chmod(filepath.Join(src, "sub"), 0o750))
	require.NoError(t, os.Chtimes(filepath.Join(src, "sub"), older, older))

	check := func(root string) {
		t.Helper()
		fi, err := os.Stat(filepath.Join(root, "sub", "f"))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())
		require.True(t, fi.ModTime().Equal(old), "file mtime %v", fi.ModTime())
		di, err := os.Stat(filepath.Join(root, "sub"))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o750), di.Mode().Perm())
		require.True(t, di.ModTime().Equal(older), "dir mtime %v", di.ModTime())
	}
	r := runCLI(t, "put", "-r", "-p", src, filepath.Join(dir, "up"))
	requireOK(t, r)
	check(filepath.Join(dir, "up", "src"))
	r = runCLI(t, "get", "-p", "-r", filepath.Join(dir, "up", "src"), filepath.Join(dir, "down"))
	requireOK(t, r)
	check(filepath.Join(dir, "down", "src"))

	// A single file, both ways.
	r = runCLI(t, "get", "-p", f, filepath.Join(dir, "one"))
	requireOK(t, r)
	r = runCLI(t, "put", "-p", filepath.Join(dir, "one"), filepath.Join(dir, "two"))
	requireOK(t, r)
	for _, name := range []string{"one", "two"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm(), name)
		require.True(t, fi.ModTime().Equal(old), "%s mtime %v", name, fi.ModTime())
	}

	r = runCLI(t, "get", f, filepath.Join(dir, "plain"))
	requireOK(t, r)
	fi, err := os.Stat(filepath.Join(dir, "plain"))
	require.NoError(t, err)
	require.False(t, fi.ModTime().Equal(old), "without -p the copy has its own times")
}

// -f flushes each file; OpenSSH's sftp-server has fsync@openssh.com, so put may use it.
func TestFsync(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src", 70_000)
	for _, op := range []string{"put", "get"} {
		dst := filepath.Join(dir, op)
		r := runCLI(t, op, "-f", src, dst)
		requireOK(t, r)
		requireSummary(t, r.stderr, op, src, dst, len(data))
		got, err := os.ReadFile(dst)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
}

// -q silences the summary of a single file too; errors still show.
func TestQuiet(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "src", 1000)
	r := runCLI(t, "put", "-q", src, filepath.Join(dir, "dst"))
	requireOK(t, r)
	require.Empty(t, r.stderr)
	require.Empty(t, r.stdout)
	got, err := os.ReadFile(filepath.Join(dir, "dst"))
	require.NoError(t, err)
	require.Equal(t, data, got)

	r = runCLI(t, "get", "-q", filepath.Join(dir, "nope"), filepath.Join(dir, "x"))
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "no such file or directory: "+filepath.Join(dir, "nope"))
}

// TestGlobBaseNameCollision: 'remote:*/log.txt' out/ matches two files named log.txt;
// copying both into out/ would keep only the last. Refused before anything is copied,
// and the same for put.
func TestGlobBaseNameCollision(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "remote", d), 0o755))
		randomFile(t, filepath.Join(dir, "remote", d), "log.txt", 100)
	}
	out := filepath.Join(dir, "out")
	require.NoError(t, os.Mkdir(out, 0o755))
	r := runCLI(t, "get", filepath.Join(dir, "remote")+"/*/log.txt", out+"/")
	require.Equal(t, exitFail, r.code, r.stderr)
	require.Contains(t, r.stderr, "would both be copied to log.txt")
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing copied")

	rdir := filepath.Join(dir, "rdir")
	require.NoError(t, os.Mkdir(rdir, 0o755))
	r = runCLI(t, "put", filepath.Join(dir, "remote", "a", "log.txt"), filepath.Join(dir, "remote", "b", "log.txt"), rdir+"/")
	require.Equal(t, exitFail, r.code, r.stderr)
	require.Contains(t, r.stderr, "would both be copied to log.txt")
	entries, err = os.ReadDir(rdir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing copied")
}
