package sshfx

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrShortPacket means a packet ended before all of its fields were read.
var ErrShortPacket = errors.New("sftp: packet too short")

// ErrLongPacket means a packet carried bytes after its last field.
var ErrLongPacket = errors.New("sftp: packet has trailing bytes")

// Begin starts a packet in dst: room for the length, the type and, for every type but
// INIT, the request id. Finish patches the length once the body has been appended, so a
// packet is built in one buffer and can go out in one Write.
func Begin(dst []byte, t PacketType, id uint32) []byte {
	dst = append(dst, 0, 0, 0, 0, byte(t))
	if t != TypeInit {
		dst = binary.BigEndian.AppendUint32(dst, id)
	}
	return dst
}

// Finish writes the length of the packet that Begin started at offset start of pkt.
func Finish(pkt []byte, start int) []byte {
	binary.BigEndian.PutUint32(pkt[start:], uint32(len(pkt)-start-HeaderLen))
	return pkt
}

// AppendUint32 appends v big-endian.
func AppendUint32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }

// AppendUint64 appends v big-endian.
func AppendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// AppendString appends an SFTP string: a uint32 length and the bytes.
func AppendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// AppendBytes appends b as an SFTP string.
func AppendBytes(dst []byte, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// Decoder reads fields off a packet body. The first failure sticks: later reads return
// zero values and Err reports the first problem, so a decoder can read a whole reply and
// check once, and no input can make it panic or read out of bounds.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder over b. Strings from Bytes alias b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Reset points d at b and clears its error, so one Decoder can be reused without
// allocating.
func (d *Decoder) Reset(b []byte) { d.b, d.err = b, nil }

// Err returns the first error met, if any.
func (d *Decoder) Err() error { return d.err }

// Len is how many bytes are left.
func (d *Decoder) Len() int { return len(d.b) }

// Fail records err unless an earlier error is already recorded.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
		d.b = nil
	}
}

// Done reports an error if bytes are left over, or the sticky error if there was one.
// Replies with trailing bytes are refused: they mean the two sides disagree on the layout.
func (d *Decoder) Done() error {
	if d.err == nil && len(d.b) != 0 {
		d.Fail(ErrLongPacket)
	}
	return d.err
}

// Uint8 reads one byte.
func (d *Decoder) Uint8() uint8 {
	if len(d.b) < 1 {
		d.Fail(ErrShortPacket)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// Uint32 reads a big-endian uint32.
func (d *Decoder) Uint32() uint32 {
	if len(d.b) < 4 {
		d.Fail(ErrShortPacket)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// Uint64 reads a big-endian uint64.
func (d *Decoder) Uint64() uint64 {
	if len(d.b) < 8 {
		d.Fail(ErrShortPacket)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// Bytes reads an SFTP string and returns it without copying; it aliases the packet.
func (d *Decoder) Bytes() []byte {
	n := d.Uint32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(d.b)) {
		d.Fail(fmt.Errorf("%w: string of %d bytes with %d left", ErrShortPacket, n, len(d.b)))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// String reads an SFTP string and copies it into a Go string.
func (d *Decoder) String() string { return string(d.Bytes()) }

// Rest returns the unread bytes and consumes them.
func (d *Decoder) Rest() []byte {
	v := d.b
	d.b = d.b[len(d.b):]
	return v
}
