package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sftp/internal/sshfx"
)

const (
	extCopyData    = "copy-data"
	extUsersGroups = "users-groups-by-id@openssh.com"

	// copyRange is the bytes one copy-data request asks the server to copy. The server
	// copies a range without answering anything else on the channel (OpenSSH serves one
	// request at a time), so a range is kept to a size it copies in well under a
	// second, and copyFlight of them are kept in flight so the server never waits for
	// the next.
	copyRange  = 64 << 20
	copyFlight = 4
)

// Copy copies the remote file src to the remote file dst inside the server, with the
// copy-data extension (OpenSSH 9.0 and later, asyncssh): no data crosses the network.
// dst is created with src's permission bits (before the server's umask) or truncated,
// as cp does. The copy runs in ranges of 64 MiB, several in flight; ctx bounds every
// request, and both handles are closed before Copy returns.
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
	return linkErr("copy", src, dst, c.copyData(ctx, src, dst, copyRange))
}

// copyData copies src to dst in ranges of span bytes.
func (c *Client) copyData(ctx context.Context, src, dst string, span uint64) (err error) {
	cn := c.main
	rh, err := c.openHandle(ctx, cn, "open", func(id uint32) []byte {
		return appendOpen(nil, id, src, sshfx.FlagRead, &sshfx.Attrs{})
	})
	if err != nil {
		return err
	}
	defer c.closeBoth(ctx, cn, rh, &err)
	a, err := c.attrsCall(ctx, "FSTAT", func(dst []byte, id uint32) []byte { return appendString1(dst, sshfx.TypeFstat, id, rh) })
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
	pf, _ := openFlags(os.O_WRONLY | os.O_CREATE | os.O_TRUNC)
	wh, err := c.openHandle(ctx, cn, "open", func(id uint32) []byte {
		return appendOpen(nil, id, dst, pf, &sshfx.Attrs{Flags: sshfx.AttrPermissions, Permissions: toUnixPerm(perm)})
	})
	if err != nil {
		return err
	}
	defer c.closeBoth(ctx, cn, wh, &err)

	// Whole ranges for the size FSTAT reported, then one "to end of file" (length 0)
	// so that a file that grew meanwhile is copied whole too.
	var size uint64
	if a.Has(sshfx.AttrSize) {
		size = a.Size
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyFlight)
	for off := uint64(0); ; off += span {
		n := span
		if size-min(off, size) <= span {
			n = 0
		}
		g.Go(func() error { return c.copyRange(gctx, cn, rh, wh, off, n) })
		if n == 0 {
			break
		}
	}
	return g.Wait()
}

// copyRange asks the server to copy n bytes (0: to end of file) at off from rh to wh.
// A range that meets end of file early ends the copy there: the file shrank.
func (c *Client) copyRange(ctx context.Context, cn *conn, rh, wh string, off, n uint64) error {
	r, err := cn.roundTrip(ctx, func(id uint32) []byte { return appendCopyData(nil, id, rh, off, n, wh, off) })
	if err != nil {
		return err
	}
	defer r.release()
	err = cn.check(expectStatus(extCopyData, &r))
	if se := (*StatusError)(nil); errors.As(err, &se) && se.Code == StatusEOF {
		return nil
	}
	return err
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

// closeBoth closes h for a Copy, waiting for the reply while ctx allows (so the
// handles are gone when Copy returns), and keeping the first error.
func (c *Client) closeBoth(ctx context.Context, cn *conn, h string, errp *error) {
	if ctx.Err() != nil {
		c.closeHandleBackground(cn, h)
		return
	}
	if err := c.closeHandleWait(ctx, cn, h); *errp == nil {
		*errp = err
	}
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
	r, err := c.main.roundTrip(ctx, func(id uint32) []byte {
		return appendExtended(nil, id, extUsersGroups, pack(uids), pack(gids))
	})
	if err != nil {
		return nil, nil, err
	}
	defer r.release()
	d, err := decodeExtendedReply(extUsersGroups, &r)
	if err != nil {
		return nil, nil, c.main.check(err)
	}
	u, g := d.String(), d.String()
	if err := d.Done(); err != nil {
		return nil, nil, c.main.check(&ProtocolError{Op: extUsersGroups, Reason: err})
	}
	if users, err = unpackNames(u, len(uids)); err == nil {
		groups, err = unpackNames(g, len(gids))
	}
	if err != nil {
		return nil, nil, c.main.check(&ProtocolError{Op: extUsersGroups, Reason: err})
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
