package main

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
)

// The landing rule, case by case: rsync's trailing-slash rule, the same for put and
// get. A source with no base name of its own never gives the copy a name.
func TestLandingRule(t *testing.T) {
	t.Parallel()
	const (
		file = false
		dir  = true
	)
	for _, tc := range []struct {
		typed   string // a REMOTE operand's path as typed
		srcDir  bool
		several bool
		dstDir  bool // DST is an existing directory or ends in '/'
		want    landing
		wantErr bool
	}{
		{typed: "photos", srcDir: dir, want: landInside},               // whether DST exists or not
		{typed: "photos", srcDir: dir, dstDir: true, want: landInside}, // the second run: the same place
		{typed: "photos/", srcDir: dir, want: landContents},            // trailing slash: the contents
		{typed: "a/b/photos//", srcDir: dir, dstDir: true, want: landContents},
		{typed: "~", srcDir: dir, want: landContents},               // no typed base name
		{typed: "~", srcDir: dir, dstDir: true, want: landContents}, // never DIR/<the server's home's name>
		{typed: "~alice", srcDir: dir, dstDir: true, want: landContents},
		{typed: ".", srcDir: dir, want: landContents},
		{typed: "..", srcDir: dir, want: landContents},
		{typed: "a/..", srcDir: dir, want: landContents},
		{typed: "/", srcDir: dir, dstDir: true, want: landContents},
		{typed: "~/photos", srcDir: dir, want: landInside},
		{typed: "f.txt", srcDir: file, want: landAs},                    // a file onto a new name or a file
		{typed: "f.txt", srcDir: file, dstDir: true, want: landInside},  // into a directory
		{typed: "f.txt", srcDir: file, several: true, want: landInside}, // several: DST is a directory
		{typed: "~", srcDir: file, want: landAs},                        // a file by no name, onto a name typed
		{typed: "~", srcDir: file, dstDir: true, wantErr: true},         // ... but never into a directory
		{typed: "~", srcDir: file, several: true, wantErr: true},
		{typed: "photos", srcDir: dir, several: true, dstDir: true, want: landInside},
		{typed: "photos/", srcDir: dir, several: true, dstDir: true, want: landContents},
	} {
		name, slash := remoteBase(tc.typed)
		got, err := landOf(name, slash, tc.srcDir, tc.several, tc.dstDir)
		if tc.wantErr {
			require.ErrorIs(t, err, errNoName, "%+v", tc)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		require.Equal(t, tc.want, got, "%+v", tc)
	}
}

// Base names: what the user typed, never what the server resolved it to.
func TestTypedBaseNames(t *testing.T) {
	t.Parallel()
	for typed, want := range map[string]string{
		"photos": "photos", "photos/": "photos", "a/b": "b", "~/x": "x", "~/x/": "x", "/srv/in": "in",
		"~": "", "~/": "", "~bob": "", "~bob/": "", ".": "", "./": "", "..": "", "a/.": "", "a/..": "", "/": "", "//": "",
		"dir/~x": "~x",
	} {
		got, _ := remoteBase(typed)
		require.Equal(t, want, got, "remote %q", typed)
	}
	for typed, want := range map[string]string{"photos": "photos", "photos/": "photos", "a/b": "b", ".": "", "..": "", "/": "", "./": ""} {
		got, _ := localBase(typed)
		require.Equal(t, want, got, "local %q", typed)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "/"} {
		require.False(t, plainListedName(bad), "%q", bad)
	}
	require.True(t, keepListed("a.jpg", 0))
	require.True(t, keepListed("sub", fs.ModeDir))
	require.True(t, keepListed("l", fs.ModeSymlink))
	require.False(t, keepListed("f.sluice-part", 0), "an unfinished transfer's part file")
	require.False(t, keepListed("fifo", fs.ModeNamedPipe))
	require.False(t, keepListed("..", fs.ModeDir))
}

// A plan: which names the copies take, and that nothing is named by the server
// unless listed under what was typed.
func TestPlanCopy(t *testing.T) {
	t.Parallel()
	list := func(dir string) ([]listedEntry, error) {
		return []listedEntry{{src: dir + "/.bashrc", name: ".bashrc"}, {src: dir + "/l", name: "l", link: true}}, nil
	}
	into := destInfo{path: "out", exists: true, isDir: true}
	// A file named by no typed name, into a directory: refused.
	_, err := planCopy("get", []source{{path: "/home/x/.bashrc"}}, false, into, joinLocal, list)
	require.ErrorIs(t, err, errNoName)
	// The same onto a name the user typed: that name.
	pl, err := planCopy("get", []source{{path: "/home/x/.bashrc"}}, false, destInfo{path: "copy"}, joinLocal, list)
	require.NoError(t, err)
	require.Equal(t, &copyPair{"/home/x/.bashrc", "copy"}, pl.one)
	// ~ as a directory: its listing, into out; out is not made, nor the copy's root.
	pl, err = planCopy("get", []source{{path: "/", dir: true}}, false, into, joinLocal, list)
	require.NoError(t, err)
	require.Nil(t, pl.one)
	require.Equal(t, []string{"//.bashrc"}, pl.roots)
	require.Equal(t, []copyPair{{"//l", "out/l"}}, pl.links)
	require.Equal(t, "out", pl.copyRoot)
	require.False(t, pl.makeDir)
	// A typed directory into a missing DST: DST is made, the copy is DST/name.
	pl, err = planCopy("get", []source{{path: "/srv/photos", name: "photos", dir: true}}, false, destInfo{path: "new"}, joinLocal, list)
	require.NoError(t, err)
	require.True(t, pl.makeDir)
	require.Equal(t, []string{"/srv/photos"}, pl.roots)
	require.Equal(t, "new/photos", pl.copyRoot)
	// Two sources with one name: refused before anything moves.
	_, err = planCopy("get", []source{{path: "a/log", name: "log"}, {path: "b/log", name: "log"}}, true, into, joinLocal, list)
	require.ErrorContains(t, err, "would both be copied to log")
	// A tree onto an existing file: refused.
	_, err = planCopy("put", []source{{path: "d", name: "d", dir: true}}, false, destInfo{path: "f", exists: true}, joinRemote, list)
	require.ErrorContains(t, err, "not a directory: f")
}
