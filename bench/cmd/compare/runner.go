package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// harness runs transfers against one env.
type harness struct {
	cfg      *config
	env      *env
	exe      string // this binary, re-executed for the Go rows
	sftpPath string // OpenSSH sftp(1); "" if not installed
	// timePath is GNU time, which measures each client's peak RSS. The rusage Go gets
	// from wait4 cannot: Go starts children with vfork, and Linux folds the parent's
	// high-water RSS into the child's ru_maxrss at exec, so every client would appear
	// at least as large as the harness (with the proxy's buffers). GNU time forks from
	// a process of about 1 MiB, so its %M is the client's own. "" = not installed.
	timePath string
	summary  *summaryTable // -summary; nil without it
}

// measurement is one transfer as seen from outside the client process.
type measurement struct {
	ran      bool          // a process was started (false: skipped by deadline or setup failure)
	wall     time.Duration // client process start to exit: connect, transfer, close
	transfer time.Duration // Go rows only: the child's own timing of the transfer
	rssKiB   int64         // peak resident set, 0 if unknown (for sftp(1): the larger of sftp and its ssh)
	cpu      time.Duration // user + system (for sftp(1): including its ssh child)
	timedOut bool
	err      error
}

// clientCmd is the client process to run for one transfer.
type clientCmd struct {
	path  string
	args  []string
	stdin io.Reader
}

// workload is what one table moves: a file of size bytes, or, in the tree case, tree.
type workload struct {
	c    benchCase
	size int64       // the file's, or all the tree's files' bytes
	tree *treeSource // tree case only
}

// run performs one transfer by r and checks it: sizes from the client, the file system
// and sftp-server's log. An upload's destination, and a tree download's, is removed
// afterwards in every case.
func (h *harness) run(ctx context.Context, r *row, dir direction, addr string, w *workload, round int) measurement {
	j := &job{Row: r.id, Addr: addr, User: h.env.sshd.User, KeyFile: h.env.sshd.KeyFile,
		HostKey: h.env.hostKey, KnownHosts: h.env.knownHosts, Dir: dir, Size: w.size, Tree: w.tree != nil,
		Timeout: h.cfg.timeout, Sluice: h.cfg.sluice, Parallel: h.cfg.plainPar}
	if w.tree != nil {
		// A destination that does not exist yet, in a directory that does: sftp(1)'s
		// get -r and put -r and sluice's Get and Put all then create it as the copy,
		// rather than copying into it.
		dst := filepath.Join(h.env.work, fmt.Sprintf("%s-tree-%s-%d", dir, r.id, round))
		if err := os.RemoveAll(dst); err != nil {
			return measurement{err: err}
		}
		defer os.RemoveAll(dst)
		if dir == upload {
			j.Local, j.Remote = w.tree.root, dst
		} else {
			j.Remote, j.Local = w.tree.root, dst
		}
	} else {
		src, err := h.env.source(w.size)
		if err != nil {
			return measurement{err: err}
		}
		if dir == upload {
			j.Local = src
			j.Remote = filepath.Join(h.env.work, fmt.Sprintf("up-%s-%d.bin", r.id, round))
			defer os.Remove(j.Remote)
		} else {
			j.Remote = src
		}
	}
	if err := h.env.log.mark(); err != nil {
		return measurement{err: err}
	}
	var cc clientCmd
	if r.transfer != nil {
		spec, err := json.Marshal(j)
		if err != nil {
			return measurement{err: err}
		}
		cc = clientCmd{path: h.exe, args: []string{childFlag + string(spec)}}
	} else {
		var err error
		if cc, err = h.opensshCommand(j); err != nil {
			return measurement{err: err}
		}
	}
	m := h.execute(ctx, cc, r.transfer != nil)
	if m.err == nil && !m.timedOut {
		m.err = h.verify(r, j, w)
	}
	return m
}

// verify checks what the server side saw, independently of the client's own count.
func (h *harness) verify(r *row, j *job, w *workload) error {
	if w.tree != nil {
		copied := j.Remote
		if j.Dir == download {
			copied = j.Local
		}
		if err := verifyTree(w.tree, copied); err != nil {
			return err
		}
		return h.env.log.awaitUnder(j.Remote, j.Dir, j.Size, 5*time.Second)
	}
	if j.Dir == upload && (r.sftp || r.remoteFile) {
		fi, err := os.Stat(j.Remote)
		if err != nil {
			return err
		}
		if fi.Size() != j.Size {
			return fmt.Errorf("uploaded file has %d bytes, want %d", fi.Size(), j.Size)
		}
	}
	if j.Dir == upload && r.remoteFile {
		// No server log to confirm what arrived: compare it with the source.
		return sameContent(j.Local, j.Remote)
	}
	if r.sftp {
		return h.env.log.await(j.Remote, j.Dir, j.Size, 5*time.Second)
	}
	return nil
}

