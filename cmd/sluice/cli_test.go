package main

import (
	"context"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// summaryLine matches the line a finished transfer prints.
var summaryLine = regexp.MustCompile(`^(put|get) (.+) -> (.+): (\d+) bytes in \d+\.\d\d s, \d+\.\d MiB/s$`)

func requireSummary(t *testing.T, stderr, op, from, to string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 1, "stderr: %s", stderr)
	m := summaryLine.FindStringSubmatch(lines[0])
	require.NotNil(t, m, "stderr: %s", stderr)
	require.Equal(t, []string{op, from, to}, m[1:4])
	require.Equal(t, strconv.Itoa(n), m[4])
}

// The default mode: a bare path, served by a local sftp-server, no SSH at all.
func TestPutGetLocalServer(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	// Odd size: more than a few default-size chunks and not a multiple of any.
	src, data := randomFile(t, dir, "src.bin", 3<<20+5)
	remote := filepath.Join(dir, "remote.bin")

	r := runCLI(t, "put", src, remote)
	requireOK(t, r)
	requireSummary(t, r.stderr, "put", src, remote, len(data))
	got, err := os.ReadFile(remote)
	require.NoError(t, err)
	require.Equal(t, data, got)

	back := filepath.Join(dir, "back.bin")
	r = runCLI(t, "get", remote, back)
	requireOK(t, r)
	requireSummary(t, r.stderr, "get", remote, back, len(data))
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)
	fi, err := os.Stat(back)
	require.NoError(t, err)
	// Created 0644: the umask may narrow it, never widen it.
	require.Zero(t, fi.Mode().Perm()&^fs.FileMode(0o644), "mode %v", fi.Mode())
	require.NotZero(t, fi.Mode().Perm()&0o600, "mode %v", fi.Mode())
}

func TestGetTruncatesAndPutOverwrites(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "small", 1000)
	big, _ := randomFile(t, dir, "big", 5000)

	r := runCLI(t, "get", src, big) // big is longer: must be truncated, not overwritten in place
	requireOK(t, r)
	got, err := os.ReadFile(big)
	require.NoError(t, err)
	require.Equal(t, data, got)

	other, _ := randomFile(t, dir, "other", 7000)
	r = runCLI(t, "put", src, other)
	requireOK(t, r)
	got, err = os.ReadFile(other)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestPutGetIntoDirectory(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src, data := randomFile(t, dir, "file.dat", 12345)
	rdir := filepath.Join(dir, "rdir")
	require.NoError(t, os.Mkdir(rdir, 0o755))
	ldir := filepath.Join(dir, "ldir")
	require.NoError(t, os.Mkdir(ldir, 0o755))

	r := runCLI(t, "put", src, rdir)
	requireOK(t, r)
	requireSummary(t, r.stderr, "put", src, filepath.Join(rdir, "file.dat"), len(data))

	r = runCLI(t, "get", filepath.Join(rdir, "file.dat"), ldir+"/")
	requireOK(t, r)
	got, err := os.ReadFile(filepath.Join(ldir, "file.dat"))
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// With -D the server is whatever command is given; sftp-server -d makes relative
// paths resolve in its start directory, which shows the command really served them.
func TestPutGetServerCommand(t *testing.T) {
	server := needLocalServer(t)
	dir := t.TempDir()
	srvDir := filepath.Join(dir, "srv")
	require.NoError(t, os.Mkdir(srvDir, 0o755))
	src, data := randomFile(t, dir, "src.bin", 1<<20+3)
	D := server + " -d " + srvDir

	r := runCLI(t, "-D", D, "-inflight", "3", "-packet", "4096", "put", src, "up.bin")
	requireOK(t, r)
	requireSummary(t, r.stderr, "put", src, "up.bin", len(data))
	got, err := os.ReadFile(filepath.Join(srvDir, "up.bin"))
	require.NoError(t, err)
	require.Equal(t, data, got)

	// Shared flags may also follow the command name.
	back := filepath.Join(dir, "back.bin")
	r = runCLI(t, "get", "-D", D, "-channels", "2", "up.bin", back)
	requireOK(t, r)
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.Equal(t, data, got)

	// A path that would be host:path without -D is taken literally with it.
	require.NoError(t, os.WriteFile(filepath.Join(srvDir, "a:b"), []byte("colon"), 0o644))
	r = runCLI(t, "-D", D, "get", "a:b", filepath.Join(dir, "colon"))
	requireOK(t, r)
	got, err = os.ReadFile(filepath.Join(dir, "colon"))
	require.NoError(t, err)
	require.Equal(t, "colon", string(got))
}

func TestServerCommandReadOnly(t *testing.T) {
	server := needLocalServer(t)
	dir := t.TempDir()
	src, _ := randomFile(t, dir, "src", 10)
	r := runCLI(t, "-D", server+" -R", "put", src, filepath.Join(dir, "dst"))
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: put ")
	require.Contains(t, r.stderr, "Permission denied")
	require.NoFileExists(t, filepath.Join(dir, "dst"))
}

func TestServerCommandNotSFTP(t *testing.T) {
	r := runCLI(t, "-D", "/bin/true", "ls", "/")
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, `sluice: starting SFTP with "/bin/true"`)

	r = runCLI(t, "-D", "/nonexistent/server", "ls", "/")
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "starting the server")
}

