package sftp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// NAME replies longer than the reply cap. A READDIR is answered with one page of the
// directory, which OpenSSH keeps under its 256 KiB message cap, and the reader refuses
// any reply longer than the cap before allocating it (conn.go). AWS Transfer Family
// answers a READDIR with the whole directory in one NAME, however large (libssh2 PR
// #791: about 7 MB reported), so that rule closed the channel there.
//
// So a READDIR goes out with the memory account of the call that asked
// (sendListing), and a NAME longer than the cap that answers it is read within that
// account: its body is charged before it is allocated, then decoded with every entry
// charged as it is made (decodeLargePage), and the body's charge is given back once
// the entries are made. A reply the account cannot hold is read and thrown away a
// few KiB at a time, never held, and the call fails with an error matching
// ErrListingTooLarge while the channel goes on. What the reader takes past the cap is
// so bounded by the account of the call that asked, not by what the server sends.
// Any other reply past the cap (another type, a NAME answering anything but a
// READDIR, or one past maxNameReply) still closes the channel.

// maxNameReply bounds a NAME read or skipped past the reply cap. A directory of five
// million entries fits; a length beyond it is taken for broken framing (a corrupt
// length word), which closes the channel, since skipping it would wait for bytes the
// server may never send and hold up every reply behind it.
const maxNameReply = 1 << 30

// replyTooLargeError is the failure of a READDIR whose NAME the call's account could
// not hold.
type replyTooLargeError struct{ n, limit int64 }

func (e *replyTooLargeError) Error() string {
	return fmt.Sprintf("sftp: a READDIR reply of %d bytes (the server sent the directory in one reply) would pass the memory limit of %d bytes; WithMemoryLimit raises it", e.n, e.limit)
}

func (e *replyTooLargeError) Is(target error) bool { return target == ErrListingTooLarge }

// startListing starts the READDIR pkt as start does, with acct, the memory account a
// NAME longer than the reply cap is read within.
func (c *conn) startListing(ctx context.Context, pkt []byte, acct *budget) call {
	return c.startWith(ctx, pkt, nil, acct)
}

// readOversized reads the body of a reply whose header (hdr) says n bytes, more than
// the reply cap, and hands it over: a NAME answering a READDIR, charged to the
// READDIR's account, or when that cannot hold it (or nobody waits for it any more),
// skipped without being held. It reports false when the channel failed: a reply that
// may not be this long, or the transport.
func (c *conn) readOversized(hdr []byte, n uint32) bool {
	resp := response{typ: sshfx.PacketType(hdr[4]), id: binary.BigEndian.Uint32(hdr[5:])}
	c.mu.Lock()
	w, ok := c.pending[resp.id]
	c.mu.Unlock()
	if !ok || w.acct == nil || resp.typ != sshfx.TypeName || n > maxNameReply {
		c.fail(protoErr("reply", "length %d exceeds the limit of %d", n, c.maxPacket.Load()))
		return false
	}
	size := int64(n) - 5
	var err error
	if w.ch != nil && w.acct.charge(size) == nil {
		resp.body, resp.acct = make([]byte, size), w.acct
		_, err = io.ReadFull(c.r, resp.body)
	} else {
		if w.ch != nil {
			w.acct.release(size) // the charge that did not fit
		}
		resp.typ, resp.err = 0, &replyTooLargeError{n: size, limit: w.acct.limit}
		_, err = io.CopyN(io.Discard, c.r, size)
	}
	if err != nil {
		resp.release()
		c.fail(c.readErr(err))
		return false
	}
	c.sawReply(n, resp.typ, nil)
	return c.dispatch(resp)
}

// takeLarge turns resp, a READDIR's reply read within the Dir's account (readOversized),
// into the entries it lists, as take does: its body is given back to the account, and
// the entries' cost stays charged while the Dir holds them (pageCharge).
func (d *Dir) takeLarge(resp *response) (page []fs.DirEntry, invalid, err error) {
	acct := resp.acct
	page, charged, invalid, err := decodeLargePage(resp, acct)
	resp.release()
	if err != nil {
		return nil, nil, d.cn.check(err)
	}
	d.pageCharge += charged
	return page, invalid, nil
}

// releasePage gives back what the page the Dir holds was charged when it came in one
// oversized reply: once it is handed on (and charged by its holder) or dropped.
func (d *Dir) releasePage() {
	d.acct.release(d.pageCharge)
	d.pageCharge = 0
}

// decodeLargePage decodes a NAME that answered a READDIR into the entries a listing
// keeps (keptEntries' rules: "." and ".." skipped, a name that is not one plain name
// ends what is kept, with invalid), charging acct for each as it is made. It returns
// what it charged, which the caller gives back; on an error nothing stays charged.
func decodeLargePage(r *response, acct *budget) (page []fs.DirEntry, charged int64, invalid, err error) {
	if r.typ != sshfx.TypeName {
		return nil, 0, nil, otherReply("READDIR", r, sshfx.TypeName)
	}
	d := sshfx.NewDecoder(r.body)
	n := d.Uint32()
	// Every entry takes at least 12 bytes: a count beyond that sizes nothing.
	if d.Err() == nil && uint64(n)*12 > uint64(d.Len()) {
		return nil, 0, nil, protoErr("READDIR", "%d names in %d bytes", n, d.Len())
	}
	fail := func(err error) ([]fs.DirEntry, int64, error, error) {
		acct.release(charged)
		return nil, 0, nil, err
	}
	charged = int64(n) * entrySlotBytes
	if err := acct.charge(charged); err != nil {
		return fail(err)
	}
	page = make([]fs.DirEntry, 0, n)
	for range n {
		var e nameEntry
		e.name = d.String()
		e.typeHint = longnameType(d.Bytes())
		d.AttrsInto(&e.attrs)
		if d.Err() != nil {
			break
		}
		if e.name == "." || e.name == ".." || invalid != nil {
			continue
		}
		if !validEntryName(e.name) {
			invalid = fmt.Errorf("%w: %q", ErrInvalidEntryName, e.name)
			continue
		}
		cost := entryCost(e.name, &e.attrs)
		charged += cost
		if err := acct.charge(cost); err != nil {
			return fail(err)
		}
		page = append(page, dirEntry{newFileInfo(e.name, &e.attrs, e.typeHint)})
	}
	if err := d.Done(); err != nil {
		return fail(&ProtocolError{Op: "READDIR", Reason: err})
	}
	return page, charged, invalid, nil
}
