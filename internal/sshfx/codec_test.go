package sshfx

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBeginFinish(t *testing.T) {
	// INIT is the one packet without a request id.
	pkt := Begin(nil, TypeInit, 0xdeadbeef)
	require.Equal(t, []byte{0, 0, 0, 0, 1}, pkt)
	pkt = AppendUint32(pkt, 3)
	require.Equal(t, []byte{0, 0, 0, 5, 1, 0, 0, 0, 3}, Finish(pkt, 0))

	pkt = Begin(nil, TypeStat, 0x01020304)
	require.Equal(t, []byte{0, 0, 0, 0, 17, 1, 2, 3, 4}, pkt)
	pkt = AppendString(pkt, "/a")
	require.Equal(t, []byte{0, 0, 0, 11, 17, 1, 2, 3, 4, 0, 0, 0, 2, '/', 'a'}, Finish(pkt, 0))
}

func TestBeginFinishAfterPrefix(t *testing.T) {
	// A packet built behind other bytes must measure only itself and leave them alone.
	prefix := []byte("junk")
	pkt := Begin(append([]byte(nil), prefix...), TypeClose, 7)
	pkt = AppendString(pkt, "h")
	pkt = Finish(pkt, len(prefix))
	require.Equal(t, append([]byte("junk"), 0, 0, 0, 10, 4, 0, 0, 0, 7, 0, 0, 0, 1, 'h'), pkt)
}

func TestFinishEmptyBody(t *testing.T) {
	// The smallest request: type and id only.
	require.Equal(t, []byte{0, 0, 0, 5, 200, 0, 0, 0, 9}, Finish(Begin(nil, TypeExtended, 9), 0))
}

func TestAppendHelpers(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"uint32", AppendUint32(nil, 0x01020304), []byte{1, 2, 3, 4}},
		{"uint32 max", AppendUint32(nil, 0xffffffff), []byte{0xff, 0xff, 0xff, 0xff}},
		{"uint64", AppendUint64(nil, 0x0102030405060708), []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"uint64 zero", AppendUint64(nil, 0), make([]byte, 8)},
		{"string", AppendString(nil, "abc"), []byte{0, 0, 0, 3, 'a', 'b', 'c'}},
		{"string empty", AppendString(nil, ""), []byte{0, 0, 0, 0}},
		{"string binary", AppendString(nil, "\x00\xff"), []byte{0, 0, 0, 2, 0, 0xff}},
		{"bytes", AppendBytes(nil, []byte{9, 8}), []byte{0, 0, 0, 2, 9, 8}},
		{"bytes nil", AppendBytes(nil, nil), []byte{0, 0, 0, 0}},
		{"uint32 after prefix", AppendUint32([]byte{0xaa}, 1), []byte{0xaa, 0, 0, 0, 1}},
		{"uint64 after prefix", AppendUint64([]byte{0xaa}, 1), []byte{0xaa, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"string after prefix", AppendString([]byte{0xaa}, "z"), []byte{0xaa, 0, 0, 0, 1, 'z'}},
		{"bytes after prefix", AppendBytes([]byte{0xaa}, []byte("z")), []byte{0xaa, 0, 0, 0, 1, 'z'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, tt.got) })
	}
}

func TestDecoderReadsInOrder(t *testing.T) {
	b := []byte{
		0x7f,
		1, 2, 3, 4,
		1, 2, 3, 4, 5, 6, 7, 8,
		0, 0, 0, 2, 'h', 'i',
		0, 0, 0, 0,
		0, 0, 0, 3, 0, 0xfe, 'x',
		0xee, 0xef,
	}
	d := NewDecoder(b)
	require.Equal(t, len(b), d.Len())
	require.Equal(t, uint8(0x7f), d.Uint8())
	require.Equal(t, uint32(0x01020304), d.Uint32())
	require.Equal(t, uint64(0x0102030405060708), d.Uint64())
	require.Equal(t, "hi", d.String())
	require.Equal(t, []byte{}, d.Bytes())
	require.Equal(t, []byte{0, 0xfe, 'x'}, d.Bytes())
	require.Equal(t, 2, d.Len())
	require.Equal(t, []byte{0xee, 0xef}, d.Rest())
	require.Equal(t, 0, d.Len())
	require.NoError(t, d.Err())
	require.NoError(t, d.Done())
}

