package main

import (
	"context"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// transferFunc moves j.Size bytes over conn in j.Dir and returns the bytes it moved (a
// tree copy, which has no byte count of its own, returns j.Size once it succeeded: the
// harness counts the tree itself). It runs in the child process, after the SSH
// handshake, and times nothing itself.
type transferFunc func(ctx context.Context, conn *ssh.Client, j *job) (int64, error)

// row is one client in the comparison.
type row struct {
	id    string // for -rows
	title string
	order int // position in the tables
	// detail, if set, adds the row's settings for a table of the given case to its
	// title (the tuned sluice row).
	detail func(*config, benchCase) string
	// sftp rows go through sftp-server, whose log confirms the bytes it moved.
	sftp bool
	// remoteFile rows without sftp-server write an upload's destination themselves
	// (plain-par's dd), so it is checked against the source.
	remoteFile bool
	// pipe rows take part in the pipe case only: they start OpenSSH ssh(1) processes
	// themselves, and the child dials no x/crypto connection for them.
	pipe bool
	// transfer runs in a child process; nil means the row is OpenSSH sftp(1), which the
	// harness runs itself.
	transfer transferFunc
	// tree copies a directory tree in a child process, for the tree case; a row without
	// one (other than sftp(1)) has no recursive copy and is left out of tree tables.
	tree transferFunc
	// downloadOnly rows have nothing to upload (a hash of a remote file) and are left
	// out of upload tables.
	downloadOnly bool
}

func (r *row) label(cfg *config, c benchCase) string {
	if r.detail != nil {
		return r.title + " (" + r.detail(cfg, c) + ")"
	}
	return r.title
}

// runs reports whether r takes part in tables of case c. sftp(1) (transfer == nil) is
// the reference in every case.
func (r *row) runs(c benchCase) bool {
	switch {
	case r.transfer == nil:
		return true
	case c == casePipe:
		return r.pipe
	case c == caseTree:
		return r.tree != nil && !r.pipe
	}
	return !r.pipe
}

// rowsFor is the rows of a table in direction dir.
func rowsFor(rows []*row, dir direction) []*row {
	if dir == download {
		return rows
	}
	return slices.DeleteFunc(slices.Clone(rows), func(r *row) bool { return r.downloadOnly })
}

// childFunc is what a child process runs for r in j.
func (r *row) childFunc(j *job) transferFunc {
	if j.Tree {
		return r.tree
	}
	return r.transfer
}

// sluiceDefaultID is the row every ratio is computed against, except in the pipe case.
const sluiceDefaultID = "sluice"

// The pipe case's sluice rows (sluicepipe.go, sluicepipe_opener.go).
const (
	pipeRowID       = "sluice-pipe"
	pipeOpenerRowID = "sluice-pipe-opener"
)

// pipeBaseRow is the row a pipe table's ratios divide: the pipe client with an opener,
// or without one in a build that has no opener row.
func pipeBaseRow(rows []*row) *row {
	if r := findIn(rows, pipeOpenerRowID); r != nil {
		return r
	}
	return findIn(rows, pipeRowID)
}

var registry []*row

// register adds a row; files add their rows from init, and the sluice rows only exist
// when the sluice package builds (see sluice.go).
func register(r *row) { registry = append(registry, r) }

func registeredRows() []*row { return sortRows(slices.Clone(registry)) }

func rowIDs() []string {
	var ids []string
	for _, r := range registeredRows() {
		ids = append(ids, r.id)
	}
	return ids
}

// findRow returns the registered row id, or the member of a row family it names.
func findRow(id string) *row {
	for _, r := range registry {
		if r.id == id {
			return r
		}
	}
	for _, f := range families {
		if n, ok := f.member(id); ok {
			return f.make(n)
		}
	}
	return nil
}

// rowFamily makes rows that take a number, named prefix+number: sluice with a fixed
// channel count is "sluice-ch8". The child process rebuilds the row from its id.
type rowFamily struct {
	prefix string
	max    int
	make   func(n int) *row
}

var families []rowFamily

// registerFamily adds a family; like register, called from init.
func registerFamily(f rowFamily) { families = append(families, f) }

// member parses id as prefix+n with 1 <= n <= f.max.
func (f rowFamily) member(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, f.prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || n > f.max || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

func findFamily(prefix string) *rowFamily {
	for i := range families {
		if families[i].prefix == prefix {
			return &families[i]
		}
	}
	return nil
}

func init() {
	register(&row{id: "plain", title: "plain channel (`cat`)", order: 10, transfer: plainTransfer})
	register(&row{id: "openssh", title: "OpenSSH sftp(1)", order: 20, sftp: true})
	register(&row{id: "pkgsftp", title: "pkg/sftp v1.13.12 default", order: 30, sftp: true,
		transfer: pkgSFTPTransfer()})
	register(&row{id: "pkgsftp-tuned", title: "pkg/sftp v1.13.12 tuned", order: 40, sftp: true,
		transfer: pkgSFTPTransfer(
			sftp.MaxConcurrentRequestsPerFile(64),
			sftp.UseConcurrentWrites(true),
			sftp.MaxPacketUnchecked(261120),
		)})
}

// plainTransfer is one session channel running cat: the cost of moving the bytes through
// x/crypto/ssh with no SFTP at all. Behind a delay it shows the one-channel window cap.
func plainTransfer(_ context.Context, conn *ssh.Client, j *job) (int64, error) {
	if j.Dir == download {
		return sessionCopy(conn, "cat "+shellQuote(j.Remote), nil)
	}
	src, err := os.Open(j.Local)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	return sessionCopy(conn, "cat > /dev/null", src)
}

// sessionCopy runs cmd in a new session on conn and counts the bytes it moves: with
// src nil, what cmd writes (read into io.Discard); else src, copied into cmd's input,
// which is then closed. It waits for cmd to exit.
func sessionCopy(conn *ssh.Client, cmd string, src io.Reader) (int64, error) {
	sess, err := conn.NewSession()
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	if src == nil {
		out, err := sess.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := sess.Start(cmd); err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, out)
		if werr := sess.Wait(); err == nil {
			err = werr
		}
		return n, err
	}
	in, err := sess.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := sess.Start(cmd); err != nil {
		return 0, err
	}
	n, err := io.Copy(in, src)
	if cerr := in.Close(); err == nil {
		err = cerr
	}
	if werr := sess.Wait(); err == nil {
		err = werr
	}
	return n, err
}

// pkgSFTPTransfer is pkg/sftp used the way its documentation suggests: io.Copy onto and
// off a remote *sftp.File, which picks its concurrent ReadFrom/WriteTo paths.
func pkgSFTPTransfer(opts ...sftp.ClientOption) transferFunc {
	return func(_ context.Context, conn *ssh.Client, j *job) (int64, error) {
		c, err := sftp.NewClient(conn, opts...)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return copyFile(j, c.Open, c.Create)
	}
}

// remoteFile is what copyFile uses of a client's remote file.
type remoteFile interface {
	io.Reader
	io.Writer
	io.Closer
}

// copyFile moves j's file the plain way a user would write it: io.Copy off the remote
// file open returns, or onto the one create returns, so that the client's own WriteTo
// or ReadFrom does the work. A failed Close fails the copy.
func copyFile[F remoteFile](j *job, open, create func(name string) (F, error)) (int64, error) {
	if j.Dir == download {
		f, err := open(j.Remote)
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return n, err
	}
	src, err := os.Open(j.Local)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	f, err := create(j.Remote)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// shellQuote quotes s for the remote login shell.
func shellQuote(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, `'\''`...)
		} else {
			out = append(out, s[i])
		}
	}
	return string(append(out, '\''))
}
