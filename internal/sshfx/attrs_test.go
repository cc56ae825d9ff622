package sshfx

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// fullAttrs has a distinct value in every field, so a field read from the wrong place
// shows up as a mismatch.
func fullAttrs(flags AttrFlag) Attrs {
	a := Attrs{Flags: flags}
	if flags&AttrSize != 0 {
		a.Size = 0x0102030405060708
	}
	if flags&AttrUIDGID != 0 {
		a.UID, a.GID = 1000, 0xfffffffe
	}
	if flags&AttrPermissions != 0 {
		a.Permissions = 0o100644
	}
	if flags&AttrACModTime != 0 {
		a.ATime, a.MTime = 0xfffffff0, 1700000000
	}
	if flags&AttrExtended != 0 {
		a.Extended = []ExtendedAttr{
			{Type: "acl@example.com", Data: "\x00\x01\xff"},
			{Type: "", Data: ""},
		}
	}
	return a
}

func TestAttrsRoundTripEveryFlagCombination(t *testing.T) {
	for bits := AttrFlag(0); bits < 16; bits++ {
		for _, ext := range []AttrFlag{0, AttrExtended} {
			flags := bits | ext
			t.Run(fmt.Sprintf("%#x", uint32(flags)), func(t *testing.T) {
				a := fullAttrs(flags)
				b := AppendAttrs(nil, &a)
				d := NewDecoder(b)
				got := d.Attrs()
				require.NoError(t, d.Done())
				require.Equal(t, a, got)

				// Size: 4 for flags plus each present field.
				want := 4
				if flags&AttrSize != 0 {
					want += 8
				}
				if flags&AttrUIDGID != 0 {
					want += 8
				}
				if flags&AttrPermissions != 0 {
					want += 4
				}
				if flags&AttrACModTime != 0 {
					want += 8
				}
				if flags&AttrExtended != 0 {
					want += 4 + (4 + 15 + 4 + 3) + (4 + 4)
				}
				require.Len(t, b, want)
			})
		}
	}
}

func TestAttrsGoldenOpenSSHStat(t *testing.T) {
	// What OpenSSH sends for stat of a regular 0644 file: flags 0x0f.
	want := []byte{
		0, 0, 0, 0x0f,
		0, 0, 0, 0, 0, 0, 0x10, 0, // size 4096
		0, 0, 0x03, 0xe8, // uid 1000
		0, 0, 0x03, 0xe9, // gid 1001
		0, 0, 0x81, 0xa4, // 0100644
		0x65, 0x53, 0xf1, 0, // atime 1700000000
		0x65, 0x53, 0xf1, 1, // mtime 1700000001
	}
	a := Attrs{
		Flags: AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime,
		Size:  4096, UID: 1000, GID: 1001, Permissions: 0o100644,
		ATime: 1700000000, MTime: 1700000001,
	}
	require.Equal(t, want, AppendAttrs(nil, &a))
	d := NewDecoder(want)
	require.Equal(t, a, d.Attrs())
	require.NoError(t, d.Done())
}

func TestAppendAttrsDerivesExtendedFlag(t *testing.T) {
	// The flag says EXTENDED but there is nothing to send: the flag is dropped, so the
	// count can never disagree with it.
	a := Attrs{Flags: AttrExtended | AttrPermissions, Permissions: 0o755}
	require.Equal(t, []byte{0, 0, 0, 4, 0, 0, 0x01, 0xed}, AppendAttrs(nil, &a))

	// Pairs without the flag: the flag is added.
	a = Attrs{Extended: []ExtendedAttr{{Type: "t", Data: "d"}}}
	require.Equal(t, []byte{0x80, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 't', 0, 0, 0, 1, 'd'}, AppendAttrs(nil, &a))
}

