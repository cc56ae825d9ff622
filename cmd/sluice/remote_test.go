package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRemote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    remote
		wantErr string // substring; "" means success
	}{
		// Bare paths: no ':' before the first '/'.
		{in: "file.txt", want: remote{Path: "file.txt"}},
		{in: "/abs/path", want: remote{Path: "/abs/path"}},
		{in: "./a:b", want: remote{Path: "./a:b"}},
		{in: "dir/x:y", want: remote{Path: "dir/x:y"}},
		{in: "a@b", want: remote{Path: "a@b"}},
		{in: "user@/path", want: remote{Path: "user@/path"}},
		{in: "@foo", want: remote{Path: "@foo"}},

		// Host and path.
		{in: "host:path", want: remote{Host: "host", Path: "path"}},
		{in: "host:/abs", want: remote{Host: "host", Path: "/abs"}},
		{in: "host:.", want: remote{Host: "host", Path: "."}},
		{in: "example.com:dir/a:b", want: remote{Host: "example.com", Path: "dir/a:b"}},
		{in: "alice@host:/x", want: remote{User: "alice", Host: "host", Path: "/x"}},
		{in: "host:/a@b", want: remote{Host: "host", Path: "/a@b"}},
		{in: "127.0.0.1:/tmp/x", want: remote{Host: "127.0.0.1", Path: "/tmp/x"}},

		// The old host:port:path form is refused, saying what to write instead.
		{in: "host:2222:/tmp/x", wantErr: "write sftp://host:2222/tmp/x"},
		{in: "root@127.0.0.1:2222:rel", wantErr: "-P 2222 or write sftp://root@127.0.0.1:2222/~/rel"},
		{in: "host:2222:", wantErr: "host:port:path is not read"},
		{in: "host:./2222:x", want: remote{Host: "host", Path: "./2222:x"}},
		{in: "host:2222", want: remote{Host: "host", Path: "2222"}}, // no second ':' -> a path
		{in: "host:22a:x", want: remote{Host: "host", Path: "22a:x"}},

		// sftp:// URIs, as OpenSSH's sftp and scp take them.
		{in: "sftp://host/srv/in", want: remote{Host: "host", Path: "/srv/in"}},
		{in: "sftp://alice@host:2222/srv/in/", want: remote{User: "alice", Host: "host", Port: 2222, Path: "/srv/in/"}},
		{in: "SFTP://host", want: remote{Host: "host", Path: "."}},
		{in: "sftp://host/~/notes.txt", want: remote{Host: "host", Path: "notes.txt"}},
		{in: "sftp://host/~", want: remote{Host: "host", Path: "."}},
		{in: "sftp://[::1]:22/tmp/x", want: remote{Host: "::1", Port: 22, Path: "/tmp/x"}},
		{in: "sftp://bob;fingerprint=SHA256-x@host/x", want: remote{User: "bob", Host: "host", Path: "/x"}},
		{in: "sftp://host/a%20b", want: remote{Host: "host", Path: "/a b"}},
		{in: "sftp://bob:pw@host/x", wantErr: "password in the URI"},
		{in: "sftp://host:0/x", wantErr: "out of range"},
		{in: "sftp:///x", wantErr: "missing host"},
		{in: "sftp://host/x?y=1", wantErr: "no ?query"},

		// IPv6 in brackets.
		{in: "[::1]:/tmp/x", want: remote{Host: "::1", Path: "/tmp/x"}},
		{in: "[::1]:2222:/tmp/x", wantErr: "sftp://[::1]:2222/tmp/x"},
		{in: "root@[fe80::1%eth0]:p", want: remote{User: "root", Host: "fe80::1%eth0", Path: "p"}},

		// Errors.
		{in: "", wantErr: "empty REMOTE"},
		{in: "host:", want: remote{Host: "host", Path: "."}},
		{in: "user@host:", want: remote{User: "user", Host: "host", Path: "."}},
		{in: "[::1]:", want: remote{Host: "::1", Path: "."}},
		{in: ":path", wantErr: "missing host"},
		{in: "user@:path", wantErr: "missing host"},
		{in: "@host:path", wantErr: "empty user"},
		{in: "host:0:/x", wantErr: "-P 0"},
		{in: "[::1", wantErr: "missing ']'"},
		{in: "[]:/x", wantErr: "empty host"},
		{in: "[::1]/x", wantErr: "want ':'"},
	}
	for _, tt := range tests {
		got, err := parseRemote(tt.in)
		if tt.wantErr != "" {
			require.ErrorContains(t, err, tt.wantErr, "input %q", tt.in)
			continue
		}
		require.NoError(t, err, "input %q", tt.in)
		require.Equal(t, tt.want, got, "input %q", tt.in)
		// String writes the syntax back so that it parses to the same thing.
		again, err := parseRemote(got.String())
		require.NoError(t, err, "reparse of %q", got.String())
		require.Equal(t, got, again, "reparse of %q", got.String())
	}
}

// TestPatternRulesMatchLibrary: what counts as a pattern is the library Glob's rule,
// the escape '\' included, so a\b means "ab" whether or not another character of the
// operand is a pattern; a real backslash is written \\.
func TestPatternRulesMatchLibrary(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	for _, n := range []string{"ab", `a\b`} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
	r := runCLI(t, "ls", dir+`/a\b`)
	requireOK(t, r)
	require.Equal(t, dir+"/ab\n", r.stdout)
	r = runCLI(t, "ls", dir+`/a\\b`)
	requireOK(t, r)
	require.Equal(t, dir+`/a\b`+"\n", r.stdout)
	r = runCLI(t, "ls", dir+`/a?b`)
	requireOK(t, r)
	require.Equal(t, dir+`/a\b`+"\n", r.stdout, "? matches the backslash, as path.Match says")

	// Entries of a listing are named as the library's Glob names its matches.
	for _, tt := range []struct{ dir, want string }{{".", "x"}, {"", "x"}, {"/", "/x"}, {"d", "d/x"}, {"/d", "/d/x"}} {
		require.Equal(t, tt.want, joinRemote(tt.dir, "x"), tt.dir)
	}
}