func TestLsRmMkdir(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	randomFile(t, dir, "b.bin", 1234)
	randomFile(t, dir, "a.txt", 7)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(dir, "link")))
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.Local)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "a.txt"), old, old))

	r := runCLI(t, "ls", dir)
	requireOK(t, r)
	require.Equal(t, "a.txt\nb.bin\nlink\nsub\n", r.stdout, "names only, sorted")

	r = runCLI(t, "ls", "-l", dir)
	requireOK(t, r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, "stdout: %s", r.stdout)
	// Sorted by name; mode, owner and group by name (users-groups-by-id), size
	// (aligned), time, name, link target.
	ids := regexp.QuoteMeta(ownerNames(t)) + ` +`
	require.Regexp(t, `^-rw-r--r-- `+ids+` *7 Feb  3  2001 a\.txt$`, lines[0])
	require.Regexp(t, `^-rw-r--r-- `+ids+`1234 \w{3} [ \d]\d \d\d:\d\d b\.bin$`, lines[1])
	require.Regexp(t, `^lrwxrwxrwx `+ids+`\d+ .* link -> a\.txt$`, lines[2])
	require.Regexp(t, `^drwxr-xr-x `+ids+`\d+ .* sub$`, lines[3])

	// A file operand is listed under the name given; the flag may follow it.
	r = runCLI(t, "ls", filepath.Join(dir, "b.bin"), "-l")
	requireOK(t, r)
	require.Regexp(t, `^-rw-r--r-- `+ids+`1234 .* `+regexp.QuoteMeta(filepath.Join(dir, "b.bin"))+"\n$", r.stdout)

	r = runCLI(t, "rm", filepath.Join(dir, "b.bin"))
	requireOK(t, r)
	require.NoFileExists(t, filepath.Join(dir, "b.bin"))
	require.Empty(t, r.stdout)

	r = runCLI(t, "rm", filepath.Join(dir, "b.bin"))
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: rm: no such file or directory: "+filepath.Join(dir, "b.bin")+"\n", r.stderr)

	deep := filepath.Join(dir, "x", "y", "z")
	r = runCLI(t, "mkdir", deep)
	require.Equal(t, exitFail, r.code, "mkdir without -p needs the parent")
	require.NoDirExists(t, filepath.Join(dir, "x"))

	r = runCLI(t, "mkdir", "-p", deep)
	requireOK(t, r)
	require.DirExists(t, deep)
	r = runCLI(t, "mkdir", "-p", deep)
	requireOK(t, r) // -p: an existing directory is fine

	r = runCLI(t, "mkdir", filepath.Join(dir, "new"))
	requireOK(t, r)
	require.DirExists(t, filepath.Join(dir, "new"))
	r = runCLI(t, "mkdir", filepath.Join(dir, "new"))
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: mkdir: mkdir "+filepath.Join(dir, "new"))

	r = runCLI(t, "rm", filepath.Join(dir, "new")) // Remove takes an empty directory too
	requireOK(t, r)
	require.NoDirExists(t, filepath.Join(dir, "new"))

	r = runCLI(t, "ls", filepath.Join(dir, "nope"))
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: ls: no such file or directory: "+filepath.Join(dir, "nope")+"\n", r.stderr)
}

func TestGetMissingRemoteFile(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.bin")
	local := filepath.Join(dir, "local.bin")
	r := runCLI(t, "get", missing, local)
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "", r.stdout)
	require.Equal(t, "sluice: get: no such file or directory: "+missing+"\n", r.stderr)
	require.NoFileExists(t, local, "a failed get must not create the local file")
}

