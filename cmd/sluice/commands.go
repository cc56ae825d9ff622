package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"syscall"
	"time"

	"github.com/sluicehq/sftp"
)

func (a *app) ls(ctx context.Context, args []string, long bool) (err error) {
	paths, s, closeFn, err := a.openPaths(ctx, "ls", args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	// Like ls(1): files first, under the names given, then each directory's entries,
	// headed by its name when there are several operands. An operand that cannot be
	// listed (missing, unreadable) is reported and the others are listed; the command
	// then fails.
	var files []listEntry
	var dirs []string
	fails := &operandFailures{a: a, op: "ls", total: len(paths)}
	for _, p := range paths {
		fi, err := a.lsStat(ctx, s.client, p)
		if err != nil {
			if ferr := fails.add(err, p); ferr != nil {
				return fmt.Errorf("ls: %w", ferr)
			}
			continue
		}
		if fi.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, listEntry{info: fi, name: p, path: p})
		}
	}
	if len(files) > 0 {
		if err := a.printEntries(ctx, s.client, files, long); err != nil {
			return err
		}
	}
	for i, d := range dirs {
		if len(paths) > 1 {
			if len(files) > 0 || i > 0 {
				fmt.Fprintln(a.stdout)
			}
			fmt.Fprintf(a.stdout, "%s:\n", escapeText(d))
		}
		if err := a.lsDir(ctx, s.client, d, long); err != nil {
			if ferr := fails.add(err, d); ferr != nil {
				return fmt.Errorf("ls: %w", ferr)
			}
		}
	}
	return fails.result()
}

// lsStat looks at one ls operand: a dangling link is still listed.
func (a *app) lsStat(ctx context.Context, c *sftp.Client, p string) (fs.FileInfo, error) {
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	fi, err := c.Stat(octx, p)
	if err != nil && octx.Err() == nil {
		if fi2, lerr := c.Lstat(octx, p); lerr == nil {
			fi, err = fi2, nil
		}
	}
	return fi, a.timeoutError(ctx, octx, "ls "+p, err)
}

// lsDir prints the entries of the directory d, sorted, or unsorted as they come when
// there are too many to hold.
func (a *app) lsDir(ctx context.Context, c *sftp.Client, d string, long bool) error {
	octx, cancel := a.opCtx(ctx)
	des, err := c.ReadDir(octx, d)
	if errors.Is(err, sftp.ErrListingTooLarge) {
		// Too big to hold and sort: shown as it comes, a page at a time.
		err = a.streamList(octx, c, d, long)
	}
	err = a.timeoutError(ctx, octx, "ls "+d, err)
	cancel()
	if err != nil || des == nil {
		return err
	}
	entries := make([]listEntry, 0, len(des))
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			return err
		}
		entries = append(entries, listEntry{info: info, name: de.Name(), path: joinRemote(d, de.Name())})
	}
	return a.printEntries(ctx, c, entries, long)
}

// operandFailures collects the failures of a command's operands that leave the
// others to do (a missing or unreadable path), as ls(1) goes on past one. The command
// then fails with the one failure, or with several listed on stderr and counted.
type operandFailures struct {
	a     *app
	op    string
	total int
	errs  []error
}

// add records err, the failure of the operand p, if it belongs to that operand alone;
// any other error (a lost connection, a timeout) is returned: the command stops there.
func (f *operandFailures) add(err error, p string) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
		return describe(err, p)
	}
	f.errs = append(f.errs, describe(err, p))
	return nil
}

// result is the command's error: nil when every operand was done.
func (f *operandFailures) result() error {
	switch len(f.errs) {
	case 0:
		return nil
	case 1:
		return withOp(f.op, f.errs[0])
	}
	for _, err := range f.errs {
		fmt.Fprintf(f.a.stderr, "sluice: %s: %s\n", f.op, escapeText(dropOp(err, f.op)))
	}
	return &treeFailed{op: f.op, failed: len(f.errs), total: f.total, first: f.errs[0], noun: "operand", listed: true}
}

