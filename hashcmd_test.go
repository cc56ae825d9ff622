//go:build linux

package sftp

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// shellHostileNames are file names that a shell would read as syntax, or that a sum tool
// escapes: none may run anything, or hash another file.
var shellHostileNames = []string{
	"plain", "a b", "  lead and trail  ", "$(touch pwned1)", "`touch pwned2`", ";touch pwned3",
	"x|touch pwned4", "x&&touch pwned5", "x>pwned6", "<x", "'", "''", `"`, `\`, `a\b`, `\\n`,
	"new\nline", "\n", "cr\rhere", "tab\there", "*", "?", "[a]", "~root", "-n", "--", "!x",
	"#hash", "${HOME}", "$HOME", "'$(touch pwned7)'", `"$(touch pwned8)"`, "a'\n'b",
	"\x01\x02\x7f", "\xff\xfe invalid utf-8", "é ü 日本", "=x", "x=y", "{a,b}", "%s%n",
}

// TestShellEscapeRoundTrip runs every hostile name, and random ones, through the
// system's POSIX shell as shellEscape quotes them: each comes back as one word, byte for
// byte, and nothing runs.
func TestShellEscapeRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no POSIX shell: %v", err)
	}
	names := append([]string(nil), shellHostileNames...)
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = byte(1 + r.IntN(255)) // anything but NUL, which no argument holds
		}
		names = append(names, string(b))
	}
	var script strings.Builder
	script.WriteString("printf '%s\\000'")
	for _, n := range names {
		script.WriteString(" " + shellEscape(n))
	}
	for _, shell := range []string{sh, "/bin/bash", "/bin/dash"} {
		if _, err := os.Stat(shell); err != nil {
			continue
		}
		dir := t.TempDir()
		cmd := exec.Command(shell, "-c", script.String())
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		require.NoError(t, err, shell)
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		require.Equal(t, names, got, shell)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "%s ran something", shell)
	}
}

func TestShellEscapeKeepsSafeBytes(t *testing.T) {
	require.Equal(t, "/srv/a-b_c.9/x", shellEscape("/srv/a-b_c.9/x"))
	require.Equal(t, `/a\ b\;c\$\(x\)`, shellEscape("/a b;c$(x)"))
	require.Equal(t, "/a'\n'b", shellEscape("/a\nb"))
	require.Equal(t, "/é", shellEscape("/é"))
}

func TestParseSumLine(t *testing.T) {
	d := sha256.Sum256([]byte("x"))
	hx := hex.EncodeToString(d[:])
	for _, tc := range []struct {
		out, name, err string
	}{
		{hx + "  /a\n", "/a", ""},
		{strings.ToUpper(hx) + "  /a\n", "/a", ""},
		{hx + " */a\n", "/a", ""},
		{`\` + hx + `  /a\\b\nc\rd` + "\n", "/a\\b\nc\rd", ""},
		{hx + "  /a b\n", "/a b", ""},
		{hx + "  /a\\b\n", "/a\\b", ""}, // rclone and SFTPGo do not escape
		{"", "/a", "want one line"},
		{hx + "  /a", "/a", "want one line"},
		{hx + "  /a\n" + hx + "  /a\n", "/a", "want one line"},
		{hx + "  /a\nmore", "/a", "want one line"},
		{hx[:62] + "  /a\n", "/a", "hex digits"},
		{hx + "00  /a\n", "/a", "want two spaces"},
		{"zz" + hx[2:] + "  /a\n", "/a", "hex digits"},
		{hx + "\t/a\n", "/a", "want two spaces"},
		{hx + "  /b\n", "/a", `names "/b", not "/a"`},
		{hx + "  a\n", "/a", `names "a"`},
		{`\` + hx + `  /a\q` + "\n", "/a", `unknown escape \q`},
		{`\` + hx + `  /a\` + "\n", "/a", "lone backslash"},
		{"sha256sum: /a: No such file or directory\n", "/a", "hex digits"},
	} {
		sum, err := parseSumLine([]byte(tc.out), SHA256, tc.name)
		if tc.err == "" {
			require.NoError(t, err, "%q", tc.out)
			require.Equal(t, d[:], sum)
			continue
		}
		require.ErrorContains(t, err, tc.err, "%q", tc.out)
		require.ErrorContains(t, err, "sha256sum printed", "the error quotes what came back")
	}
}

// sumsOf returns each algorithm's digest of data.
func sumsOf(data []byte) map[HashAlgorithm][]byte {
	s256, s512, s1, m5 := sha256.Sum256(data), sha512.Sum512(data), sha1.Sum(data), md5.Sum(data)
	return map[HashAlgorithm][]byte{SHA256: s256[:], SHA512: s512[:], SHA1: s1[:], MD5: m5[:]}
}

// TestHashCommandSSHD hashes files with hostile names with the real commands behind a
// private sshd: the right digest each time, by the command, with no READ sent, and
// nothing but the hash run. The SFTP server starts in another directory than the
// shell, so a relative name hashes the right file only if it was made absolute first.
func TestHashCommandSSHD(t *testing.T) {
	dir, c, tap := commandSSHD(t, 0o755)

	want := map[string][]byte{}
	for i, name := range shellHostileNames {
		if strings.ContainsAny(name, "/") {
			continue
		}
		data := randBytes(1000+i*37, uint64(i))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
		want[name] = data
	}
	ctx := testCtx(t)
	for name, data := range want {
		sums := sumsOf(data)
		algs := []HashAlgorithm{SHA256}
		if name == "plain" {
			algs = HashAlgorithms()
		}
		for _, alg := range algs {
			tap.reset()
			sum, by, err := c.remoteSum(ctx, name, alg, 0, -1)
			require.NoError(t, err, "%q %s", name, alg)
			require.Equal(t, hashByCommand, by, "%q %s", name, alg)
			require.Equal(t, sums[alg], sum, "%q %s", name, alg)
			require.NotContains(t, tap.requests(), sshfx.TypeRead, "a hash by command reads nothing")
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, len(want), "only the files put there: nothing ran but the hash")
	// A range is not the command's: it is read.
	sum, by, err := c.remoteSum(ctx, "plain", SHA256, 10, 100)
	require.NoError(t, err)
	require.Equal(t, hashByReading, by)
	d := sha256.Sum256(want["plain"][10:110])
	require.Equal(t, d[:], sum)
	// A missing file: the command's complaint, quoted.
	_, err = c.Hash(ctx, "missing", SHA256)
	require.ErrorContains(t, err, "No such file")
}

// commandSSHD is a Client with WithHashCommand on a private sshd whose sftp-server
// starts in dir (mode perm), and the tap on its packets. It logs in as a plain account:
// root's shell set-up here costs more than a hash.
func commandSSHD(t *testing.T, perm os.FileMode) (dir string, c *Client, tap *xsTap) {
	t.Helper()
	dir = shmDir(t)
	require.NoError(t, os.Chmod(dir, perm))
	sshd := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{SFTPServerArgs: []string{"-d", dir}, LoginUser: "sluicebench"})
	sc, err := sshd.Dial()
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	tap = &xsTap{}
	c, err = NewClient(testCtx(t), sc, WithHashCommand(), withStreamWrap(tapStreams(tap)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return dir, c, tap
}

// tapStreams adapts an xsTap to withStreamWrap.
func tapStreams(tap *xsTap) func(io.Reader, io.WriteCloser) (io.Reader, io.WriteCloser) {
	return func(r io.Reader, w io.WriteCloser) (io.Reader, io.WriteCloser) {
		return tap.wrap(io.NopCloser(r), w)
	}
}

// answerSum answers a command like sha256sum PATH with out, formatting %s with PATH
// (unescaped the way the client escapes, which is enough for the plain names used).
func answerSum(out string, status uint32) func(cmd string) execAnswer {
	return func(cmd string) execAnswer {
		_, arg, _ := strings.Cut(cmd, " ")
		return execAnswer{stdout: fmt.Sprintf(out, strings.ReplaceAll(arg, `\`, "")), status: status}
	}
}

// TestHashCommandStrict: what a server's command prints is taken only when it is
// exactly one line with a digest of the algorithm's length for the name asked;
// anything else fails the Hash with what came back, and nothing is read instead.
func TestHashCommandStrict(t *testing.T) {
	data := []byte("some bytes")
	d := sha256.Sum256(data)
	hx := hex.EncodeToString(d[:])
	for _, tc := range []struct {
		name string
		exec func(cmd string) execAnswer
		err  string
	}{
		{"good", answerSum(hx+"  %s\n", 0), ""},
		{"two lines", answerSum(hx+"  %s\n"+hx+"  %s\n", 0), "want one line"},
		{"short digest", answerSum(hx[:40]+"  %s\n", 0), "want a sha256 digest"},
		{"another name", answerSum(hx+"  /other%.0s\n", 0), `names "/other"`},
		{"noise", answerSum("Welcome to the server!\n", 0), "sha256sum printed"},
		{"failed", func(string) execAnswer {
			return execAnswer{stderr: "sha256sum: /f: Permission denied\n", status: 1}
		}, "exited with status 1: \"sha256sum: /f: Permission denied\\n\""},
		{"endless", func(string) execAnswer { return execAnswer{stdout: strings.Repeat("x", 8<<20)} }, "printed more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startExecSSH(t, testserver.Options{}, tc.exec)
			require.NoError(t, s.srv.WriteFile("f", data, 0o644))
			tap := &xsTap{}
			c := s.client(t, WithHashCommand(), withStreamWrap(tapStreams(tap)))
			sum, err := c.Hash(testCtx(t), "f", SHA256)
			require.Equal(t, []string{"sha256sum /f"}, s.ran())
			require.NotContains(t, tap.requests(), sshfx.TypeRead)
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, d[:], sum)
				return
			}
			require.ErrorContains(t, err, tc.err)
			requireWorks(t, c)
		})
	}
}

// TestHashCommandMissing: a server without the command (exit 127 from its shell, or the
// exec request refused) is not asked again for that algorithm: the file is read.
func TestHashCommandMissing(t *testing.T) {
	data := randBytes(300<<10, 3)
	d := sha256.Sum256(data)
	for name, a := range map[string]execAnswer{
		"not found": {stderr: "sh: 1: sha256sum: not found\n", status: 127},
		"refused":   {refuse: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := startExecSSH(t, testserver.Options{}, func(string) execAnswer { return a })
			require.NoError(t, s.srv.WriteFile("f", data, 0o644))
			c := s.client(t, WithHashCommand())
			for range 2 {
				sum, by, err := c.remoteSum(testCtx(t), "f", SHA256, 0, -1)
				require.NoError(t, err)
				require.Equal(t, hashByReading, by)
				require.Equal(t, d[:], sum)
			}
			require.Len(t, s.ran(), 1, "learned once per Client")
		})
	}
}

// TestHashCommandOptIn: without WithHashCommand nothing is ever run; a pipe client has
// no SSH connection to run one on.
func TestHashCommandOptIn(t *testing.T) {
	s := startExecSSH(t, testserver.Options{}, answerSum("bogus\n", 0))
	require.NoError(t, s.srv.WriteFile("f", []byte("x"), 0o644))
	c := s.client(t)
	_, by, err := c.remoteSum(testCtx(t), "f", SHA256, 0, -1)
	require.NoError(t, err)
	require.Equal(t, hashByReading, by)
	require.Empty(t, s.ran())

	p, srv := newTestServerClient(t, testserver.Options{}, WithHashCommand())
	require.NoError(t, srv.WriteFile("f", []byte("x"), 0o644))
	_, by, err = p.remoteSum(testCtx(t), "f", SHA256, 0, -1)
	require.NoError(t, err)
	require.Equal(t, hashByReading, by)
}

// TestHashCommandCtx: ctx ending while the command runs ends the Hash at once and
// closes the session on the server.
func TestHashCommandCtx(t *testing.T) {
	hang, closed, started := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(hang)
	s := startExecSSH(t, testserver.Options{}, func(string) execAnswer {
		close(started)
		return execAnswer{hang: hang, closed: closed}
	})
	require.NoError(t, s.srv.WriteFile("f", []byte("x"), 0o644))
	c := s.client(t, WithHashCommand())
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { _, err := c.Hash(ctx, "f", SHA256); return err })
	tsRecv(t, started, "the command to start")
	cancel()
	err := tsRecv(t, res, "Hash to return")
	require.ErrorIs(t, err, context.Canceled)
	tsRecv(t, closed, "the server to see the session closed")
	requireWorks(t, c)
}

// TestProbeCommand: the probe hashes nothing, and trusts only the empty digest.
func TestProbeCommand(t *testing.T) {
	empty := hex.EncodeToString(SHA1.emptySum())
	s := startExecSSH(t, testserver.Options{}, func(cmd string) execAnswer {
		switch cmd {
		case "sha1sum":
			return execAnswer{stdout: empty + "  -\n"}
		case "md5sum":
			return execAnswer{stdout: empty + "  -\n"} // a sha1 where an md5 is due
		}
		return execAnswer{status: 127}
	})
	c := s.client(t, WithHashCommand())
	ctx := testCtx(t)
	require.Equal(t, refused, c.probeCommand(ctx, SHA256))
	require.Equal(t, offered, c.probeCommand(ctx, SHA1))
	require.Equal(t, refused, c.probeCommand(ctx, MD5))
	require.Equal(t, offered, c.probeCommand(ctx, SHA1), "remembered")
	require.Equal(t, []string{"sha256sum", "sha1sum", "md5sum"}, s.ran())
}

// sumCommands answers the commands of algs with the real digest of the file named, or
// of nothing when none is; every other command is not found (127).
func sumCommands(s **sshTestServer, algs ...HashAlgorithm) func(cmd string) execAnswer {
	return func(cmd string) execAnswer {
		word, arg, _ := strings.Cut(cmd, " ")
		for _, alg := range algs {
			if word != commandNames[alg] {
				continue
			}
			var data []byte
			name := "-"
			if arg != "" {
				name = strings.ReplaceAll(arg, `\`, "")
				var err error
				if data, err = (*s).srv.ReadFile(name); err != nil {
					return execAnswer{stderr: err.Error(), status: 1}
				}
			}
			return execAnswer{stdout: hex.EncodeToString(sumsOf(data)[alg]) + "  " + name + "\n"}
		}
		return execAnswer{stderr: "sh: " + word + ": not found\n", status: 127}
	}
}

// TestVerifyPicksCheapCommand: against a server that runs only sha1sum and md5sum (what
// SFTPGo enables by default), Verify picks SHA-1, which the server hashes, rather than
// SHA-256, which would mean reading the file back; the choice is made once.
func TestVerifyPicksCheapCommand(t *testing.T) {
	var s *sshTestServer
	s = startExecSSH(t, testserver.Options{}, sumCommands(&s, SHA1, MD5))
	tap := &xsTap{}
	c := s.client(t, WithHashCommand(), withStreamWrap(tapStreams(tap)))
	data := randBytes(700<<10, 12)
	src := filepath.Join(t.TempDir(), "src")
	writeLocal(t, src, data, 0o644)
	ctx := testCtx(t)
	require.NoError(t, c.Put(ctx, src, "up", Verify()))
	require.NotContains(t, tap.requests(), sshfx.TypeRead, "the server hashed: nothing read back")
	require.Equal(t, []string{"sha256sum", "sha512sum", "sha1sum", `sha1sum /.up.sluice-part`}, s.ran())
	require.NoError(t, c.Put(ctx, src, "again", Verify()))
	require.Equal(t, `sha1sum /.again.sluice-part`, s.ran()[4], "chosen once")
	got, err := s.srv.ReadFile("up")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
}

// TestVerifyByCommandSSHD: with the command on OpenSSH, Verify reads nothing back: a
// Put sends no READ at all, a Get reads the file once.
func TestVerifyByCommandSSHD(t *testing.T) {
	_, c, tap := commandSSHD(t, 0o777) // the login account writes there
	data := randBytes(5<<20+3, 13)
	src := filepath.Join(t.TempDir(), "src")
	writeLocal(t, src, data, 0o644)
	ctx := testCtx(t)
	tap.reset()
	require.NoError(t, c.Put(ctx, src, "up", Verify()))
	require.NotContains(t, tap.requests(), sshfx.TypeRead)
	tap.reset()
	back := filepath.Join(t.TempDir(), "back")
	require.NoError(t, c.Get(ctx, "up", back, Verify()))
	_, datas := tap.seen()
	total := 0
	for _, n := range datas {
		total += n
	}
	require.Equal(t, len(data), total, "the file crossed once")
	require.True(t, bytes.Equal(data, readLocal(t, back)))
	require.Equal(t, SHA256, c.verifyAlgorithm(ctx))
}
