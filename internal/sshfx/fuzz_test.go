package sshfx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func FuzzAttrs(f *testing.F) {
	for _, flags := range []AttrFlag{0, AttrSize, AttrUIDGID | AttrACModTime, 0x0f, 0x8000000f} {
		a := fullAttrs(flags)
		f.Add(AppendAttrs(nil, &a))
	}
	f.Add([]byte{0x80, 0, 0, 0x0f, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0})
	f.Add([]byte{0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0x10})
	f.Add([]byte{0, 0, 0, 1, 0})

	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		a := d.Attrs()
		if d.Err() != nil && a.Extended != nil {
			t.Fatalf("failed decode kept %d extended pairs", len(a.Extended))
		}
		if err := d.Done(); err != nil {
			if !errors.Is(err, ErrShortPacket) && !errors.Is(err, ErrLongPacket) && !errors.Is(err, ErrAttrFlags) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if a.Flags&^attrKnown != 0 {
			t.Fatalf("accepted unknown flags %#x", uint32(a.Flags))
		}
		got := AppendAttrs(nil, &a)
		want := b
		if a.Has(AttrExtended) && len(a.Extended) == 0 {
			// The encoder never sends EXTENDED with a count of 0 (ProFTPD does): the
			// re-encoding lacks the flag and the trailing zero count, nothing else.
			want = binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(b)&^uint32(AttrExtended))
			want = append(want, b[4:len(b)-4]...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encoded %x, want %x", got, want)
		}
	})
}

// FuzzDecoder checks the Decoder against a plain model of the same reads: the input's
// first bytes pick a sequence of reads, the rest is the data they run over.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 'x'})
	f.Add([]byte{3, 3, 3}, []byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 6, 1}, []byte{0, 0, 0, 1, 2})
	f.Add([]byte{4, 0, 0}, []byte{0, 0, 0, 0})

	f.Fuzz(func(t *testing.T, ops, b []byte) {
		d := NewDecoder(b)
		pos := 0                     // how far the model has read; -1 once it has failed
		need := func(n int64) bool { // int64: a string length does not fit int on 32-bit
			if pos < 0 || int64(len(b)-pos) < n {
				pos = -1
				return false
			}
			return true
		}
		for _, op := range ops {
			switch op % 7 {
			case 0:
				v := d.Uint8()
				if need(1) {
					if v != b[pos] {
						t.Fatalf("Uint8 at %d = %d, want %d", pos, v, b[pos])
					}
					pos++
				} else if v != 0 {
					t.Fatalf("failed Uint8 returned %d", v)
				}
			case 1:
				v := d.Uint32()
				if need(4) {
					if want := binary.BigEndian.Uint32(b[pos:]); v != want {
						t.Fatalf("Uint32 at %d = %d, want %d", pos, v, want)
					}
					pos += 4
				} else if v != 0 {
					t.Fatalf("failed Uint32 returned %d", v)
				}
			case 2:
				v := d.Uint64()
				if need(8) {
					if want := binary.BigEndian.Uint64(b[pos:]); v != want {
						t.Fatalf("Uint64 at %d = %d, want %d", pos, v, want)
					}
					pos += 8
				} else if v != 0 {
					t.Fatalf("failed Uint64 returned %d", v)
				}
			case 3, 4:
				var v []byte
				if op%7 == 3 {
					v = d.Bytes()
				} else {
					v = []byte(d.String())
				}
				if need(4) {
					n := int64(binary.BigEndian.Uint32(b[pos:]))
					pos += 4
					if need(n) {
						end := pos + int(n) // fits: need saw it within b
						if !bytes.Equal(v, b[pos:end]) {
							t.Fatalf("string at %d = %x, want %x", pos, v, b[pos:end])
						}
						pos = end
						break
					}
				}
				if len(v) != 0 {
					t.Fatalf("failed string read returned %d bytes", len(v))
				}
			case 5:
				v := d.Rest()
				if pos >= 0 {
					if !bytes.Equal(v, b[pos:]) {
						t.Fatalf("Rest = %x, want %x", v, b[pos:])
					}
					pos = len(b)
				} else if len(v) != 0 {
					t.Fatalf("Rest after failure returned %d bytes", len(v))
				}
			case 6:
				err := d.Done()
				if pos >= 0 && pos < len(b) {
					pos = -1
					if !errors.Is(err, ErrLongPacket) {
						t.Fatalf("Done with bytes left = %v", err)
					}
				} else if (err == nil) != (pos >= 0) {
					t.Fatalf("Done = %v with model position %d", err, pos)
				}
			}
			if (d.Err() == nil) != (pos >= 0) {
				t.Fatalf("decoder error %v, model position %d", d.Err(), pos)
			}
			if pos >= 0 && d.Len() != len(b)-pos {
				t.Fatalf("Len = %d, want %d", d.Len(), len(b)-pos)
			}
		}
	})
}
