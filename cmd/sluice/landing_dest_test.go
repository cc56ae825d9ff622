package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A destination that does not exist is made (not its parents) when the copy goes
// into it: typed with a trailing slash, for a file, a tree or a glob, or named as the
// directory of several sources. Both ways, through the local sftp-server.
func TestMissingDestinationDirectoryIsMade(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "mtree", "sub"), 0o755))
	_, a := randomFile(t, src, "a.txt", 1000)
	_, b := randomFile(t, src, "b.txt", 2000)
	_, c := randomFile(t, filepath.Join(src, "mtree", "sub"), "c.bin", 300_000)
	requireFile := func(p string, want []byte) {
		t.Helper()
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, want, got, p)
	}
	in := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }

	for _, tc := range []struct {
		args  []string
		check func()
	}{
		{[]string{"put", in("src", "a.txt"), in("up1") + "/"}, func() { requireFile(in("up1", "a.txt"), a) }},
		{[]string{"put", "-r", in("src", "mtree"), in("up2") + "/"}, func() { requireFile(in("up2", "mtree", "sub", "c.bin"), c) }},
		{[]string{"put", in("src", "a.txt"), in("src", "b.txt"), in("up3") + "/"}, func() {
			requireFile(in("up3", "a.txt"), a)
			requireFile(in("up3", "b.txt"), b)
		}},
		{[]string{"put", in("src", "a.txt"), in("src", "b.txt"), in("up4")}, func() { requireFile(in("up4", "b.txt"), b) }},
		{[]string{"get", in("src", "*.txt"), in("restore2") + "/"}, func() {
			requireFile(in("restore2", "a.txt"), a)
			requireFile(in("restore2", "b.txt"), b)
		}},
		{[]string{"get", in("src", "b.txt"), in("down1") + "/"}, func() { requireFile(in("down1", "b.txt"), b) }},
		{[]string{"get", "-r", in("src", "mtree"), in("down2") + "/"}, func() { requireFile(in("down2", "mtree", "sub", "c.bin"), c) }},
		{[]string{"get", "-r", in("src", "mtree") + "/", in("down3") + "/"}, func() { requireFile(in("down3", "sub", "c.bin"), c) }},
	} {
		r := runCLI(t, append([]string{"-q"}, tc.args...)...)
		requireOK(t, r)
		tc.check()
	}

	// Names come out clean: no "//" from the slash typed.
	r := runCLI(t, "put", in("src", "b.txt"), in("up1")+"//")
	requireOK(t, r)
	requireSummary(t, r.stderr, "put", in("src", "b.txt"), in("up1", "b.txt"), len(b))

	// The parent is not made: that is a typo more often than not.
	r = runCLI(t, "put", in("src", "a.txt"), in("no", "such")+"/")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: put: no such directory: "+in("no")+"\n", r.stderr)
	r = runCLI(t, "get", in("src", "*.txt"), in("no", "such")+"/")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: get: no such directory: "+in("no")+"\n", r.stderr)
	require.NoDirExists(t, in("no"))

	// A file where the directory should be is refused, not replaced.
	r = runCLI(t, "put", in("src", "a.txt"), in("src", "b.txt")+"/")
	require.Equal(t, exitFail, r.code)
	require.Equal(t, "sluice: put: not a directory: "+in("src", "b.txt")+"\n", r.stderr)
}
