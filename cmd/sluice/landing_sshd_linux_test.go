package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// homeBox starts an sshd whose sftp-server answers ~ with home, and makes it "box"
// in ~/.ssh/config. OpenSSH's sftp-server expands ~ (expand-path@openssh.com) to its
// working directory, which -d sets; home-directory, which would answer with the
// account's home from the password database, is denied (-P), so that the client
// falls back to expand-path. No account is changed: a test run twenty times, or
// beside another, meets no login still in progress.
func homeBox(t *testing.T, home string) {
	t.Helper()
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{SFTPServerArgs: []string{"-d", home, "-P", "home-directory"}})
	writeUserSSHConfig(t, hostBlock("box", s), s)
}

// snapshot is a local directory's entries, contents and modes, and the directory's
// own mode and times, to compare before and after.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		v := fi.Mode().String() + " " + fi.ModTime().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			v += " " + string(b)
		}
		m[p] = v
		return nil
	}))
	return m
}

// Item 7 of issue 19 (CVE-2019-6111's class): the server says what ~ is; it never
// names a local file. Through a private sshd whose ~ is the directory the test chose. A home directory named .ssh has its contents copied into DIR
// (listed under what was typed), never DIR/.ssh, and -p leaves DIR's mode and times
// alone, run after run. (A home that is a file is TestHostileHomeIsAFile: OpenSSH
// answers ~ with its working directory, which is never one.)
func TestServerHomeNamesNoLocalFile(t *testing.T) {
	isolateEnv(t)
	base := t.TempDir()
	home := filepath.Join(base, "victim", ".ssh")
	require.NoError(t, os.MkdirAll(filepath.Join(home, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "authorized_keys"), []byte("the server's key"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(home, "sub", "x"), []byte("x"), 0o644))
	require.NoError(t, os.Chmod(home, 0o777))
	homeTime := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, os.Chtimes(home, homeTime, homeTime))

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".ssh", "authorized_keys"), []byte("mine"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".bashrc"), []byte("mine"), 0o644))
	require.NoError(t, os.Chmod(dir, 0o750))
	mine := snapshot(t, filepath.Join(dir, ".ssh"))

	homeBox(t, home)
	r := runCLI(t, "get", "box:~", dir)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "is a directory (use -r")
	for _, args := range [][]string{{"-r", "-p"}, {"-r", "-p", "--sync"}, {"-r", "-p"}} {
		r = runCLI(t, append(append([]string{"get"}, args...), "box:~", dir)...)
		requireOK(t, r)
		require.Equal(t, mine, snapshot(t, filepath.Join(dir, ".ssh")), "get %v wrote into DIR/.ssh", args)
		got, err := os.ReadFile(filepath.Join(dir, "authorized_keys"))
		require.NoError(t, err, "~'s contents land in DIR under their listed names")
		require.Equal(t, "the server's key", string(got))
		require.FileExists(t, filepath.Join(dir, "sub", "x"))
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o750), fi.Mode().Perm(), "get %v changed DIR's mode", args)
		require.False(t, fi.ModTime().Equal(homeTime), "get %v gave DIR the times of ~", args)
		fi, err = os.Stat(filepath.Join(dir, "sub"))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "what the copy made keeps the source's mode")
	}

	// A home of /: nothing lands under a name the server chose, and DIR is untouched.
	homeBox(t, "/")
	before := snapshot(t, dir)
	for _, args := range [][]string{{"get", "-p", "box:~", dir}, {"get", "-p", "box:", dir}, {"get", "-p", "box:~/", dir}} {
		r = runCLI(t, args...)
		require.Equal(t, exitFail, r.code, "%v", args)
		require.Contains(t, r.stderr, "is a directory (use -r", "%v", args)
	}
	require.Equal(t, before, snapshot(t, dir))
}

// Issue 21: the same command run twice lands in the same place. A tree of 200 files
// got with -r -p --sync into restore/ lands in restore/photos both times, and the
// second run skips every file; the same for put, compared on the server. Through a
// private sshd as "box".
func TestRerunsLandInTheSamePlace(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, hostBlock("box", s), s)
	src := t.TempDir()
	photos := filepath.Join(src, "photos")
	for i := range 200 {
		d := filepath.Join(photos, fmt.Sprintf("d%d", i%5))
		require.NoError(t, os.MkdirAll(d, 0o755))
		randomFile(t, d, fmt.Sprintf("p%03d.jpg", i), 100+i)
	}
	restore := filepath.Join(t.TempDir(), "restore")
	for run := range 2 {
		r := runCLI(t, "get", "-r", "-p", "--sync", "box:"+photos, restore)
		requireOK(t, r)
		requireEntries(t, restore, "photos")
		requireSameFiles(t, photos, filepath.Join(restore, "photos"))
		if run == 1 {
			require.Contains(t, r.stderr, ", 200 unchanged skipped", "the second run wrote nothing")
		}
	}
	up := t.TempDir()
	for run := range 2 {
		r := runCLI(t, "put", "-r", "-p", "--sync", photos, "box:"+up)
		requireOK(t, r)
		requireEntries(t, up, "photos")
		requireSameFiles(t, photos, filepath.Join(up, "photos"))
		if run == 1 {
			require.Contains(t, r.stderr, ", 200 unchanged skipped")
		}
	}
}

