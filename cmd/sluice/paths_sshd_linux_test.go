package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// writeOpens matches sftp-server's log line (at VERBOSE) for an OPEN with write access.
var writeOpens = regexp.MustCompile(`open "[^"]*" flags [A-Z,]*WRITE`)

// ~ and ~/x, remote globs, rm -r, errors in the user's terms, and --sync: a second
// identical run opens nothing for writing on the server (its own log says so), and a
// run after one file changed opens exactly that one. As passwordUser, so that ~ is a
// home of the test's own.
func TestSSHHomeGlobsRmSync(t *testing.T) {
	isolateEnv(t)
	_, home := needPasswordUser(t)
	// The server runs as passwordUser: its log must be writable by it.
	logDir := t.TempDir()
	require.NoError(t, os.Chmod(logDir, 0o777))
	require.NoError(t, os.Chmod(filepath.Dir(logDir), 0o755))
	logFile := filepath.Join(logDir, "sftp-server.log")
	require.NoError(t, os.WriteFile(logFile, nil, 0o666))
	require.NoError(t, os.Chmod(logFile, 0o666))
	s := newSSHDForUser(t, sshdtest.SSHDOptions{SFTPServerArgs: []string{"-l", "VERBOSE"}, SFTPServerLog: logFile})
	cfg := strings.Replace(hostBlock("box", s), "User "+s.User, "User "+passwordUser, 1)
	writeUserSSHConfig(t, cfg, s)
	base := filepath.Base(userTempDir(t, home))
	serverLog := func() string {
		b, err := os.ReadFile(logFile)
		require.NoError(t, err)
		return string(b)
	}

	local := t.TempDir()
	tree := filepath.Join(local, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o755))
	for _, n := range []string{"a.txt", "b.txt", "c.log", ".hidden.txt", "sub/d.txt"} {
		randomFile(t, tree, n, 1000+len(n))
	}

	// ~/x is the home directory on the server.
	r := runCLI(t, "put", "-r", "-p", tree, "box:~/"+base+"/")
	requireOK(t, r)
	requireSameTree(t, tree, filepath.Join(home, base, "tree"))
	r = runCLI(t, "ls", "box:~")
	requireOK(t, r)
	require.Contains(t, strings.Split(r.stdout, "\n"), base)

	// Globs: '*' does not cross '/' nor match a leading '.'.
	r = runCLI(t, "ls", "box:~/"+base+"/tree/*.txt")
	requireOK(t, r)
	require.Equal(t, home+"/"+base+"/tree/a.txt\n"+home+"/"+base+"/tree/b.txt\n", r.stdout)
	r = runCLI(t, "ls", "box:~/"+base+"/*/s?b")
	requireOK(t, r)
	require.Equal(t, "d.txt\n", r.stdout)
	got := filepath.Join(local, "got")
	require.NoError(t, os.Mkdir(got, 0o755))
	r = runCLI(t, "get", "-q", "box:~/"+base+"/tree/*.txt", "box:~/"+base+"/tree/c.log", got)
	requireOK(t, r)
	names, err := os.ReadDir(got)
	require.NoError(t, err)
	require.Len(t, names, 3)
	r = runCLI(t, "get", "box:~/"+base+"/tree/*.zip", got)
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: get: no match for "+home+"/"+base+"/tree/*.zip\n", r.stderr)

	// --sync: nothing opened for writing the second time.
	opens := len(writeOpens.FindAllString(serverLog(), -1))
	require.Positive(t, opens, "the server log shows the first run's OPENs")
	r = runCLI(t, "put", "-r", "--sync", tree, "box:~/"+base+"/")
	requireOK(t, r)
	require.Contains(t, r.stderr, "5 unchanged skipped")
	require.Equal(t, opens, len(writeOpens.FindAllString(serverLog(), -1)), "a sync with nothing changed wrote nothing")
	randomFile(t, tree, "b.txt", 77) // a new size
	r = runCLI(t, "put", "-r", "--sync", tree, "box:~/"+base+"/")
	requireOK(t, r)
	require.Contains(t, r.stderr, "4 unchanged skipped")
	log := writeOpens.FindAllString(serverLog(), -1)
	require.Len(t, log, opens+1)
	require.Contains(t, log[opens], "/tree/.b.txt.sluice-part")
	requireSameTree(t, tree, filepath.Join(home, base, "tree"))
	// And the other way: a get --sync into an up-to-date copy moves nothing.
	back := filepath.Join(local, "back")
	require.NoError(t, os.Mkdir(back, 0o755))
	r = runCLI(t, "get", "-r", "--sync", "-q", "box:~/"+base+"/tree", back)
	requireOK(t, r)
	requireSameTree(t, tree, filepath.Join(back, "tree"))
	r = runCLI(t, "get", "-r", "--sync", "box:~/"+base+"/tree", back)
	requireOK(t, r)
	require.Contains(t, r.stderr, "5 files, ")
	require.Contains(t, r.stderr, "5 unchanged skipped")

	// Errors name what was typed and say what is wrong, never a part file.
	// (dir/ would be made, as a destination ending in / is; its parent is not.)
	r = runCLI(t, "put", filepath.Join(tree, "a.txt"), "box:/missing/dir/")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: put: no such directory: /missing\n", r.stderr)
	r = runCLI(t, "put", filepath.Join(tree, "a.txt"), "box:~/"+base+"/nodir/f")
	require.Equal(t, "sluice: put: no such directory: "+home+"/"+base+"/nodir\n", r.stderr)
	r = runCLI(t, "put", filepath.Join(tree, "a.txt"), filepath.Join(tree, "b.txt"), "box:~/"+base+"/tree/a.txt")
	require.Equal(t, "sluice: put: not a directory: "+home+"/"+base+"/tree/a.txt\n", r.stderr)
	r = runCLI(t, "get", "box:~/"+base+"/tree/a.txt", filepath.Join(local, "no", "such"))
	require.Equal(t, "sluice: get: no such directory: "+filepath.Join(local, "no")+"\n", r.stderr)
	r = runCLI(t, "put", filepath.Join(tree, "a.txt"), "box:/")
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: put "+filepath.Join(tree, "a.txt")+" -> /a.txt: open /a.txt: ")
	require.NotContains(t, r.stderr, "sluice-part")

	// rm -r removes a tree; rm without -r refuses a non-empty directory.
	r = runCLI(t, "rm", "box:~/"+base+"/tree")
	require.Equal(t, exitFail, r.code)
	require.DirExists(t, filepath.Join(home, base, "tree"))
	r = runCLI(t, "rm", "-r", "box:~/"+base+"/tree")
	requireOK(t, r)
	require.NoDirExists(t, filepath.Join(home, base, "tree"))
	r = runCLI(t, "rm", "-r", "box:~/"+base+"/tree")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: rm: no such file or directory: "+home+"/"+base+"/tree\n", r.stderr)
}
