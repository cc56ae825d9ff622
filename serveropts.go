package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Options for servers that are not POSIX file systems: gateways in front of object
// stores and managed-file-transfer products (docs/servers.md says which needs what).
// Each switches off something the Client does by default because most servers take
// it, and that some refuse in ways the Client cannot always see coming.

// WithSequential makes every file move on one channel, its READs and WRITEs sent in
// offset order: no transfer stripes over several (see WithChannels). For object
// stores that refuse several connections writing one file (AWS Transfer Family: "if
// your client contains an option to use multiple connections for a single transfer,
// make sure to disable the option"; Azure Blob Storage: "using multiple connections
// to upload a single file is not supported"). Several files may still move side by
// side, each on its channel.
//
// What holds on one channel, with or without this option: an upload's WRITEs go out
// in offset order, each after the one before it (whatever order the source was read
// in), and a server carries out one channel's requests in the order they come, which
// every server tested does; so the file grows front to back. Only striping (several
// lanes) and the proof a lane writes before it counts (see docs/design.md) send WRITEs
// out of order.
func WithSequential() Option {
	return func(o *options) error { o.sequential = true; return nil }
}

// WithReadOnce is for servers that let a file be read once, through one handle, with
// nothing but READs between its OPEN and CLOSE: IBM Sterling B2B Integrator with an
// extractable count of 1, where an FSTAT of the open file or a second OPEN of it fails
// the download, and the file is gone once it has been read. Downloads then send no
// FSTAT with their first READ (so they read one READ past the end to find it) and
// never open the file again on another lane. Get still looks at the file (STAT) before
// it opens it, which such servers allow.
//
// Without this option the Client turns the same way by itself once the server has
// refused an FSTAT of a file open for reading, from the next download on
// (Capabilities says so); the download whose FSTAT was refused may have failed
// already, so give this option where the server is known to be one of these.
func WithReadOnce() Option {
	return func(o *options) error { o.readOnce = true; return nil }
}

// readOnce reports whether downloads keep to one handle and READs only.
func (c *Client) readOnce() bool {
	return c.opts.readOnce || c.facts.refused(RefusedFstat)
}

// oneLane reports whether every transfer one way keeps to the File's own lane:
// WithSequential, or a download from a read-once server.
func (c *Client) oneLane(upload bool) bool {
	return c.opts.sequential || !upload && c.readOnce()
}

// noteFstatRefused records the refusal of an FSTAT of a file open for reading: err,
// the reply's decoding, a STATUS in place of the attributes.
func (c *Client) noteFstatRefused(err error) {
	var se *StatusError
	if errors.As(err, &se) {
		c.facts.refuse(RefusedFstat, se)
	}
}

func (c *Client) whyReadOnce() string {
	if c.opts.readOnce {
		return "WithReadOnce: one handle, READs only"
	}
	return "the server refused an FSTAT of a file open for reading (a read-once server): one handle, READs only"
}

// WithLargeWrites makes WRITEs carry n data bytes (32769 to 261120) on a server that
// publishes no limits@openssh.com, where they carry 32768 by default: Azure Blob
// Storage's SFTP, for one, asks for 262000-byte messages ("sftp -B 262000"), and
// without limits@openssh.com nothing says which size a server takes. So the first
// upload that has more than 32768 bytes to send sends a first WRITE of n bytes alone
// and waits for its answer: taken, every later WRITE of the Client carries n bytes;
// refused (any STATUS), the Client goes back to 32768 for good (Capabilities says so)
// and sends those bytes again in WRITEs of that size. A server that closes the
// connection rather than answer fails that transfer: give this option only for a
// server known to take large requests. A server that publishes limits@openssh.com is
// held to them, and so is WithMaxPacket.
func WithLargeWrites(n int) Option {
	return func(o *options) error {
		if n <= defaultDataSize || n > maxDataSize {
			return fmt.Errorf("sftp: WithLargeWrites(%d): want %d to %d", n, defaultDataSize+1, maxDataSize)
		}
		o.largeWrites = n
		return nil
	}
}

// The states of WithLargeWrites' size on a Client (Client.largeWrites).
const (
	largeOff     int32 = iota // not asked for, or the server publishes limits
	largeUntried              // asked for; no WRITE of that size sent yet
	largeTrying               // the first WRITE of that size is out
	largeTaken                // the server took one: every WRITE is that size
	largeRefused              // the server refused one: WRITEs stay at the negotiated size
)