// opensshCommand runs OpenSSH sftp(1) in batch mode with its defaults (64 requests in
// flight, request sizes from limits@openssh.com), isolated from any ssh_config.
func (h *harness) opensshCommand(j *job) (clientCmd, error) {
	_, port, err := net.SplitHostPort(j.Addr)
	if err != nil {
		return clientCmd{}, err
	}
	args := append([]string{"-b", "-"}, opensshOptions(j)...)
	cc := clientCmd{path: h.sftpPath, args: append(args, "-P", port, j.User+"@127.0.0.1")}
	// get to /dev/null, like the Go rows' io.Discard. sftp's batch parser takes
	// double-quoted arguments; the harness's paths never contain quotes. A tree goes
	// with -r, to a destination that does not exist yet: get -r creates it (its parent
	// must exist), and so does put -r, which makes just the one directory.
	switch {
	case j.Tree && j.Dir == download:
		cc.stdin = strings.NewReader(fmt.Sprintf("get -r %q %q\n", j.Remote, j.Local))
	case j.Tree:
		cc.stdin = strings.NewReader(fmt.Sprintf("put -r %q %q\n", j.Local, j.Remote))
	case j.Dir == download:
		cc.stdin = strings.NewReader(fmt.Sprintf("get %q /dev/null\n", j.Remote))
	default:
		cc.stdin = strings.NewReader(fmt.Sprintf("put %q %q\n", j.Local, j.Remote))
	}
	return cc, nil
}

// opensshOptions are the options sftp(1) and the pipe rows' ssh(1) share: no ssh_config,
// the harness's key and known_hosts, the one cipher every row uses, no prompts.
func opensshOptions(j *job) []string {
	return []string{
		"-F", "/dev/null",
		"-o", "Ciphers=" + sshdtest.CipherAES128GCM,
		"-i", j.KeyFile, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + j.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
	}
}

// sameContent reports whether files a and b hold the same bytes.
func sameContent(a, b string) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	bufA, bufB := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(bufA)) {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		endB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		if errA != nil && !endA {
			return errA
		}
		if errB != nil && !endB {
			return errB
		}
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return fmt.Errorf("%s differs from %s in the MiB at offset %d", b, a, off)
		}
		if endA { // and so endB: both read the same short count
			return nil
		}
	}
}

// execute runs one client process under the per-transfer timeout, under GNU time when
// it is installed, and collects its resource usage. The client gets its own process
// group and the whole group is killed at the timeout, so neither GNU time's child nor
// sftp(1)'s ssh can outlive it.
func (h *harness) execute(ctx context.Context, cc clientCmd, goChild bool) measurement {
	tctx, cancel := context.WithTimeout(ctx, h.cfg.timeout)
	defer cancel()
	usage := filepath.Join(h.env.work, "usage.txt")
	_ = os.Remove(usage)
	path, args := cc.path, cc.args
	if h.timePath != "" {
		args = append([]string{"-o", usage, "-f", "%M %U %S", path}, args...)
		path = h.timePath
	}
	cmd := exec.CommandContext(tctx, path, args...)
	var stdout bytes.Buffer
	stderr := &cappedBuffer{max: 16 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cc.stdin, &stdout, stderr
	killTreeOnCancel(cmd)
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err := cmd.Run()
	m := measurement{ran: cmd.ProcessState != nil, wall: time.Since(start)}
	if ps := cmd.ProcessState; ps != nil {
		// CPU time is not skewed the way ru_maxrss is; this is the fallback when GNU
		// time is missing or was killed with the client.
		m.cpu = ps.UserTime() + ps.SystemTime()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		m.err = ctx.Err()
	case err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded):
		m.timedOut = true
	case err != nil:
		m.err = fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	case goChild:
		var res childResult
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			m.err = fmt.Errorf("child output %q: %v", stdout.String(), err)
		} else {
			m.transfer = time.Duration(res.Seconds * float64(time.Second))
		}
	}
	if h.timePath != "" {
		if rss, cpu, ok := readUsage(usage); ok {
			m.rssKiB, m.cpu = rss, cpu
		}
	}
	return m
}

// readUsage parses GNU time's "%M %U %S" line: peak RSS in KiB, user and system seconds.
// It is the file's last line: time writes "Command exited with non-zero status" first.
func readUsage(path string) (rssKiB int64, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 3 {
		return 0, 0, false
	}
	rss, err1 := strconv.ParseInt(f[0], 10, 64)
	user, err2 := strconv.ParseFloat(f[1], 64)
	sys, err3 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	return rss, time.Duration((user + sys) * float64(time.Second)), true
}

// cappedBuffer keeps the first max bytes written to it: enough of a client's stderr to
// explain a failure without letting a chatty one grow the harness.
type cappedBuffer struct {
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string { return b.buf.String() }
