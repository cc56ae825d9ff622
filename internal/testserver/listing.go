package testserver

import "encoding/binary"

// ListEntry is one name a synthetic listing serves: Mode is the full st_mode (type
// bits included), as sent in ATTRS permissions.
type ListEntry struct {
	Name string
	Mode uint32
	Size uint64
	// Extended, when not nil, is sent as the entry's extended pairs, with the
	// EXTENDED flag (even for an empty non-nil slice).
	Extended []ExtendedPair
}

// ExtendedPair is one (type, data) pair of an ATTRS block's extended data.
type ExtendedPair struct{ Type, Data string }

// Lister serves the READDIRs of one synthetic directory handle. page counts the
// handle's READDIRs from 0. It returns the entries of that page (sent in one NAME,
// as given, even "a/b", "" or "..", and even an empty NAME for an empty non-nil
// slice), or nil to answer STATUS EOF. It runs on the session's reader goroutine and
// must not block.
type Lister func(page int) []ListEntry

// listerFor returns the Lister that Options.Listing gives for an OPENDIR of path, or
// nil to serve the file system.
func (ss *session) listerFor(path string) Lister {
	if ss.cfg.Listing == nil {
		return nil
	}
	return ss.cfg.Listing(path)
}

// readdirListed answers a READDIR on a synthetic directory handle.
func (ss *session) readdirListed(b []byte, r *request, h *handle) []byte {
	page := h.lister(h.pos)
	h.pos++
	if page == nil {
		return appendStatus(b, r.id, StatusEOF)
	}
	b = begin(b, TypeName, r.id)
	b = binary.BigEndian.AppendUint32(b, uint32(len(page)))
	for _, e := range page {
		b = appendString(b, e.Name)
		b = appendString(b, "")
		if e.Extended == nil {
			b = appendAttrs(b, attrs{flags: AttrSize | AttrPermissions, size: e.Size, perm: e.Mode})
			continue
		}
		b = appendU32(b, AttrSize|AttrPermissions|AttrExtended)
		b = appendU64(b, e.Size)
		b = appendU32(b, e.Mode)
		b = appendU32(b, uint32(len(e.Extended)))
		for _, x := range e.Extended {
			b = appendString(b, x.Type)
			b = appendString(b, x.Data)
		}
	}
	return finish(b)
}
