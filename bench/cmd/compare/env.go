package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// benchUser is the account the clients log in as when the harness runs as root.
const benchUser = "sluicebench"

// env is the server side of a run: a private sshd and its files in a tmpfs directory.
type env struct {
	work       string // holds sources, upload targets, known_hosts and the server log
	sshd       *sshdtest.SSHD
	hostKey    string   // authorized_keys format, for the children
	knownHosts string   // for sftp(1): sshd and every proxy in front of it
	hostAddrs  []string // the addresses knownHosts covers
	log        *serverLog
	sources    map[int64]string
	trees      map[string]*treeSource
	onTmpfs    bool
}

// newEnv starts the server. maxSessions is sshd's MaxSessions; MaxStartups is raised
// too, so that a row dialing many connections at once (plain-par) is never refused.
func newEnv(root string, maxSessions int) (*env, error) {
	work, err := os.MkdirTemp(root, "sluice-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{work: work, sources: map[int64]string{}, trees: map[string]*treeSource{}, onTmpfs: isTmpfs(work)}
	e.log = &serverLog{path: filepath.Join(work, "sftp-server.log")}
	// sftp-server at INFO logs one line per closed file with the bytes it read and wrote:
	// the server's own account of every SFTP transfer, checked after each one.
	opts := sshdtest.SSHDOptions{
		SFTPServerArgs: []string{"-l", "INFO"},
		SFTPServerLog:  e.log.path,
		Ciphers:        []string{sshdtest.CipherAES128GCM},
		MaxSessions:    maxSessions,
		ExtraConfig:    []string{"MaxStartups 100"},
	}
	if os.Geteuid() == 0 {
		if d := closedAncestor(root); d != "" {
			_ = os.RemoveAll(work)
			return nil, fmt.Errorf("the clients log in as %s, who cannot enter %s: give -work a directory every user can reach (the default /dev/shm is)", benchUser, d)
		}
		// Every client logs in as a plain account, as an SFTP user of a server would,
		// not as root, whose shell start-up on a developer's machine would be paid
		// once per SFTP channel (see sshdtest.SSHDOptions.LoginUser). It owns work:
		// uploads and sftp-server's log are written there.
		opts.LoginUser = benchUser
	}
	if e.sshd, err = sshdtest.StartSSHD(opts); err != nil {
		_ = os.RemoveAll(work)
		return nil, err
	}
	if opts.LoginUser != "" {
		if err := chownTo(work, opts.LoginUser); err != nil {
			e.close()
			return nil, err
		}
	}
	e.hostKey = string(ssh.MarshalAuthorizedKey(e.sshd.HostKey))
	e.knownHosts = filepath.Join(work, "known_hosts")
	if err := e.addKnownHost(e.sshd.Addr); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// closedAncestor returns the first directory from dir up to / that other users cannot
// enter, or "" when there is none.
func closedAncestor(dir string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// chownTo gives dir to the account name.
func chownTo(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return fmt.Errorf("uid of %s: %w", name, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return fmt.Errorf("gid of %s: %w", name, err)
	}
	return os.Chown(dir, uid, gid)
}

func (e *env) close() {
	_ = e.sshd.Close()
	_ = os.RemoveAll(e.work)
}

// addKnownHost lets sftp(1) accept sshd's host key at addr (a proxy's port), since
// OpenSSH keys known_hosts entries by [host]:port.
func (e *env) addKnownHost(addr string) error {
	e.hostAddrs = append(e.hostAddrs, addr)
	line := knownhosts.Line(e.hostAddrs, e.sshd.HostKey) + "\n"
	return os.WriteFile(e.knownHosts, []byte(line), 0o600)
}

// source returns a file of size random bytes, creating it on first use. Random so that
// nothing on the way can shortcut the data.
func (e *env) source(size int64) (string, error) {
	if p, ok := e.sources[size]; ok {
		return p, nil
	}
	p := filepath.Join(e.work, fmt.Sprintf("src-%d.bin", size))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	rng := rand.NewChaCha8([32]byte{'s', 'l', 'u', 'i', 'c', 'e'})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := int(min(left, int64(len(buf))))
		_, _ = rng.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			_ = f.Close()
			return "", err
		}
		left -= int64(n)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	e.sources[size] = p
	return p, nil
}

// serverLog reads the sftp-server log. mark remembers where the log ends before a
// transfer; await then looks only at what that transfer added.
type serverLog struct {
	path string
	off  int64
}

// closeLine is sftp-server's INFO line for a closed file handle ("forced close" when the
// session ended with the handle still open, which also counts).
var closeLine = regexp.MustCompile(`close "(.*)" bytes read (\d+) written (\d+)`)

func (l *serverLog) mark() error {
	fi, err := os.Stat(l.path)
	if errors.Is(err, os.ErrNotExist) {
		l.off = 0
		return nil
	}
	if err != nil {
		return err
	}
	l.off = fi.Size()
	return nil
}

// moved sums, over the handles on path closed since mark, the bytes read and written. A
// striping client closes one handle per channel, so one transfer can log several lines.
func (l *serverLog) moved(path string) (read, written int64, err error) {
	return l.movedIf(func(p string) bool { return p == path })
}

// movedUnder sums like moved over every file below dir: a tree copy, including the part
// files a client writes before renaming them into place.
func (l *serverLog) movedUnder(dir string) (read, written int64, err error) {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	return l.movedIf(func(p string) bool { return strings.HasPrefix(p, prefix) })
}

func (l *serverLog) movedIf(match func(path string) bool) (read, written int64, err error) {
	b, err := os.ReadFile(l.path)
	if err != nil {
		return 0, 0, err
	}
	if int64(len(b)) < l.off {
		return 0, 0, errors.New("sftp-server log shrank")
	}
	for _, line := range strings.Split(string(b[l.off:]), "\n") {
		m := closeLine.FindStringSubmatch(line)
		if m == nil || !match(m[1]) {
			continue
		}
		r, _ := strconv.ParseInt(m[2], 10, 64)
		w, _ := strconv.ParseInt(m[3], 10, 64)
		read, written = read+r, written+w
	}
	return read, written, nil
}

// await polls until the log shows at least want bytes moved on path in dir. A client
// waits for CLOSE's reply, which sftp-server sends after logging, so this normally holds
// at once; the wait covers handles the server closes only when the session ends.
func (l *serverLog) await(path string, dir direction, want int64, timeout time.Duration) error {
	return l.awaitMoved(path, func() (int64, int64, error) { return l.moved(path) }, dir, want, timeout)
}

// awaitUnder is await for a tree: the bytes moved on every file below root.
func (l *serverLog) awaitUnder(root string, dir direction, want int64, timeout time.Duration) error {
	return l.awaitMoved(root+"/…", func() (int64, int64, error) { return l.movedUnder(root) }, dir, want, timeout)
}

func (l *serverLog) awaitMoved(what string, moved func() (read, written int64, err error), dir direction, want int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		read, written, err := moved()
		if err != nil {
			return err
		}
		got := read
		if dir == upload {
			got = written
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sftp-server logged %d bytes %s for %s, want %d", got, map[direction]string{download: "read", upload: "written"}[dir], what, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
