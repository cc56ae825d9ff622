package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Copy copies the remote file src to the remote file dst inside the server, with the
// copy-data extension (OpenSSH 9.0 and later, asyncssh): no data crosses the network.
// dst is created with src's permission bits (before the server's umask) where it is
// missing; where it exists its data is overwritten and its size set to src's once the
// data is in, so dst never loses data it shares with src: a copy of a file onto
// itself under another name, a symbolic link to it or a hard link to it (which SFTP
// v3 cannot tell apart from another file) leaves the file as it was. dst with the
// same path as src is refused (the error matches fs.ErrInvalid), as cp does. The copy runs in ranges of
// 64 MiB, several in flight; ctx bounds every request, and both handles are closed
// before Copy returns.
//
// Where the server lacks copy-data the error matches errors.ErrUnsupported and
// nothing was opened. The fallback is to move the data through the client:
//
//	in, _ := c.Open(ctx, src)
//	out, _ := c.Create(ctx, dst)
//	_, err := out.ReadFrom(in) // many requests in flight each way
//
// which costs the data's size twice over the network.
func (c *Client) Copy(ctx context.Context, src, dst string) error {
	if !c.hasExt(extCopyData) {
		return linkErr("copy", src, dst, errUnsupportedExt(extCopyData))
	}
	if path.Clean(src) == path.Clean(dst) {
		return linkErr("copy", src, dst, errCopySame)
	}
	return linkErr("copy", src, dst, c.copyData(ctx, src, dst, copyRange))
}

// errCopySame is Copy's error for a dst that names src by the same path, as cp's.
// OpenSSH refuses such a pair with a bare FAILURE; this says why, before anything is
// opened.
var errCopySame = fmt.Errorf("sftp: the source and the destination are the same file: %w", fs.ErrInvalid)

// errCopySize is a Copy's error when the server does not say how long src is: dst's
// size could not be set, and it may keep a tail of its old data.
var errCopySize = errors.New("sftp: the server did not report the source's size, so the copy's size could not be set")

// The ranges of a Copy.
const (
	// copyRange is the bytes one copy-data request asks the server to copy. The server
	// copies a range without answering anything else on the channel (OpenSSH serves one
	// request at a time), so a range is kept to a size it copies in well under a
	// second, and copyFlight of them are kept in flight so the server never waits for
	// the next.
	copyRange  = 64 << 20
	copyFlight = 4
)

// copyData copies src to dst in ranges of span bytes.
//
// dst is not truncated when it is opened: when it is src under another name, that
// would empty src before the copy reads it. Each range is copied over the old data
// instead (onto itself, a range is rewritten in place), and dst's size is set from a
// FSTAT of src after the last range.
func (c *Client) copyData(ctx context.Context, src, dst string, span uint64) (err error) {
	cn := c.main
	rh, err := c.openHandle(ctx, cn, "open", func(b []byte, id uint32) []byte {
		return appendOpen(b, id, src, sshfx.FlagRead, &sshfx.Attrs{})
	})
	if err != nil {
		return err
	}
	defer func() { err = firstErr(err, cn.closeHandle(ctx, rh)) }()
	fstat := func() (sshfx.Attrs, error) {
		return c.attrsCall(ctx, "FSTAT", func(b []byte, id uint32) []byte { return appendString1(b, sshfx.TypeFstat, id, rh) })
	}
	a, err := fstat()
	if err != nil {
		return err
	}
	if fi := newFileInfo(src, &a, 0); fi.IsDir() {
		return fs.ErrInvalid
	}
	perm := fs.FileMode(0o666)
	if a.Has(sshfx.AttrPermissions) {
		perm = fs.FileMode(a.Permissions & 0o777)
	}
	pf, _ := openFlags(os.O_WRONLY | os.O_CREATE)
	wh, err := c.openHandle(ctx, cn, "open", func(b []byte, id uint32) []byte {
		return appendOpen(b, id, dst, pf, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(perm)})
	})
	if err != nil {
		return err
	}
	defer func() { err = firstErr(err, cn.closeHandle(ctx, wh)) }()

	if err := c.copyRanges(ctx, cn, rh, wh, a, span); err != nil {
		return err
	}
	if a, err = fstat(); err != nil {
		return err
	}
	if !a.Has(sshfx.AttrSize) {
		return errCopySize
	}
	return cn.do(ctx, func(b []byte, id uint32) []byte {
		return appendStringAttrs(b, sshfx.TypeFsetstat, id, wh, &sshfx.Attrs{Flags: sshfx.AttrSize, Size: a.Size})
	}, status("FSETSTAT"))
}

