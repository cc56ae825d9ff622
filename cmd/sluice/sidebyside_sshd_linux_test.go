package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestSideBySide is the issue-21 comparison, not a check: sluice, scp, sftp -b and
// rclone copy on the everyday tasks, at RTT 50 ms through the delay proxy, logged in
// as a plain account. It prints a table of time and outcome per task and tool. It
// runs only when asked (it takes minutes, and scp and sftp -b are slow there):
//
//	SLUICE_SIDE_BY_SIDE=1 go test -run TestSideBySide -v -timeout 30m ./cmd/sluice
func TestSideBySide(t *testing.T) {
	if os.Getenv("SLUICE_SIDE_BY_SIDE") == "" {
		t.Skip("set SLUICE_SIDE_BY_SIDE=1 to run the side-by-side comparison")
	}
	for _, tool := range []string{"scp", "sftp", "rclone"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	isolateEnv(t)
	const login = "sluicebench"
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{LoginUser: login})
	proxy, err := delayproxy.New(s.Addr, 25*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	port := proxy.Addr()[strings.LastIndexByte(proxy.Addr(), ':')+1:]
	kh := knownHostsFile(t, knownhosts.Line([]string{proxy.Addr()}, s.HostKey))
	bin := filepath.Join(t.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	// The server's files, readable by the login account; a place it may write to.
	srv := t.TempDir()
	traversable(t, srv)
	photos := filepath.Join(srv, "photos")
	for i := range 200 {
		d := filepath.Join(photos, fmt.Sprintf("d%d", i%5))
		require.NoError(t, os.MkdirAll(d, 0o755))
		randomFile(t, d, fmt.Sprintf("p%03d.jpg", i), 4096)
	}
	bad := filepath.Join(srv, "bad")
	require.NoError(t, os.MkdirAll(bad, 0o755))
	for i := range 200 {
		randomFile(t, bad, fmt.Sprintf("f%03d", i), 4096)
	}
	require.NoError(t, os.Chmod(filepath.Join(bad, "f137"), 0)) // unreadable for the login account
	glob := filepath.Join(srv, "glob")
	require.NoError(t, os.MkdirAll(glob, 0o755))
	for i := range 20 {
		randomFile(t, glob, fmt.Sprintf("g%02d.jpg", i), 64<<10)
	}
	randomFile(t, glob, "other.txt", 100)
	up := filepath.Join(srv, "up")
	require.NoError(t, os.MkdirAll(up, 0o755))
	u, err := user.Lookup(login)
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	localPhotos := t.TempDir() + "/photos"
	require.NoError(t, os.CopyFS(localPhotos, os.DirFS(photos)))

	tools := sideBySideTools(sideBySideEnv{bin: bin, key: s.KeyFile, kh: kh, port: port, host: login + "@127.0.0.1", login: login,
		photos: photos, localPhotos: localPhotos, glob: glob, bad: bad})
	closed, err := freeClosedPort()
	require.NoError(t, err)

	var table strings.Builder
	table.WriteString("| task | tool | time | exit | outcome |\n|---|---|---|---|---|\n")
	row := func(task, tool string, d time.Duration, code int, outcome string) {
		fmt.Fprintf(&table, "| %s | %s | %.2f s | %d | %s |\n", task, tool, d.Seconds(), code, outcome)
	}
	for _, tool := range []string{"sluice", "scp", "sftp -b", "rclone copy"} {
		mk := tools[tool]
		// Re-run of a 200-file tree, get then put: each run twice into the same place.
		dst := t.TempDir()
		for run := 1; run <= 2; run++ {
			d, code, msg := runTool(t, mk("get tree", map[string]string{"dst": dst}))
			row("get -r 200 files, run "+strconv.Itoa(run), tool, d, code, landed(dst)+msg)
		}
		rdst := filepath.Join(up, strings.ReplaceAll(tool, " ", "-"))
		require.NoError(t, os.MkdirAll(rdst, 0o755))
		require.NoError(t, os.Chown(rdst, uid, gid))
		for run := 1; run <= 2; run++ {
			d, code, msg := runTool(t, mk("put tree", map[string]string{"dst": rdst}))
			row("put -r 200 files, run "+strconv.Itoa(run), tool, d, code, landed(rdst)+msg)
		}
		gdst := t.TempDir()
		d, code, msg := runTool(t, mk("glob", map[string]string{"dst": gdst}))
		row("glob of 20 files", tool, d, code, landed(gdst)+msg)
		bdst := t.TempDir()
		d, code, msg = runTool(t, mk("unreadable", map[string]string{"dst": bdst}))
		row("tree, 1 of 200 unreadable", tool, d, code, landed(bdst)+msg)
		d, code, msg = runTool(t, mk("refused", map[string]string{"port": strconv.Itoa(closed), "dst": t.TempDir()}))
		row("refused port", tool, d, code, msg)
		odst := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(odst, "keep"), nil, 0o644))
		d, code, msg = runTool(t, mk("onto dir", map[string]string{"dst": odst}))
		row("get -r onto an existing dir", tool, d, code, landed(odst)+msg)
	}
	t.Log("\n" + table.String())
}

// sideBySideEnv is what the tools' command lines are made of.
type sideBySideEnv struct {
	bin, key, kh, port, host, login string
	photos, localPhotos, glob, bad  string
}