func TestDecoderShortReads(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		read func(d *Decoder) any
		zero any
	}{
		{"uint8 empty", nil, func(d *Decoder) any { return d.Uint8() }, uint8(0)},
		{"uint32 of 3", []byte{1, 2, 3}, func(d *Decoder) any { return d.Uint32() }, uint32(0)},
		{"uint64 of 7", []byte{1, 2, 3, 4, 5, 6, 7}, func(d *Decoder) any { return d.Uint64() }, uint64(0)},
		{"string length cut", []byte{0, 0, 0}, func(d *Decoder) any { return d.String() }, ""},
		{"string body cut", []byte{0, 0, 0, 5, 'a', 'b', 'c', 'd'}, func(d *Decoder) any { return d.String() }, ""},
		{"bytes body cut", []byte{0, 0, 0, 2, 'a'}, func(d *Decoder) any { return d.Bytes() }, []byte(nil)},
		{"bytes huge", []byte{0xff, 0xff, 0xff, 0xff, 'a'}, func(d *Decoder) any { return d.Bytes() }, []byte(nil)},
		{"bytes 2GiB", []byte{0x7f, 0xff, 0xff, 0xff}, func(d *Decoder) any { return d.Bytes() }, []byte(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.b)
			require.Equal(t, tt.zero, tt.read(d))
			require.ErrorIs(t, d.Err(), ErrShortPacket)
			require.Equal(t, 0, d.Len(), "a failed decoder has nothing left to read")
			require.ErrorIs(t, d.Done(), ErrShortPacket, "Done reports the sticky error, not trailing bytes")
		})
	}
}

func TestDecoderStickyError(t *testing.T) {
	// Nine bytes: enough for the Uint32s that follow the failed Uint64 read if the
	// decoder forgot its failure.
	d := NewDecoder([]byte{0, 0, 0, 1, 0, 0, 0, 2, 3})
	require.Equal(t, uint32(1), d.Uint32())
	require.Equal(t, uint64(0), d.Uint64()) // 5 left: fails
	first := d.Err()
	require.ErrorIs(t, first, ErrShortPacket)

	require.Equal(t, uint32(0), d.Uint32())
	require.Equal(t, uint8(0), d.Uint8())
	require.Nil(t, d.Bytes())
	require.Empty(t, d.Rest())
	d.Fail(errors.New("later"))
	require.Same(t, first, d.Err(), "the first error sticks")
	require.Same(t, first, d.Done())
}

func TestDecoderFail(t *testing.T) {
	mine := errors.New("mine")
	d := NewDecoder([]byte{1, 2, 3, 4})
	d.Fail(mine)
	require.Same(t, mine, d.Err())
	require.Equal(t, 0, d.Len(), "Fail drops what was left")
	require.Equal(t, uint32(0), d.Uint32())
	require.Same(t, mine, d.Err())
}

func TestDecoderDone(t *testing.T) {
	d := NewDecoder([]byte{0, 0, 0, 1, 9})
	require.Equal(t, uint32(1), d.Uint32())
	require.ErrorIs(t, d.Done(), ErrLongPacket)
	require.ErrorIs(t, d.Err(), ErrLongPacket, "trailing bytes become the sticky error")
	require.Equal(t, uint8(0), d.Uint8(), "nothing is readable after Done failed")

	require.NoError(t, NewDecoder(nil).Done())
	require.NoError(t, NewDecoder([]byte{}).Done())
}

func TestDecoderReset(t *testing.T) {
	d := NewDecoder([]byte{1})
	d.Uint32()
	require.Error(t, d.Err())
	d.Reset([]byte{0, 0, 0, 5})
	require.NoError(t, d.Err())
	require.Equal(t, uint32(5), d.Uint32())
	require.NoError(t, d.Done())
}

func TestDecoderBytesAliasesWithoutSpill(t *testing.T) {
	b := []byte{0, 0, 0, 2, 'a', 'b', 'c', 'd'}
	d := NewDecoder(b)
	got := d.Bytes()
	require.Equal(t, []byte("ab"), got)
	got[0] = 'A'
	require.Equal(t, byte('A'), b[4], "Bytes aliases the packet rather than copying")
	// Its capacity stops at its end, so appending to it cannot clobber the next field.
	require.Equal(t, len(got), cap(got))
	_ = append(got, 'X')
	require.Equal(t, byte('c'), b[6])
	require.Equal(t, []byte("cd"), d.Rest())
}

func TestDecoderStringCopies(t *testing.T) {
	b := []byte{0, 0, 0, 2, 'a', 'b'}
	s := NewDecoder(b).String()
	b[4] = 'z'
	require.Equal(t, "ab", s, "String must not alias a buffer that goes back to a pool")
}

func TestDecoderRestAfterFullRead(t *testing.T) {
	d := NewDecoder([]byte{1})
	d.Uint8()
	require.Empty(t, d.Rest())
	require.NoError(t, d.Done())
}