// largeWriteState is WithLargeWrites' size and whether the server takes it.
type largeWriteState struct {
	size  int
	state atomic.Int32
}

// setLargeWrites sets WithLargeWrites' size up while the Client starts, and returns
// the most data a WRITE may then carry.
func (c *Client) setLargeWrites(negotiated int) int {
	n := c.opts.largeWrites
	if c.opts.maxPacket > 0 {
		n = min(n, c.opts.maxPacket)
	}
	if n <= negotiated || c.hasExt(extLimits) {
		return negotiated
	}
	c.large.size = n
	c.large.state.Store(largeUntried)
	return n
}

// maxWrite is the data bytes of a WRITE now: the negotiated size, or WithLargeWrites'
// once the server took one.
func (c *Client) maxWrite() int {
	if c.large.state.Load() == largeTaken {
		return c.large.size
	}
	return c.limits.MaxWrite
}

// claimLargeWrite reports whether the caller is to send the first WRITE of
// WithLargeWrites' size; only one caller is, once.
func (c *Client) claimLargeWrite() bool {
	return c.large.state.Load() == largeUntried && c.large.state.CompareAndSwap(largeUntried, largeTrying)
}

// tryLargeWrite sends p, more than the negotiated size and at most WithLargeWrites',
// at off as one WRITE, the first of that size, and settles the Client's size by its
// answer: taken reports that the server wrote it. A STATUS refusing it is not the
// caller's failure (the bytes go again in smaller WRITEs); anything else is.
func (f *File) tryLargeWrite(ctx context.Context, op string, p []byte, off int64) (taken bool, err error) {
	c := f.c
	_, err = f.writeOne(ctx, op, p, off)
	var se *StatusError
	switch {
	case err == nil:
		c.large.state.Store(largeTaken)
		return true, nil
	case errors.As(err, &se):
		c.facts.refuse(RefusedLargeWrite, se)
		c.large.state.Store(largeRefused)
		return false, nil
	}
	c.large.state.Store(largeUntried) // not an answer: a later upload tries again
	return false, err
}

// largeWriteAt is writeAt's first step: when the Client's large WRITEs are untried and
// p holds more than the negotiated size, its first WithLargeWrites' bytes go in one
// WRITE (tryLargeWrite). It returns how many bytes of p are written (0 or that many).
func (f *File) largeWriteAt(ctx context.Context, op string, p []byte, off int64) (int, error) {
	if len(p) <= f.c.limits.MaxWrite || !f.c.claimLargeWrite() {
		return 0, nil
	}
	k := min(len(p), f.c.large.size)
	taken, err := f.tryLargeWrite(ctx, op, p[:k], off)
	if !taken {
		return 0, err
	}
	return k, nil
}

// largeReadFrom is ReadFrom's first step, as largeWriteAt for a source: its first
// WithLargeWrites' bytes are read and written in one WRITE at off. It returns the
// source to go on with (what was read and not written put back in front of it, or
// for a sized io.ReaderAt, src moved past what was written) and the bytes written.
func (f *File) largeReadFrom(ctx context.Context, src io.Reader, off int64) (io.Reader, int64, error) {
	c := f.c
	if !c.claimLargeWrite() {
		return src, 0, nil
	}
	head := make([]byte, c.large.size)
	ra, base, _, sized := sizedReaderAt(src)
	var n int
	var rerr error
	if sized {
		n, rerr = ra.ReadAt(head, base) // src stays where it was
	} else {
		n, rerr = io.ReadFull(src, head)
	}
	head = head[:n]
	if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
		c.large.state.Store(largeUntried)
		return src, 0, rerr
	}
	if n <= c.limits.MaxWrite {
		c.large.state.Store(largeUntried) // too little to try it with
		return putBack(src, head, sized), 0, nil
	}
	taken, err := f.tryLargeWrite(ctx, "readfrom", head, off)
	switch {
	case err != nil:
		return src, 0, err
	case !taken:
		return putBack(src, head, sized), 0, nil
	case sized:
		_, err = src.(io.Seeker).Seek(base+int64(n), io.SeekStart)
		return src, int64(n), err
	}
	return src, int64(n), nil
}

// putBack is src with head, read from it, in front again: a sized io.ReaderAt was
// read at its offsets and has not moved, so it is src itself.
func putBack(src io.Reader, head []byte, sized bool) io.Reader {
	if sized || len(head) == 0 {
		return src
	}
	return io.MultiReader(bytes.NewReader(head), src)
}