// sideBySideTools gives each tool's command line for a task: p holds the task's
// destination (dst) or, for the refused connection, the closed port.
func sideBySideTools(e sideBySideEnv) map[string]func(task string, p map[string]string) []string {
	bin, kh, port, host, login := e.bin, e.kh, e.port, e.host, e.login
	photos, localPhotos, glob, bad := e.photos, e.localPhotos, e.glob, e.bad
	s := struct{ KeyFile string }{e.key}
	sshOpts := []string{"-i", s.KeyFile, "-o", "UserKnownHostsFile=" + kh, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "BatchMode=yes"}
	rcl := []string{"--sftp-host", "127.0.0.1", "--sftp-port", port, "--sftp-user", login, "--sftp-key-file", s.KeyFile,
		"--sftp-known-hosts-file", kh, "--config", "/dev/null", "-q"}
	return map[string]func(task string, p map[string]string) []string{
		"sluice": func(task string, p map[string]string) []string {
			base := []string{bin, "-i", s.KeyFile, "-known-hosts", kh, "-P", port}
			switch task {
			case "get tree":
				return append(base, "get", "-r", "-p", "--sync", host+":"+photos, p["dst"])
			case "put tree":
				return append(base, "put", "-r", "-p", "--sync", localPhotos, host+":"+p["dst"])
			case "glob":
				return append(base, "get", host+":"+glob+"/*.jpg", p["dst"]+"/")
			case "unreadable":
				return append(base, "get", "-r", host+":"+bad, p["dst"])
			case "refused":
				return []string{bin, "-i", s.KeyFile, "-known-hosts", kh, "-P", p["port"], "ls", host + ":/"}
			case "onto dir":
				return append(base, "get", "-r", host+":"+photos, p["dst"])
			}
			return nil
		},
		"scp": func(task string, p map[string]string) []string {
			base := append([]string{"scp", "-q", "-P", port}, sshOpts...)
			switch task {
			case "get tree":
				return append(base, "-r", "-p", host+":"+photos, p["dst"])
			case "put tree":
				return append(base, "-r", "-p", localPhotos, host+":"+p["dst"])
			case "glob":
				return append(base, host+":"+glob+"/*.jpg", p["dst"]+"/")
			case "unreadable":
				return append(base, "-r", host+":"+bad, p["dst"])
			case "refused":
				return append(append([]string{"scp", "-q", "-P", p["port"]}, sshOpts...), host+":/etc/hostname", p["dst"])
			case "onto dir":
				return append(base, "-r", host+":"+photos, p["dst"])
			}
			return nil
		},
		"sftp -b": func(task string, p map[string]string) []string {
			base := append([]string{"sftp", "-q", "-P", port}, sshOpts...)
			batch := map[string]string{
				"get tree":   "get -r -p " + photos + " " + p["dst"],
				"put tree":   "put -r -p " + localPhotos + " " + p["dst"],
				"glob":       "get " + glob + "/*.jpg " + p["dst"] + "/",
				"unreadable": "get -r " + bad + " " + p["dst"],
				"refused":    "ls /",
				"onto dir":   "get -r " + photos + " " + p["dst"],
			}[task]
			if task == "refused" {
				base = append([]string{"sftp", "-q", "-P", p["port"]}, sshOpts...)
			}
			return append(base, "-b", "-", host+"\x00"+batch)
		},
		"rclone copy": func(task string, p map[string]string) []string {
			base := append([]string{"rclone", "copy"}, rcl...)
			switch task {
			case "get tree":
				return append(base, ":sftp:"+photos, p["dst"]+"/photos")
			case "put tree":
				return append(base, localPhotos, ":sftp:"+p["dst"]+"/photos")
			case "glob":
				return append(base, "--include", "*.jpg", ":sftp:"+glob, p["dst"])
			case "unreadable":
				return append(base, ":sftp:"+bad, p["dst"]+"/bad")
			case "refused":
				return append([]string{"rclone", "lsf", "--sftp-host", "127.0.0.1", "--sftp-port", p["port"], "--sftp-user", login,
					"--sftp-key-file", s.KeyFile, "--config", "/dev/null", "--low-level-retries", "1", "--retries", "1"}, ":sftp:/")
			case "onto dir":
				return append(base, ":sftp:"+photos, p["dst"]+"/photos")
			}
			return nil
		},
	}
}

// freeClosedPort is a loopback port nothing listens on.
func freeClosedPort() (int, error) {
	return sshdtest.FreePort()
}

// runTool runs argv (an sftp batch rides after a NUL in the last word), and returns
// its time, exit code and the first line of its stderr.
func runTool(t *testing.T, argv []string) (time.Duration, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdin string
	if last := argv[len(argv)-1]; strings.Contains(last, "\x00") {
		target, batch, _ := strings.Cut(last, "\x00")
		argv[len(argv)-1], stdin = target, batch+"\n"
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	first, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
	if first != "" {
		first = "; says: " + strings.ReplaceAll(first, "|", "/")
	}
	return d, code, first
}

// landed describes where files are under dir: each top-level entry with the count of
// regular files under it.
func landed(dir string) string {
	var parts []string
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		n := 0
		_ = filepath.WalkDir(filepath.Join(dir, de.Name()), func(_ string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				n++
			}
			return nil
		})
		if de.IsDir() {
			nested := ""
			if _, err := os.Stat(filepath.Join(dir, de.Name(), de.Name())); err == nil {
				nested = ", nested " + de.Name() + "/" + de.Name()
			}
			parts = append(parts, fmt.Sprintf("%s/ (%d files%s)", de.Name(), n, nested))
		} else {
			parts = append(parts, de.Name())
		}
		if len(parts) > 4 {
			parts = append(parts, fmt.Sprintf("... %d entries", len(des)))
			break
		}
	}
	return strings.Join(parts, ", ")
}

// traversable opens dir and its parents up to /tmp to everyone, so that the account
// the server runs as can reach what the test made there.
func traversable(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
}