// After an interrupted get -r -a, the same command again takes up the part files
// where they are: in ncx/nc, where the first run put them.
func TestInterruptedTreeResumesInPlace(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, hostBlock("box", s), s)
	nc := filepath.Join(t.TempDir(), "nc")
	require.NoError(t, os.Mkdir(nc, 0o755))
	for i := range 3 {
		randomFile(t, nc, fmt.Sprintf("f%d", i), 4<<20+i)
	}
	ncx := filepath.Join(t.TempDir(), "ncx")
	args := []string{"get", "-r", "-a", "-j", "1", "box:" + nc, ncx}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newApp(&lockedBuffer{}, &lockedBuffer{})
	a.testProgress = func(p sftp.Progress) {
		if p.Bytes >= 1<<20 {
			cancel()
		}
	}
	require.Equal(t, exitSignal+2, a.run(ctx, args))
	parts, err := filepath.Glob(filepath.Join(ncx, "nc", "*.sluice-part"))
	require.NoError(t, err)
	require.NotEmpty(t, parts, "the interrupted run left its part files in ncx/nc")

	r := runCLI(t, args...)
	requireOK(t, r)
	// Parts this short hold no proven point (the library's W is 64 MiB): the second
	// run starts them over under the same names, so none is left anywhere.
	left, err := filepath.Glob(filepath.Join(ncx, "*", "*.sluice-part"))
	require.NoError(t, err)
	require.Empty(t, left, "a part file the second run did not find")
	requireEntries(t, ncx, "nc")
	requireSameFiles(t, nc, filepath.Join(ncx, "nc"))
}

// Issue 21: one unreadable file does not stop a tree. The server runs as a plain
// account, for which a mode-000 file is unreadable: get -r copies the other 199,
// says which failed, and exits 1 with the count; --fail-fast stops at the first.
// (Needs the tree engine that goes on past failures: sftp.TreeError.)
func TestTreeGoesOnPastAFailedFile(t *testing.T) {
	isolateEnv(t)
	_, home := needPasswordUser(t)
	s := newSSHDForUser(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, strings.Replace(hostBlock("box", s), "User "+s.User, "User "+passwordUser, 1), s)
	tree := filepath.Join(userTempDir(t, home), "tree")
	require.NoError(t, os.Mkdir(tree, 0o755))
	for i := range 200 {
		randomFile(t, tree, fmt.Sprintf("f%03d", i), 1000+i)
	}
	require.NoError(t, os.Chmod(filepath.Join(tree, "f137"), 0))
	dst := t.TempDir()
	r := runCLI(t, "get", "-r", "box:"+tree, dst)
	require.Equal(t, exitFail, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stderr, "sluice: get: 1 of 200 files failed: ")
	require.Contains(t, r.stderr, "f137")
	require.Contains(t, r.stderr, "199 files, ", "the summary counts what was copied")
	des, err := os.ReadDir(filepath.Join(dst, "tree"))
	require.NoError(t, err)
	require.Len(t, des, 199)

	dst = t.TempDir()
	r = runCLI(t, "get", "-r", "--fail-fast", "-j", "1", "box:"+tree, dst)
	require.Equal(t, exitFail, r.code)
	require.NotContains(t, r.stderr, "files failed")
	require.Contains(t, r.stderr, "f137")
}

// Issue 21: a glob and several operands run as one tree transfer: one summary line
// for all of them. Through a private sshd.
func TestGlobIsOneTransfer(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, hostBlock("box", s), s)
	dir := t.TempDir()
	var total int64
	for i := range 20 {
		randomFile(t, dir, fmt.Sprintf("p%02d.jpg", i), 1000+i)
		total += int64(1000 + i)
	}
	randomFile(t, dir, "other.txt", 10)
	restore := filepath.Join(t.TempDir(), "restore")
	require.NoError(t, os.Mkdir(restore, 0o755))
	r := runCLI(t, "get", "box:"+dir+"/*.jpg", restore+"/")
	requireOK(t, r)
	requireTreeSummary(t, r.stderr, "get", dir+"/*.jpg", restore, 20, total) // named clean
	des, err := os.ReadDir(restore)
	require.NoError(t, err)
	require.Len(t, des, 20)

	two := t.TempDir()
	r = runCLI(t, "get", "box:"+dir+"/p00.jpg", "box:"+dir+"/p01.jpg", two)
	requireOK(t, r)
	requireTreeSummary(t, r.stderr, "get", dir+"/p00.jpg "+dir+"/p01.jpg", two, 2, 2001)
	requireEntries(t, two, "p00.jpg", "p01.jpg")
}

// requireSameFiles checks that b holds exactly a's directories and files, byte for
// byte, whatever the tree.
func requireSameFiles(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			require.NoError(t, err)
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			m[rel] = "dir"
			if !de.IsDir() {
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				m[rel] = string(data)
			}
			return nil
		}))
		return m
	}
	require.Equal(t, list(a), list(b))
}