func TestAppendAttrsAfterPrefix(t *testing.T) {
	a := Attrs{Flags: AttrSize, Size: 1}
	require.Equal(t, []byte{0xaa, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, AppendAttrs([]byte{0xaa}, &a))
}

func TestAttrsProFTPDExtendedCountZero(t *testing.T) {
	b := []byte{
		0x80, 0, 0, 0x0f,
		0, 0, 0, 0, 0, 0, 0, 5,
		0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0x41, 0xed,
		0, 0, 0, 1, 0, 0, 0, 2,
		0, 0, 0, 0, // extended_count 0
	}
	d := NewDecoder(b)
	a := d.Attrs()
	require.NoError(t, d.Done(), "the zero count must be read, or it is left over")
	require.True(t, a.Has(AttrExtended))
	require.Empty(t, a.Extended)
	require.Equal(t, uint64(5), a.Size)
	require.Equal(t, uint32(0o40755), a.Permissions)
	require.Equal(t, uint32(2), a.MTime)
}

func TestAttrsRcloneNoUIDGID(t *testing.T) {
	b := []byte{
		0, 0, 0, 0x0d,
		0, 0, 0, 0, 0, 0, 0x01, 0, // size 256
		0, 0, 0x81, 0xa4,
		0, 0, 0, 7, 0, 0, 0, 8,
	}
	d := NewDecoder(b)
	a := d.Attrs()
	require.NoError(t, d.Done())
	require.Equal(t, Attrs{
		Flags: AttrSize | AttrPermissions | AttrACModTime,
		Size:  256, Permissions: 0o100644, ATime: 7, MTime: 8,
	}, a)
	require.False(t, a.Has(AttrUIDGID))
	require.True(t, a.Has(AttrSize|AttrPermissions))
	require.False(t, a.Has(AttrSize|AttrUIDGID), "Has wants every flag given")
}

func TestAttrsPermissionsWithoutTypeBits(t *testing.T) {
	d := NewDecoder([]byte{0, 0, 0, 4, 0, 0, 0x01, 0xa4})
	a := d.Attrs()
	require.NoError(t, d.Done())
	require.Equal(t, uint32(0o644), a.Permissions, "kept as sent; the caller decides the type")
}

func TestAttrsUnknownFlagBits(t *testing.T) {
	for _, flags := range []uint32{0x10, 0x20, 0x100, 0x40000000, 0x8000001f, 0xffffffff} {
		t.Run(fmt.Sprintf("%#x", flags), func(t *testing.T) {
			// Plenty of bytes after the flags, so only the flags can be the problem.
			b := AppendUint32(nil, flags)
			b = append(b, make([]byte, 64)...)
			d := NewDecoder(b)
			d.Attrs()
			require.ErrorIs(t, d.Err(), ErrAttrFlags)
			require.ErrorIs(t, d.Done(), ErrAttrFlags)
		})
	}
}

func TestAttrsTruncated(t *testing.T) {
	a := fullAttrs(AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime | AttrExtended)
	b := AppendAttrs(nil, &a)
	for i := range len(b) {
		d := NewDecoder(b[:i])
		got := d.Attrs()
		require.ErrorIs(t, d.Err(), ErrShortPacket, "prefix of %d bytes", i)
		require.Nil(t, got.Extended, "no half-read pairs are handed out")
	}
}

func TestAttrsHostileExtendedCount(t *testing.T) {
	for _, n := range []uint32{0xffffffff, 0x00ffffff, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			// Two real pairs worth 16 bytes, and a count that claims far more.
			b := []byte{0x80, 0, 0, 0}
			b = AppendUint32(b, n)
			b = append(b, make([]byte, 16)...)

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			d := NewDecoder(b)
			a := d.Attrs()
			runtime.ReadMemStats(&after)

			require.ErrorIs(t, d.Err(), ErrShortPacket)
			require.Nil(t, a.Extended)
			// A count trusted for sizing would allocate n*32 bytes (512 MiB for 0xffffff).
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
		})
	}
}

func TestAttrsExtendedCountFitsExactly(t *testing.T) {
	// Two empty pairs take exactly 16 bytes: the hostile-count check must not refuse it.
	b := []byte{0x80, 0, 0, 0, 0, 0, 0, 2}
	b = append(b, make([]byte, 16)...)
	d := NewDecoder(b)
	a := d.Attrs()
	require.NoError(t, d.Done())
	require.Equal(t, []ExtendedAttr{{}, {}}, a.Extended)
}

func TestAttrsIntoClearsPreviousValue(t *testing.T) {
	a := fullAttrs(AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime | AttrExtended)
	d := NewDecoder([]byte{0, 0, 0, 0})
	d.AttrsInto(&a)
	require.NoError(t, d.Done())
	require.Equal(t, Attrs{}, a, "a reused struct must not keep fields the reply did not send")
}

func TestAttrsFollowedByMoreFields(t *testing.T) {
	// ATTRS sits in the middle of NAME entries: the decoder must stop exactly at its end.
	a := fullAttrs(AttrSize | AttrExtended)
	b := AppendAttrs(nil, &a)
	b = AppendString(b, "next")
	d := NewDecoder(b)
	require.Equal(t, a, d.Attrs())
	require.Equal(t, "next", d.String())
	require.NoError(t, d.Done())
}
