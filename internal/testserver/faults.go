package testserver

import (
	"encoding/binary"
	"slices"
	"sync/atomic"
)

// BogusID is the request id CorruptWrongID puts in a reply. Clients number
// requests from a small counter, so it is never one they issued.
const BogusID = 0xdeadbeef

// UnknownType is the packet type CorruptUnknownType puts in a reply.
const UnknownType = 250

// The Corrupt helpers below return a func for Options.Corrupt. Each acts on
// the first reply of the given packet type the server sends (the first
// across all sessions of the Server it is given to) and leaves every other
// reply alone, so a test knows exactly which request meets the fault. Call
// the constructor again for a fresh "first".

// once returns a Corrupt func that applies fn to the first reply of type typ.
func once(typ uint8, fn func(req Request, reply []byte) [][]byte) func(Request, []byte) [][]byte {
	var used atomic.Bool
	return func(req Request, reply []byte) [][]byte {
		if len(reply) < 5 || reply[4] != typ || used.Load() || !used.CompareAndSwap(false, true) {
			return nil
		}
		return fn(req, reply)
	}
}

// CorruptOversize replaces the length field of the first reply of type typ
// with 0x7fffffff (the body that follows is unchanged). A client must reject
// the length before trying to allocate or read that much.
func CorruptOversize(typ uint8) func(Request, []byte) [][]byte {
	return once(typ, func(_ Request, reply []byte) [][]byte {
		p := slices.Clone(reply)
		binary.BigEndian.PutUint32(p, 0x7fffffff)
		return [][]byte{p}
	})
}

// CorruptTruncate drops the last byte of the first reply of type typ and
// fixes the length field to match: the frame is valid, but its last field is
// incomplete (a string shorter than its length, or a partial integer), so
// the body is shorter than its fields need.
func CorruptTruncate(typ uint8) func(Request, []byte) [][]byte {
	return once(typ, func(_ Request, reply []byte) [][]byte {
		p := slices.Clone(reply[:len(reply)-1])
		binary.BigEndian.PutUint32(p, uint32(len(p)-4))
		return [][]byte{p}
	})
}

// CorruptUnknownType changes the type byte of the first reply of type typ
// to UnknownType (250), keeping the frame intact.
func CorruptUnknownType(typ uint8) func(Request, []byte) [][]byte {
	return once(typ, func(_ Request, reply []byte) [][]byte {
		p := slices.Clone(reply)
		p[4] = UnknownType
		return [][]byte{p}
	})
}

// CorruptWrongID changes the request id of the first reply of type typ to
// BogusID. Only meaningful for packets that carry an id (not VERSION). The
// real reply is never sent, so the request it answered stays unanswered.
func CorruptWrongID(typ uint8) func(Request, []byte) [][]byte {
	return once(typ, func(_ Request, reply []byte) [][]byte {
		if len(reply) < 9 {
			return nil
		}
		p := slices.Clone(reply)
		binary.BigEndian.PutUint32(p[5:], BogusID)
		return [][]byte{p}
	})
}

// CorruptRepeat sends the first reply of type typ twice.
func CorruptRepeat(typ uint8) func(Request, []byte) [][]byte {
	return once(typ, func(_ Request, reply []byte) [][]byte {
		return [][]byte{reply, reply}
	})
}

// CorruptLongData makes the first DATA reply carry one byte more than its
// READ asked for (the real data, then zeros). READs asking for more than
// 16 MiB are left alone rather than building a huge packet.
func CorruptLongData() func(Request, []byte) [][]byte {
	return once(TypeData, func(req Request, reply []byte) [][]byte {
		n := uint64(req.Len) + 1
		if n > 16<<20 || len(reply) < 13 {
			return nil
		}
		p := make([]byte, 13+n)
		copy(p, reply)
		binary.BigEndian.PutUint32(p, uint32(len(p)-4))
		binary.BigEndian.PutUint32(p[9:], uint32(n))
		return [][]byte{p}
	})
}

// CorruptAttrsFlags sets the undefined flag bit 0x100 in the first ATTRS
// reply (leaving the fields as they are). In v3 unknown bits make the rest
// unparseable, so a client must reject the reply.
func CorruptAttrsFlags() func(Request, []byte) [][]byte {
	return once(TypeAttrs, func(_ Request, reply []byte) [][]byte {
		if len(reply) < 13 {
			return nil
		}
		p := slices.Clone(reply)
		p[11] |= 0x01 // flags are bytes 9..12; 0x100 lives in byte 11
		return [][]byte{p}
	})
}

// StatusInstead replaces the first reply of type typ with a well-formed STATUS
// of code (any value, OK included) for the same request id. The request was
// executed; only its answer is a surprise, like rclone's STATUS OK to a READ
// on a handle opened read-write. A client must fail that one request and
// carry on.
func StatusInstead(typ uint8, code uint32) func(Request, []byte) [][]byte {
	return once(typ, func(_ Request, reply []byte) [][]byte {
		if len(reply) < 9 {
			return nil
		}
		return [][]byte{appendStatus(nil, binary.BigEndian.Uint32(reply[5:9]), code)}
	})
}
