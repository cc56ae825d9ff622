package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/testserver"
	"github.com/stretchr/testify/require"
)

// Server text that would drive a terminal (issue 8, item 10; CVE-2019-6109 did this to
// scp): set the window title, clear the screen, colour the rest red.
const (
	titleName = "\x1b]0;pwned\x07"
	clearName = "\x1b[2J.txt"
	redTarget = "\x1b[31mred\x1b[0m"
)

// requireNoRawControls checks that out carries no escape, bell or C1 CSI.
func requireNoRawControls(t *testing.T, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		if c := out[i]; c == 0x1b || c == 0x07 || c == 0x9b || c == '\r' {
			t.Fatalf("raw control character %#x reached the output: %q", c, out)
		}
	}
}

// hostileDir makes a directory whose names and link target carry escapes, served by
// the real sftp-server: Linux file names may hold any byte but '/' and NUL.
func hostileDir(t *testing.T) string {
	t.Helper()
	needLocalServer(t)
	dir := filepath.Join(t.TempDir(), "srv")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, titleName), []byte("title"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, clearName), []byte("clear"), 0o644))
	require.NoError(t, os.Symlink(redTarget, filepath.Join(dir, "link")))
	sub := filepath.Join(dir, "\x1b[2Jdir")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), []byte("x"), 0o644))
	return dir
}

func TestHostileNamesInLs(t *testing.T) {
	dir := hostileDir(t)
	r := runCLI(t, "ls", dir)
	requireOK(t, r)
	requireNoRawControls(t, r.stdout)
	require.Contains(t, r.stdout, `\x1b]0;pwned\x07`+"\n")
	require.Contains(t, r.stdout, `\x1b[2J.txt`+"\n")

	r = runCLI(t, "ls", "-l", dir)
	requireOK(t, r)
	requireNoRawControls(t, r.stdout)
	require.Contains(t, r.stdout, ` link -> \x1b[31mred\x1b[0m`+"\n")

	// Several operands print each directory's name as a heading: escaped too.
	r = runCLI(t, "ls", dir+"/*dir", dir+"/link")
	requireOK(t, r)
	requireNoRawControls(t, r.stdout)
	require.Contains(t, r.stdout, `\x1b[2Jdir:`)
}

// A glob's matches come from the server: the lines naming them are escaped (the
// summary names the pattern, the live status line each file).
func TestHostileNamesInProgressLines(t *testing.T) {
	dir := hostileDir(t)
	out := t.TempDir()
	r := runCLI(t, "get", dir+"/*.txt", out)
	requireOK(t, r)
	requireNoRawControls(t, r.stderr)
	require.Contains(t, r.stderr, `get `+dir+`/*.txt -> `+out+`: 1 file, 5 bytes`)
	got, err := os.ReadFile(filepath.Join(out, clearName))
	require.NoError(t, err, "the file itself keeps its real name")
	require.Equal(t, "clear", string(got))

	r = runCLI(t, "get", "-r", dir, filepath.Join(out, "tree"))
	requireOK(t, r)
	requireNoRawControls(t, r.stderr)

	// The status line drawn while a file moves names it.
	s := newScript(t, true, 200, "get", dir+"/"+titleName, out)
	s.at(0, oneFile(dir+"/"+titleName, out+"/"+titleName, 0, 10*mib))
	s.at(500, oneFile(dir+"/"+titleName, out+"/"+titleName, 5*mib, 10*mib))
	line := s.take()
	require.Contains(t, line, `\x1b]0;pwned\x07  5.0 MiB / 10.0 MiB`)
	requireNoRawControls(t, strings.ReplaceAll(strings.ReplaceAll(line, clearLine, ""), "\r", "")) // but the display's own
	s.at(900, finished(oneFile(dir+"/"+titleName, out+"/"+titleName, 10*mib, 10*mib)))
	s.d.finish(nil)
	rest := s.take()
	require.Contains(t, rest, `get `+dir+`/\x1b]0;pwned\x07 -> `+out+`/\x1b]0;pwned\x07: 10485760 bytes`)
	requireNoRawControls(t, strings.ReplaceAll(strings.ReplaceAll(rest, clearLine, ""), "\r", ""))
}