// streamList prints a directory too large for a sorted listing in the server's
// order, one READDIR page at a time, so memory stays one page whatever its size.
func (a *app) streamList(ctx context.Context, c *sftp.Client, dir string, long bool) error {
	fmt.Fprintf(a.stderr, "sluice: ls: %s is too large to hold and sort: listing it unsorted\n", escapeText(dir))
	page := make([]listEntry, 0, 256)
	flush := func() error {
		err := a.printEntries(ctx, c, page, long)
		page = page[:0]
		return err
	}
	for de, err := range c.DirEntries(ctx, dir) {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		if page = append(page, listEntry{info: info, name: de.Name(), path: joinRemote(dir, de.Name())}); len(page) == cap(page) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// printEntries writes names, one per line, or with long the ls -l form, reading each
// link's target (one READLINK per link, bounded by --timeout).
func (a *app) printEntries(ctx context.Context, c *sftp.Client, entries []listEntry, long bool) error {
	if !long {
		for _, e := range entries {
			if _, err := fmt.Fprintln(a.stdout, escapeText(e.name)); err != nil {
				return err
			}
		}
		return nil
	}
	for i, e := range entries {
		if e.info.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		octx, cancel := a.opCtx(ctx)
		target, err := c.Readlink(octx, e.path)
		err = a.timeoutError(ctx, octx, "readlink "+e.path, err)
		cancel()
		if err == nil {
			entries[i].target = target
		} else if ctx.Err() != nil {
			return err
		}
	}
	a.nameOwners(ctx, c, entries)
	return printLong(a.stdout, entries, time.Now())
}

// nameOwners fills in the entries' owner and group names where the server can say
// them (users-groups-by-id@openssh.com, OpenSSH 9.1 and later): one request for the
// whole listing. Where it cannot, or fails, the ids stay numeric, as ls -n shows them.
func (a *app) nameOwners(ctx context.Context, c *sftp.Client, entries []listEntry) {
	var uids, gids []uint32
	seenU, seenG := map[uint32]bool{}, map[uint32]bool{}
	for _, e := range entries {
		if fa, ok := e.info.Sys().(*sftp.FileAttrs); ok && fa.Flags.Has(sftp.AttrUIDGID) {
			if !seenU[fa.UID] {
				seenU[fa.UID] = true
				uids = append(uids, fa.UID)
			}
			if !seenG[fa.GID] {
				seenG[fa.GID] = true
				gids = append(gids, fa.GID)
			}
		}
	}
	if len(uids) == 0 {
		return
	}
	octx, cancel := a.opCtx(ctx)
	defer cancel()
	users, groups, err := c.UserGroupNames(octx, uids, gids)
	if err != nil || len(users) != len(uids) || len(groups) != len(gids) {
		return
	}
	userOf, groupOf := map[uint32]string{}, map[uint32]string{}
	for i, id := range uids {
		userOf[id] = ownerName(users[i], id)
	}
	for i, id := range gids {
		groupOf[id] = ownerName(groups[i], id)
	}
	for i, e := range entries {
		if fa, ok := e.info.Sys().(*sftp.FileAttrs); ok && fa.Flags.Has(sftp.AttrUIDGID) {
			entries[i].owner = userOf[fa.UID] + " " + groupOf[fa.GID]
		}
	}
}

// maxOwnerName is the widest owner or group name ls -l shows (escaped): what useradd
// allows. A longer name from the server is shown as its id, so that one absurd name
// (users-groups-by-id allows 256 KiB) neither floods every line nor widens the column.
const maxOwnerName = 32

// ownerName is how ls -l shows the name the server gave for id: escaped, or the id
// when it gave none or one too long to show.
func ownerName(name string, id uint32) string {
	if e := escapeText(name); e != "" && len(e) <= maxOwnerName {
		return e
	}
	return strconv.FormatUint(uint64(id), 10)
}

func (a *app) rm(ctx context.Context, args []string, recursive bool) (err error) {
	paths, s, closeFn, err := a.openPaths(ctx, "rm", args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	for _, p := range paths {
		octx, cancel := a.opCtx(ctx)
		if recursive {
			// RemoveAll is quiet about a missing name; rm is not.
			if _, err = s.client.Lstat(octx, p); err == nil {
				err = s.client.RemoveAll(octx, p)
			}
		} else {
			err = s.client.Remove(octx, p)
		}
		err = a.timeoutError(ctx, octx, "rm "+p, err)
		cancel()
		if err != nil {
			return fmt.Errorf("rm: %w", describe(err, p))
		}
	}
	return nil
}

func (a *app) mkdir(ctx context.Context, args []string, parents bool) (err error) {
	rs, s, closeFn, err := a.openTargets(ctx, args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	mk := s.client.Mkdir
	if parents {
		mk = s.client.MkdirAll
	}
	for _, r := range rs {
		p, err := a.expandRemote(ctx, s.client, r.Path)
		if err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
		octx, cancel := a.opCtx(ctx)
		err = a.timeoutError(ctx, octx, "mkdir "+p, mk(octx, p, 0o755))
		cancel()
		if err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
	}
	return nil
}

type listEntry struct {
	info   fs.FileInfo
	name   string // as shown
	path   string // on the server, for READLINK
	target string // a link's target, when read
	owner  string // "user group" when the server named them, escaped
}

// printLong writes entries like "ls -l" without the link count: mode, owner and group
// (names where the server gave them, else the ids SFTP v3 sends), size, modification
// time, name, and "-> target" for a link. Everything from the server is escaped. now decides between a time and a year.
func printLong(w io.Writer, entries []listEntry, now time.Time) error {
	width, owners := 1, 1
	for _, e := range entries {
		width = max(width, len(strconv.FormatInt(e.info.Size(), 10)))
		owners = max(owners, len(e.ownerText()))
	}
	for _, e := range entries {
		name := escapeText(e.name)
		if e.target != "" {
			name += " -> " + escapeText(e.target)
		}
		_, err := fmt.Fprintf(w, "%s %-*s %*d %s %s\n", modeString(e.info.Mode()), owners, e.ownerText(), width, e.info.Size(), lsTime(e.info.ModTime(), now), name)
		if err != nil {
			return err
		}
	}
	return nil
}

// lsTime formats t as ls(1) does: the time of day for the last six months, else the
// year. A server that sent no times gets a placeholder of the same width.
func lsTime(t, now time.Time) string {
	if t.IsZero() {
		return "           -"
	}
	t = t.Local()
	if d := now.Sub(t); d < 0 || d > 182*24*time.Hour {
		return t.Format("Jan _2  2006")
	}
	return t.Format("Jan _2 15:04")
}

// modeString renders m in ls(1)'s notation (Go's FileMode.String differs: "L" for
// links, type letters before the permissions).
func modeString(m fs.FileMode) string {
	b := []byte("----------")
	switch {
	case m&fs.ModeDir != 0:
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<uint(8-i)) != 0 {
			b[1+i] = rwx[i]
		}
	}
	special := func(pos int, set bool, lower, upper byte) {
		if !set {
			return
		}
		if b[pos] == '-' {
			b[pos] = upper
		} else {
			b[pos] = lower
		}
	}
	special(3, m&fs.ModeSetuid != 0, 's', 'S')
	special(6, m&fs.ModeSetgid != 0, 's', 'S')
	special(9, m&fs.ModeSticky != 0, 't', 'T')
	return string(b)
}

// ownerText is the owner column: names where the server gave them, else the ids.
func (e listEntry) ownerText() string {
	if e.owner != "" {
		return e.owner
	}
	return owner(e.info)
}

// owner is "uid gid" when the server sent them, else "-".
func owner(fi fs.FileInfo) string {
	if a, ok := fi.Sys().(*sftp.FileAttrs); ok && a.Flags.Has(sftp.AttrUIDGID) {
		return strconv.FormatUint(uint64(a.UID), 10) + " " + strconv.FormatUint(uint64(a.GID), 10)
	}
	return "-"
}

// describe turns a missing path, or a directory where a file was wanted, into the
// message a user wants: which name they gave, and what is wrong with it.
func describe(err error, p string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no such file or directory: %s", p)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s is a directory", p)
	}
	return err
}