// copyRanges copies rh to wh: whole ranges of span bytes for the size a (src's FSTAT)
// reports, then one "to end of file" (length 0) so that a file that grew meanwhile is
// copied whole too. A range that meets end of file means src is shorter than that:
// no range is issued after it, so a size the server got wrong (or lied about) costs
// at most copyFlight requests more than the file's real length.
func (c *Client) copyRanges(ctx context.Context, cn *conn, rh, wh string, a sshfx.Attrs, span uint64) error {
	var size uint64
	if a.Has(sshfx.AttrSize) {
		size = a.Size
	}
	var ended atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyFlight)
	for off := uint64(0); !ended.Load() && gctx.Err() == nil; off += span {
		n := span
		if size-min(off, size) <= span {
			n = 0
		}
		g.Go(func() error {
			eof, err := c.copyRange(gctx, cn, rh, wh, off, n)
			if eof {
				ended.Store(true)
			}
			return err
		})
		if n == 0 {
			break
		}
	}
	// Ranges not started are not done: a copy ctx cut short fails even when every
	// range it started succeeded.
	return firstErr(g.Wait(), ctxError(ctx, ""))
}

// copyRange asks the server to copy n bytes (0: to end of file) at off from rh to wh.
// eof reports a range that met end of file early: the file is shorter than its size
// said, and the copy ends there.
func (c *Client) copyRange(ctx context.Context, cn *conn, rh, wh string, off, n uint64) (eof bool, err error) {
	err = cn.do(ctx, func(dst []byte, id uint32) []byte {
		return appendCopyData(dst, id, rh, off, n, wh, off)
	}, status(extCopyData))
	if se := (*StatusError)(nil); errors.As(err, &se) && se.Code == StatusEOF {
		return true, nil
	}
	return false, err
}

// appendCopyData encodes a copy-data request: n bytes (0: to end of file) from rh at
// roff to wh at woff.
func appendCopyData(dst []byte, id uint32, rh string, roff, n uint64, wh string, woff uint64) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeExtended, id)
	dst = sshfx.AppendString(dst, extCopyData)
	dst = sshfx.AppendString(dst, rh)
	dst = sshfx.AppendUint64(dst, roff)
	dst = sshfx.AppendUint64(dst, n)
	dst = sshfx.AppendString(dst, wh)
	dst = sshfx.AppendUint64(dst, woff)
	return sshfx.Finish(dst, start)
}

// UserGroupNames maps user and group ids to names on the server, with the
// users-groups-by-id@openssh.com extension (OpenSSH 9.1 and later): for example to
// show owners in a long listing. users[i] names uids[i] and groups[i] names gids[i];
// an id the server cannot name comes back as "". Where the server lacks the
// extension the error matches errors.ErrUnsupported.
func (c *Client) UserGroupNames(ctx context.Context, uids, gids []uint32) (users, groups []string, err error) {
	if !c.hasExt(extUsersGroups) {
		return nil, nil, errUnsupportedExt(extUsersGroups)
	}
	pack := func(ids []uint32) string {
		b := make([]byte, 0, 4*len(ids))
		for _, id := range ids {
			b = binary.BigEndian.AppendUint32(b, id)
		}
		return string(b)
	}
	err = c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, extUsersGroups, pack(uids), pack(gids))
	}, func(r response) error {
		d, err := decodeExtendedReply(extUsersGroups, &r)
		if err != nil {
			return err
		}
		u, g := d.String(), d.String()
		if err := d.Done(); err != nil {
			return &ProtocolError{Op: extUsersGroups, Reason: err}
		}
		if users, err = unpackNames(u, len(uids)); err == nil {
			groups, err = unpackNames(g, len(gids))
		}
		if err != nil {
			return &ProtocolError{Op: extUsersGroups, Reason: err}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return users, groups, nil
}

// unpackNames reads exactly n strings from b, which must hold nothing else.
func unpackNames(b string, n int) ([]string, error) {
	d := sshfx.NewDecoder([]byte(b))
	out := make([]string, 0, min(n, len(b)/4+1))
	for range n {
		out = append(out, d.String())
		if d.Err() != nil {
			return nil, fmt.Errorf("%d names where %d were asked for", len(out)-1, n)
		}
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("more names than the %d asked for: %w", n, err)
	}
	return out, nil
}