// Errors that embed a server-supplied name (a glob match) are escaped.
func TestHostileNamesInErrors(t *testing.T) {
	dir := hostileDir(t)
	r := runCLI(t, "rm", dir+"/*dir")
	require.Equal(t, exitFail, r.code)
	requireNoRawControls(t, r.stderr)
	require.Contains(t, r.stderr, `sluice: rm: remove `+dir+`/\x1b[2Jdir: `)
}

// inProcess makes the app talk to srv over pipes instead of dialling.
func inProcess(srv *testserver.Server) func(a *app) {
	return func(a *app) {
		a.testDial = func(ctx context.Context) (*session, error) {
			rd, w := srv.Conn()
			c, err := sftp.NewClientPipe(ctx, a.replies.reader(rd), w)
			if err != nil {
				return nil, err
			}
			return &session{client: c}, nil
		}
	}
}

// statusPacket encodes an SSH_FXP_STATUS with the given message.
func statusPacket(id, code uint32, msg string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = append(b, testserver.TypeStatus)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, code)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	b = append(b, msg...)
	b = binary.BigEndian.AppendUint32(b, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// A STATUS message is the server's own text: escaped when an error shows it.
func TestHostileStatusMessage(t *testing.T) {
	srv := testserver.New(testserver.Options{
		Corrupt: func(req testserver.Request, reply []byte) [][]byte {
			if req.Type == testserver.TypeRemove {
				return [][]byte{statusPacket(req.ID, 4, "denied\x1b]0;pwned\x07\x1b[2J\r\nfake prompt$ ")}
			}
			return nil
		},
	})
	t.Cleanup(func() { srv.Close() })
	require.NoError(t, srv.WriteFile("/f", []byte("x"), 0o644))
	r := runApp(t, inProcess(srv), "rm", "/f")
	require.Equal(t, exitFail, r.code)
	requireNoRawControls(t, r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line, whatever the server sent: %q", r.stderr)
	require.Contains(t, r.stderr, `denied\x1b]0;pwned\x07\x1b[2J\x0d\x0afake prompt$ `)
}

// A server that never finishes a listing cannot hold ls: --timeout ends it with a
// message saying so (issue 8, item 4, the CLI's part).
func TestListingTimeout(t *testing.T) {
	srv := testserver.New(testserver.Options{
		Stall: func(req testserver.Request) bool { return req.Type == testserver.TypeReaddir },
	})
	t.Cleanup(func() { srv.Close() })
	require.NoError(t, srv.Mkdir("/d", 0o755))
	for _, args := range [][]string{{"ls", "--timeout", "200ms", "/d"}, {"--timeout=200ms", "ls", "/d/*"}, {"rm", "-r", "/d", "--timeout", "200ms"}} {
		r := runApp(t, inProcess(srv), args...)
		require.Equal(t, exitFail, r.code, "%q", args)
		require.Contains(t, r.stderr, "the server sent no reply for 200ms (--timeout)", "%q", args)
	}
	require.Equal(t, defaultOpTimeout, 2*time.Minute, "the documented default")
}

// --timeout bounds the wait for each reply, not a whole command: a recursive rm whose
// many requests are each answered promptly outlasts the timeout in total and still
// finishes (a reviewer's rm -r of 6,000 files stopped part way). The server
// answers every request after a pause, so the total is surely longer than --timeout
// while no single wait comes near it. TestListingTimeout is the other side: a server
// that stops answering is still given up on.
func TestTimeoutIsPerReply(t *testing.T) {
	const files, pause, timeout = 40, 60 * time.Millisecond, 1500 * time.Millisecond
	srv := testserver.New(testserver.Options{
		Fail: func(testserver.Request) uint32 { time.Sleep(pause); return 0 },
	})
	t.Cleanup(func() { srv.Close() })
	require.Greater(t, time.Duration(files)*pause, timeout, "the test must outlast --timeout")
	require.NoError(t, srv.Mkdir("/tree", 0o755))
	for i := range files {
		require.NoError(t, srv.WriteFile(fmt.Sprintf("/tree/f%02d.txt", i), []byte("x"), 0o644))
	}
	r := runApp(t, inProcess(srv), "--timeout", timeout.String(), "rm", "-r", "/tree")
	requireOK(t, r)
	_, err := srv.Stat("/tree")
	require.ErrorIs(t, err, fs.ErrNotExist, "everything removed")
}
