package sshfx

import (
	"errors"
	"fmt"
)

// ErrAttrFlags means an ATTRS block set a flag bit version 3 does not define.
var ErrAttrFlags = errors.New("sftp: ATTRS has unknown flag bits")

// ExtendedAttr is one (type, data) pair of an ATTRS block. Data may be binary.
type ExtendedAttr struct {
	Type string
	Data string
}

// Attrs is the ATTRS block. Only the fields whose flag is set in Flags are meaningful.
type Attrs struct {
	Flags       AttrFlag
	Size        uint64
	UID, GID    uint32
	Permissions uint32 // st_mode as the server sends it; the type bits may be missing
	ATime       uint32 // seconds since 1970, unsigned 32-bit on the wire
	MTime       uint32
	Extended    []ExtendedAttr
}

// Has reports whether every flag in f is set.
func (a *Attrs) Has(f AttrFlag) bool { return a.Flags&f == f }

// AppendAttrs appends a in wire order. The EXTENDED flag is derived from whether a has
// extended pairs, so a caller can never send a flag that disagrees with the count.
func AppendAttrs(dst []byte, a *Attrs) []byte {
	flags := a.Flags &^ AttrExtended
	if len(a.Extended) > 0 {
		flags |= AttrExtended
	}
	dst = AppendUint32(dst, uint32(flags))
	if flags&AttrSize != 0 {
		dst = AppendUint64(dst, a.Size)
	}
	if flags&AttrUIDGID != 0 {
		dst = AppendUint32(dst, a.UID)
		dst = AppendUint32(dst, a.GID)
	}
	if flags&AttrPermissions != 0 {
		dst = AppendUint32(dst, a.Permissions)
	}
	if flags&AttrACModTime != 0 {
		dst = AppendUint32(dst, a.ATime)
		dst = AppendUint32(dst, a.MTime)
	}
	if flags&AttrExtended != 0 {
		dst = AppendUint32(dst, uint32(len(a.Extended)))
		for _, e := range a.Extended {
			dst = AppendString(dst, e.Type)
			dst = AppendString(dst, e.Data)
		}
	}
	return dst
}

// Attrs reads an ATTRS block. An EXTENDED flag with a count of 0 (ProFTPD) and missing
// uid/gid (rclone) are fine; unknown flag bits are an error because the fields they
// announce have no layout we could skip.
func (d *Decoder) Attrs() Attrs {
	var a Attrs
	d.AttrsInto(&a)
	return a
}

// AttrsInto is Attrs without the copy of the struct, for hot paths.
func (d *Decoder) AttrsInto(a *Attrs) {
	*a = Attrs{Flags: AttrFlag(d.Uint32())}
	if d.err != nil {
		return
	}
	if a.Flags&^attrKnown != 0 {
		d.Fail(fmt.Errorf("%w: %#x", ErrAttrFlags, uint32(a.Flags&^attrKnown)))
		return
	}
	if a.Flags&AttrSize != 0 {
		a.Size = d.Uint64()
	}
	if a.Flags&AttrUIDGID != 0 {
		a.UID = d.Uint32()
		a.GID = d.Uint32()
	}
	if a.Flags&AttrPermissions != 0 {
		a.Permissions = d.Uint32()
	}
	if a.Flags&AttrACModTime != 0 {
		a.ATime = d.Uint32()
		a.MTime = d.Uint32()
	}
	if a.Flags&AttrExtended != 0 {
		n := d.Uint32()
		// Each pair needs at least 8 bytes, so a count larger than that cannot be real;
		// checking first stops a hostile count from sizing a huge allocation.
		if d.err == nil && uint64(n)*8 > uint64(d.Len()) {
			d.Fail(fmt.Errorf("%w: %d extended attributes in %d bytes", ErrShortPacket, n, d.Len()))
		}
		if d.err != nil {
			return
		}
		if n > 0 {
			a.Extended = make([]ExtendedAttr, 0, n)
		}
		for i := uint32(0); i < n && d.err == nil; i++ {
			t := d.String()
			v := d.String()
			a.Extended = append(a.Extended, ExtendedAttr{Type: t, Data: v})
		}
	}
	if d.err != nil {
		a.Extended = nil
	}
}