func TestGetDirectoryRefused(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	local, _ := randomFile(t, dir, "keep", 100)
	r := runCLI(t, "get", t.TempDir(), local)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "is a directory")
	fi, err := os.Stat(local)
	require.NoError(t, err)
	require.EqualValues(t, 100, fi.Size(), "the local file must not be truncated")
}

func TestPutFailures(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	r := runCLI(t, "put", filepath.Join(dir, "nope"), filepath.Join(dir, "dst"))
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: put: no such file or directory: "+filepath.Join(dir, "nope")+"\n", r.stderr)

	r = runCLI(t, "put", dir, filepath.Join(dir, "dst"))
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "is a directory")

	r = runCLI(t, "put", filepath.Join(dir, "x"), filepath.Join(dir, "no", "such", "dir", "f"))
	require.Equal(t, exitFail, r.code)

	src, data := randomFile(t, dir, "self", 4096)
	t.Chdir(dir)
	r = runCLI(t, "put", src, "self") // the same file by another name
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "same file")
	r = runCLI(t, "get", "self", src)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "same file")
	got, err := os.ReadFile(src)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"put", "a"}, "want at least 2 operand(s), got 1"},
		{[]string{"ls"}, "want at least 1 operand(s), got 0"},
		{[]string{"rm", "-r"}, "want at least 1 operand(s), got 0"},
		{[]string{"put", "a", "-j"}, "flag needs an argument: -j"},
		{[]string{"put", "-r", "a", "host:x", "--retries", "-1"}, "--retries -1: want 0 or more"},
		{[]string{"ls", "--limit", "fast", "x"}, "want a rate such as 500K"},
		{[]string{"ls", "-o", "ForwardAgent=yes", "h:x"}, "sluice does not use ForwardAgent"},
		{[]string{"ls", "-o", "nonsense", "h:x"}, "want Keyword=value"},
		{[]string{"ls", "h:2222:/x"}, "host:port:path is not read"},
		{[]string{"ls", "a:x", "b:y"}, "are on different servers"},
		{[]string{"-nosuchflag", "ls", "x"}, "flag provided but not defined: -nosuchflag"},
		{[]string{"ls", "-nosuchflag", "x"}, "ls: flag provided but not defined"},
		{[]string{"-p", "ls", "x"}, "ls: flag provided but not defined: -p"}, // mkdir's own flag
		{[]string{"-inflight", "0", "ls", "x"}, "want a positive integer"},
		{[]string{"-inflight", "100000", "ls", "x"}, "WithMaxInflight(100000)"},
		{[]string{"-packet", "10", "ls", "x"}, "WithMaxPacket(10)"},
		{[]string{"-channels", "-1", "ls", "x"}, "want a positive integer"},
		{[]string{"-P", "x", "ls", "h:x"}, "invalid value"},
		{[]string{"-c", "rot13", "ls", "h:x"}, "-c rot13: unknown cipher"},
		{[]string{"ls", "sftp://host:0/x"}, "out of range"},
		{[]string{"-i", "key", "ls", "/tmp"}, "-i is for SSH, but REMOTE /tmp has no host"},
		{[]string{"-P", "2222", "get", "/tmp/x", "y"}, "-P is for SSH"},
		{[]string{"-D", "/bin/true", "-l", "bob", "ls", "/"}, "-l is for SSH, but -D is given"},
		{[]string{"-D", " ", "ls", "/"}, "-D: empty server command"},
		{[]string{"-P", "65536", "ls", "h:x"}, "want 1 to 65535"},
		{[]string{"put", "-j", "0", "a", "b"}, "put: invalid value \"0\" for flag -j: want a positive integer"},
		{[]string{"get", "-j", "1025", "a", "b"}, "want 1 to 1024"},
		{[]string{"get", "-j", "x", "a", "b"}, "want a positive integer"},
		{[]string{"-r", "ls", "a"}, "ls: flag provided but not defined: -r"}, // put's and get's flag, before ls
		{[]string{"--retries", "2", "mkdir", "x"}, "mkdir: flag provided but not defined: -retries"},
		{[]string{"mkdir", "-r", "x"}, "mkdir: flag provided but not defined: -r"},
		{[]string{"ls", "-q", "x"}, "ls: flag provided but not defined: -q"},
		{[]string{"put", "-r", "a"}, "want at least 2 operand(s), got 1"},
		{[]string{"-version", "-x"}, "flag provided but not defined: -x"},
	}
	for _, tt := range tests {
		r := runCLI(t, tt.args...)
		require.Equal(t, exitUsage, r.code, "args %q: stderr: %s", tt.args, r.stderr)
		require.Contains(t, r.stderr, tt.want, "args %q", tt.args)
		require.True(t, strings.HasPrefix(r.stderr, "sluice: "), "args %q: %s", tt.args, r.stderr)
		require.Contains(t, r.stderr, "Run 'sluice -h' for usage.")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestHelp(t *testing.T) {
	r := runCLI(t, "-h")
	requireOK(t, r)
	require.Contains(t, r.stdout, "put [-r] [-p] [-a] [--sync] SRC... REMOTE")
	require.Contains(t, r.stdout, "sftp://[user@]host[:port]/path")
	require.Contains(t, r.stdout, "Examples:")
	require.LessOrEqual(t, strings.Count(r.stdout, "\n"), 40, "sluice -h fits one screen")
	for _, l := range strings.Split(r.stdout, "\n") {
		require.LessOrEqual(t, len(l), 90, "line too wide for a terminal: %q", l)
	}
	require.Empty(t, r.stderr)

	r = runCLI(t, "-h", "all")
	requireOK(t, r)
	for _, f := range []string{"-insecure-accept-unknown-host", "-inflight", "-timeout duration", "-limit rate", "-F file", "-J ", "-o Keyword=value", "-retries n", "-sync"} {
		require.Contains(t, r.stdout, f)
	}

	r = runCLI(t, "mkdir", "-h")
	requireOK(t, r)
	require.Contains(t, r.stdout, "sluice [flags] mkdir [-p] REMOTE")
	require.Contains(t, r.stdout, "-p\t")
	require.NotContains(t, r.stdout, "-inflight", "command help lists only the command's own flags")

	r = runCLI(t, "get", "-h")
	requireOK(t, r)
	require.Contains(t, r.stdout, "sluice [flags] get [-r] [-a] [-p] [-f] [-j n] [-q] [--sync] [--checksum] [--verify] [--retries n] REMOTE... LOCAL")
	for _, f := range []string{"-r\t", "-a\t", "-p\tpreserve", "-f\t", "-j n", "-q\t", "-sync\n", "-retries n"} {
		require.Contains(t, r.stdout, f)
	}

	r = runCLI(t, "--version")
	requireOK(t, r)
	require.Regexp(t, `^sluice \S+ \(go1\.\d+.* \w+/\w+\)\n$`, r.stdout)
}

// An interrupt (ctx cancelled) ends a command stuck waiting on its server, kills the
// server and exits 1 with "interrupted".
func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan int, 1)
	// sleep reads nothing and answers nothing: NewClientPipe waits for VERSION.
	go func() { done <- run(ctx, []string{"-D", "sleep 600", "ls", "/"}, &lockedBuffer{}, &stderr) }()
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 130, code, "128+SIGINT, the shell's convention")
		require.Equal(t, "sluice: interrupted\n", stderr.String())
	case <-time.After(testTimeout):
		t.Fatal("run did not return after its context was cancelled")
	}
}

// ownerNames is "user group" of this process, as ls -l shows them.
func ownerNames(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	require.NoError(t, err)
	g, err := user.LookupGroupId(u.Gid)
	require.NoError(t, err)
	return u.Username + " " + g.Name
}

// Issue 21: put's and get's flags go before the command too, as -h says flags go
// anywhere; ls's -l is the long listing after ls and the login user before it.
func TestFlagsBeforeTheCommand(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	size := makeTree(t, src)
	r := runCLI(t, "--retries", "5", "-r", "-q", "-j", "2", "put", src, filepath.Join(dir, "up"))
	requireOK(t, r)
	require.Empty(t, r.stderr, "-q before the command")
	requireSameTree(t, src, filepath.Join(dir, "up", "src"))
	r = runCLI(t, "-p", "-r", "get", filepath.Join(dir, "up", "src"), filepath.Join(dir, "down"), "--sync")
	requireOK(t, r)
	requireTreeSummary(t, r.stderr, "get", filepath.Join(dir, "up", "src"), filepath.Join(dir, "down", "src"), 50, size)
	r = runCLI(t, "ls", "-l", dir)
	requireOK(t, r)
	require.Regexp(t, `^drwx`, r.stdout, "after ls, -l is the long listing")
}
