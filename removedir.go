package sftp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"syscall"
)

// Removing directories. RMDIR is not the same request on every server. A POSIX server
// removes an empty directory and refuses any other; MinIO's SFTP server (its
// cmd/sftp-server-driver.go) deletes every object whose name begins with the
// directory's path as a string: everything below the directory, and the siblings
// whose names begin with its name ("ab" beside "a"). So an RMDIR goes out only once
// what it could remove has been looked at:
//
//   - Remove (os.Remove: a file or an empty directory) sends RMDIR only after the
//     directory's listing showed no entry. A directory that cannot be listed is not
//     removed: nothing would show what an RMDIR there removes.
//   - On a server that reports a directory at a name that does not exist (MinIO's
//     "dummy" STAT, which is how a store keyed on name prefixes shows itself; the
//     Client finds out once, by an LSTAT of a random name: phantomDirs), RMDIR goes
//     out only after the parent's listing showed no other entry whose name begins
//     with the directory's. RemoveAll checks this too: what is below the directory is
//     its to remove, the directory's neighbours are not.
//
// An entry made between the listing and the RMDIR goes with the directory on a server
// whose RMDIR removes what is below it: no SFTP v3 request closes that window, which
// is one round trip wide.

// errRmdirReach refuses an RMDIR that would remove names beside the directory.
var errRmdirReach = fmt.Errorf("sftp: RMDIR not sent: this server reports directories at names that do not exist (a store keyed on name prefixes, as MinIO), where RMDIR removes every name that begins with the directory's: %w", errors.ErrUnsupported)

// removeDir is Remove's end for name after REMOVE failed with removeErr: when LSTAT
// shows a directory, an RMDIR only once its listing showed no entry and, on a server
// of phantom directories, no neighbour's name begins with its name. The LSTAT, the
// OPENDIR and the phantom probe (once per Client) go out together, and the CLOSE with
// the RMDIR: a directory costs Remove three round trips more than a file.
func (c *Client) removeDir(ctx context.Context, name string, removeErr error) error {
	var fi fs.FileInfo
	var lerr, derr error
	var d *Dir
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d, derr = c.openDir(ctx, name)
	}()
	c.withPhantomProbe(ctx, name, func() { fi, lerr = c.Lstat(ctx, name) })
	wg.Wait()
	if d != nil {
		// The CLOSE goes out without a wait, at the latest with the RMDIR.
		defer closeUnwaited(ctx, d)
	}
	switch {
	case lerr != nil || !fi.IsDir():
		return removeErr // REMOVE refused what is not a directory: its error says why
	case derr != nil:
		return fmt.Errorf("sftp: not removed: the directory could not be listed to show it empty: %w", derr)
	}
	streamDir(d) // two READDIRs at once: the first page, and the end behind it
	page, err := d.ReadDirContext(ctx, 1)
	switch {
	case err != nil && err != io.EOF:
		return fmt.Errorf("sftp: not removed: the directory could not be listed to show it empty: %w", err)
	case len(page) > 0:
		// The REMOVE's own status is kept beside the reason, for errors.As.
		return fmt.Errorf("%w (%w)", syscall.ENOTEMPTY, removeErr)
	}
	closeUnwaited(ctx, d)
	return c.rmdirAlone(ctx, name)
}

// closeUnwaited sends d's CLOSE and does not wait for its answer. Closing twice is
// harmless: the second finds d closed and sends nothing.
func closeUnwaited(ctx context.Context, d *Dir) {
	cl, _ := d.sendClose(ctx)
	cl.abandon()
}

// rmdirAlone sends RMDIR for name unless the server is one of phantom directories and
// another entry's name begins with name's (see above).
func (c *Client) rmdirAlone(ctx context.Context, name string) error {
	if c.phantomDirs(ctx, name) {
		other, err := c.prefixNeighbour(ctx, name)
		if err != nil {
			return err
		}
		if other != "" {
			return fmt.Errorf("%w (it would remove %q too)", errRmdirReach, other)
		}
	}
	return c.rmdir(ctx, name)
}

// listedEmpty reports whether the directory name lists no entry besides "." and "..".
// Its CLOSE is not waited for.
func (c *Client) listedEmpty(ctx context.Context, name string) (bool, error) {
	d, err := c.openDir(ctx, name)
	if err != nil {
		return false, err
	}
	defer closeUnwaited(ctx, d)
	streamDir(d)
	page, err := d.ReadDirContext(ctx, 1)
	switch {
	case err == io.EOF:
		return true, nil
	case err != nil:
		return false, err
	}
	return len(page) == 0, nil
}

// prefixNeighbour returns the first entry of name's directory, other than name, whose
// name begins with name's base name, or "" when there is none. It reads the listing a
// page at a time.
func (c *Client) prefixNeighbour(ctx context.Context, name string) (string, error) {
	dir, base := path.Dir(name), path.Base(name)
	for e, err := range c.DirEntries(ctx, dir) {
		if err != nil {
			return "", err
		}
		if n := e.Name(); n != base && strings.HasPrefix(n, base) {
			return path.Join(dir, n), nil
		}
	}
	return "", nil
}

// phantomDir reports whether name, which LSTAT reported a directory, may be none: on
// a server of phantom directories, a directory that lists no entry (an empty one and
// a missing name look the same there).
func (c *Client) phantomDir(ctx context.Context, name string) bool {
	if !c.phantomDirs(ctx, name) {
		return false
	}
	empty, err := c.listedEmpty(ctx, name)
	return err == nil && empty
}

// Phantom directories: whether the server reports a directory at a name that does
// not exist.
const (
	phantomUnknown int32 = iota
	phantomNo
	phantomYes
)

// phantomDirs reports whether the server reports a directory at a name that does not
// exist, asking once per Client: an LSTAT of a random name beside near. An answer
// that says neither (the LSTAT refused, ctx ended) is not kept, and counts as no.
func (c *Client) phantomDirs(ctx context.Context, near string) bool {
	switch c.facts.phantom.Load() {
	case phantomNo:
		return false
	case phantomYes:
		return true
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	probe := path.Join(path.Dir(near), ".sluice-absent-"+hex.EncodeToString(nonce[:]))
	fi, err := c.Lstat(ctx, probe)
	switch {
	case err == nil && fi.IsDir():
		c.facts.phantom.Store(phantomYes)
		c.obs.phantomDirs()
		return true
	case err == nil, errors.Is(err, fs.ErrNotExist):
		c.facts.phantom.Store(phantomNo)
	}
	return false
}

// withPhantomProbe runs fn, and while the Client does not know yet whether the server
// reports phantom directories, asks beside near at the same time: the probe then
// costs no round trip of its own.
func (c *Client) withPhantomProbe(ctx context.Context, near string, fn func()) {
	if c.facts.phantom.Load() != phantomUnknown {
		fn()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.phantomDirs(ctx, near)
	}()
	fn()
	<-done
}

// mkdirPhantom is MkdirAll's end for name, which STAT reported a directory on a
// server of phantom directories, where that says nothing: name is made (such a
// store makes the parents of what it writes, and a MKDIR of an existing directory
// succeeds). A bare FAILURE counts as made, as for an existing directory elsewhere.
func (c *Client) mkdirPhantom(ctx context.Context, name string, perm fs.FileMode) error {
	if err := c.Mkdir(ctx, name, perm); err != nil && !isBareFailure(err) {
		return err
	}
	return nil
}
