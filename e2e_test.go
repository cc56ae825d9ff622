package sftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// End-to-end tests: a private OpenSSH sshd on 127.0.0.1 (internal/sshdtest, skipped
// where sshd cannot run), reached by the library over a real *ssh.Client and by the
// sluice command built from cmd/sluice.

// e2eSize is odd on purpose: several full requests of every size class plus a tail.
const e2eSize = 3<<20 + 5

func e2eRandom(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestE2ELibraryOverSSH(t *testing.T) {
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	sc, err := s.Dial()
	require.NoError(t, err)
	defer sc.Close()
	c, err := NewClient(ctx, sc)
	require.NoError(t, err)
	defer c.Close()

	// sshd runs on this machine as this user: the test checks the server's side
	// through the local file system.
	dir := t.TempDir()
	data := e2eRandom(t, e2eSize)
	big := filepath.Join(dir, "big.bin")

	f, err := c.Create(ctx, big)
	require.NoError(t, err)
	n, err := f.ReadFrom(bytes.NewReader(data))
	require.NoError(t, err)
	require.EqualValues(t, len(data), n)
	require.NoError(t, f.Close())
	onDisk, err := os.ReadFile(big)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, onDisk), "uploaded bytes differ")

	f, err = c.Open(ctx, big)
	require.NoError(t, err)
	var got bytes.Buffer
	n, err = f.WriteTo(&got)
	require.NoError(t, err)
	require.EqualValues(t, len(data), n)
	require.True(t, bytes.Equal(data, got.Bytes()), "downloaded bytes differ")
	// A read across the last request boundary, at an odd offset.
	tail := make([]byte, 1000)
	k, err := f.ReadAt(tail, int64(len(data)-777))
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 777, k)
	require.Equal(t, data[len(data)-777:], tail[:k])
	require.NoError(t, f.Close())

	fi, err := c.Stat(ctx, big)
	require.NoError(t, err)
	require.EqualValues(t, len(data), fi.Size())
	require.True(t, fi.Mode().IsRegular())
	require.Equal(t, "big.bin", fi.Name())

	small := []byte("hello over ssh\n")
	require.NoError(t, c.WriteFile(ctx, filepath.Join(dir, "a.txt"), small, 0o600))
	require.NoError(t, c.Mkdir(ctx, filepath.Join(dir, "sub"), 0o755))
	entries, err := c.ReadDir(ctx, dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"a.txt", "big.bin", "sub"}, names)
	require.True(t, entries[2].IsDir())

	renamed := filepath.Join(dir, "sub", "moved.bin")
	require.NoError(t, c.Rename(ctx, big, renamed))
	_, err = c.Stat(ctx, big)
	require.ErrorIs(t, err, fs.ErrNotExist)
	back, err := c.ReadFile(ctx, renamed)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, back), "renamed file differs")
	rsmall, err := c.ReadFile(ctx, filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, small, rsmall)

	require.NoError(t, c.Remove(ctx, renamed))
	require.NoError(t, c.Remove(ctx, filepath.Join(dir, "a.txt")))
	require.NoError(t, c.Remove(ctx, filepath.Join(dir, "sub")))
	_, err = os.Stat(renamed)
	require.True(t, errors.Is(err, fs.ErrNotExist), "remove left %s: %v", renamed, err)
	entries, err = c.ReadDir(ctx, dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// e2eSluice is the sluice binary built for this test run.
type e2eSluice struct {
	bin  string
	home string // an empty $HOME: no user keys, agent or known_hosts leak in
}

func buildSluice(t *testing.T) *e2eSluice {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("skipping: no go command to build cmd/sluice: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "sluice")
	// cmd/sluice is its own module (its replace directive points back at this one), so
	// it is built from its own directory.
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	build.Dir = filepath.Join("cmd", "sluice")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build in cmd/sluice: %s", out)
	return &e2eSluice{bin: bin, home: t.TempDir()}
}

type e2eRun struct {
	code           int
	stdout, stderr string
}

func (b *e2eSluice) run(t *testing.T, args ...string) e2eRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+b.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running sluice %q: %v", args, err)
	}
	require.NoError(t, ctx.Err(), "sluice %q did not finish", args)
	return e2eRun{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func TestE2ECommand(t *testing.T) {
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	sl := buildSluice(t)
	dir := t.TempDir()
	local := t.TempDir()
	data := e2eRandom(t, e2eSize)
	src := filepath.Join(local, "src.bin")
	require.NoError(t, os.WriteFile(src, data, 0o644))

	conn := []string{"-i", s.KeyFile, "-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port)}
	at := func(p string) string { return s.User + "@127.0.0.1:" + p }
	remote := filepath.Join(dir, "up.bin")

	r := sl.run(t, append(conn, "put", src, at(remote))...)
	require.Equal(t, 0, r.code, "put: %s", r.stderr)
	require.Regexp(t, `^put `+regexp.QuoteMeta(src)+` -> `+regexp.QuoteMeta(remote)+`: `+
		strconv.Itoa(e2eSize)+` bytes in \d+\.\d\d s, \d+\.\d MiB/s\n$`, r.stderr)
	onDisk, err := os.ReadFile(remote)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, onDisk), "uploaded bytes differ")

	back := filepath.Join(local, "back.bin")
	r = sl.run(t, append(conn, "get", at(remote), back)...)
	require.Equal(t, 0, r.code, "get: %s", r.stderr)
	require.Contains(t, r.stderr, "get "+remote+" -> "+back+": "+strconv.Itoa(e2eSize)+" bytes")
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "downloaded bytes differ")

	r = sl.run(t, append(conn, "ls", "-l", at(dir))...)
	require.Equal(t, 0, r.code, "ls: %s", r.stderr)
	require.Regexp(t, `^-rw-r--r-- \S+ \S+ `+strconv.Itoa(e2eSize)+` \w{3} [ \d]\d \d\d:\d\d up\.bin\n$`, r.stdout)

	r = sl.run(t, append(conn, "rm", at(remote))...)
	require.Equal(t, 0, r.code, "rm: %s", r.stderr)
	require.NoFileExists(t, remote)

	r = sl.run(t, append(conn, "get", at(remote), filepath.Join(local, "gone"))...)
	require.Equal(t, 1, r.code)
	require.Equal(t, "sluice: get: no such file or directory: "+remote+"\n", r.stderr)
	require.NoFileExists(t, filepath.Join(local, "gone"))

	// known_hosts that does not list the server: refused before any file is touched.
	other := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(other, []byte(knownhosts.Line([]string{"example.org"}, s.HostKey)+"\n"), 0o600))
	r = sl.run(t, "-i", s.KeyFile, "-known-hosts", other, "-P", strconv.Itoa(s.Port), "put", src, at(remote))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "sluice: unknown host [127.0.0.1]:"+strconv.Itoa(s.Port))
	require.Contains(t, r.stderr, "StrictHostKeyChecking=accept-new")
	require.NoFileExists(t, remote)

	r = sl.run(t, "put", src)
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "Run 'sluice -h' for usage.")
}
