package main

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// TestSumLikeSha256sum: sluice sum prints what sha256sum prints for the same names
// (local sftp-server: a bare path), GNU's escaping of backslashes and newlines
// included, so that sha256sum -c checks a copy.
func TestSumLikeSha256sum(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	names := []string{"plain", "with space", `back\slash`, "new\nline"}
	var paths, operands []string
	for i, n := range names {
		p, _ := randomFile(t, dir, n, 1000*i+7)
		paths = append(paths, p)
		operands = append(operands, strings.ReplaceAll(p, `\`, `\\`)) // a backslash in REMOTE escapes
	}
	for _, tool := range []struct{ alg, bin string }{{"sha256", "sha256sum"}, {"md5", "md5sum"}} {
		r := runCLI(t, append([]string{"sum", "-a", tool.alg}, operands...)...)
		requireOK(t, r)
		if _, err := exec.LookPath(tool.bin); err != nil {
			continue
		}
		want, err := exec.Command(tool.bin, paths...).Output()
		require.NoError(t, err)
		require.Equal(t, string(want), r.stdout, tool.bin)
		check := exec.Command(tool.bin, "-c", "-")
		check.Stdin = strings.NewReader(r.stdout)
		out, err := check.CombinedOutput()
		require.NoError(t, err, "%s -c: %s", tool.bin, out)
	}

	// A glob; a file that is missing: reported, the others still printed, exit 1.
	r := runCLI(t, "sum", filepath.Join(dir, "pl*"), filepath.Join(dir, "nope"), paths[1])
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: sum: no such file or directory: "+filepath.Join(dir, "nope"))
	require.Contains(t, r.stderr, "sum: 1 of 3 files could not be hashed")
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	r = runCLI(t, "sum", "-a", "crc32", paths[0])
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "want one of sha256, sha512, sha1, md5")
}

func TestSumLine(t *testing.T) {
	d := []byte{0xab, 0xcd}
	require.Equal(t, "abcd  a b\n", sumLine(d, "a b"))
	require.Equal(t, `\abcd  a\\b\nc\rd`+"\n", sumLine(d, "a\\b\nc\rd"))
	require.Equal(t, `abcd  a\x1b[2Jb`+"\n", sumLine(d, "a\x1b[2Jb"), "a name cannot drive the terminal")
}

// TestVerifyChecksumLocal: put and get with --verify, files and trees, and --checksum
// skipping what matches, against the local sftp-server.
func TestVerifyChecksumLocal(t *testing.T) {
	needLocalServer(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	_, a := randomFile(t, src, "a", 3<<20+5)
	_, b := randomFile(t, src, "b", 100)
	remote := filepath.Join(dir, "remote")
	require.NoError(t, os.Mkdir(remote, 0o755))

	r := runCLI(t, "put", "-q", "-r", "--verify", src, remote)
	requireOK(t, r)
	require.Equal(t, a, readFile(t, filepath.Join(remote, "src", "a")))
	back := filepath.Join(dir, "back")
	r = runCLI(t, "get", "-q", "--verify", filepath.Join(remote, "src", "a"), back)
	requireOK(t, r)
	require.Equal(t, a, readFile(t, back))

	// To and from standard streams: checked once they have passed.
	r = runCLI(t, "get", "--verify", filepath.Join(remote, "src", "b"), "-")
	requireOK(t, r)
	require.Equal(t, string(b), r.stdout)

	// --checksum: the same content, newer times: nothing moves.
	later := filepath.Join(src, "a")
	require.NoError(t, os.Chtimes(later, time.Now().Add(3600e9), time.Now().Add(3600e9)))
	r = runCLI(t, "put", "-r", "--checksum", src, remote)
	requireOK(t, r)
	require.Contains(t, r.stderr, "skipped", r.stderr)
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}

// TestSumHashCommand: with --hash-command the server hashes (sshd with coreutils), and
// sum, --verify and --checksum give what they give without it.
func TestSumHashCommand(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	writeUserSSHConfig(t, hostBlock("box", s), s)
	dir := t.TempDir()
	_, data := randomFile(t, dir, "f", 2<<20+1)
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:]) + "  " + dir + "/f\n"
	for _, flags := range [][]string{nil, {"--hash-command"}} {
		r := runCLI(t, append(flags, "sum", "box:"+dir+"/f")...)
		requireOK(t, r)
		require.Equal(t, want, r.stdout)
		r = runCLI(t, append(flags, "get", "-q", "--verify", "box:"+dir+"/f", filepath.Join(dir, "g"))...)
		requireOK(t, r)
		require.Equal(t, data, readFile(t, filepath.Join(dir, "g")))
		r = runCLI(t, append(flags, "put", "-q", "--verify", filepath.Join(dir, "g"), "box:"+dir+"/h")...)
		requireOK(t, r)
		require.Equal(t, data, readFile(t, filepath.Join(dir, "h")))
	}
	m := md5.Sum(data)
	r := runCLI(t, "--hash-command", "sum", "-a", "md5", "box:"+dir+"/f")
	requireOK(t, r)
	require.Equal(t, hex.EncodeToString(m[:])+"  "+dir+"/f\n", r.stdout)
	// Without a host there is no SSH to run a command on.
	r = runCLI(t, "--hash-command", "sum", filepath.Join(dir, "f"))
	require.Equal(t, exitUsage, r.code)
}
