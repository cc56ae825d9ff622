package sshfx

import "testing"

// The hot path of a transfer encodes one READ or WRITE header per request and decodes
// ATTRS for every directory entry; none of it should allocate once buffers are warm.

func BenchmarkAppendReadHeader(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 64)
	var off uint64
	for b.Loop() {
		pkt := Begin(buf[:0], TypeRead, uint32(off))
		pkt = AppendString(pkt, "\x00\x00\x00\x01")
		pkt = AppendUint64(pkt, off)
		pkt = AppendUint32(pkt, 261120)
		buf = Finish(pkt, 0)
		off += 261120
	}
}

func BenchmarkAppendWriteHeader(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 64)
	var off uint64
	for b.Loop() {
		pkt := Begin(buf[:0], TypeWrite, uint32(off))
		pkt = AppendString(pkt, "\x00\x00\x00\x01")
		pkt = AppendUint64(pkt, off)
		pkt = AppendUint32(pkt, 261120)
		buf = Finish(pkt, 0)
		off += 261120
	}
}

func BenchmarkDecodeAttrs(b *testing.B) {
	a := fullAttrs(AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime)
	enc := AppendAttrs(nil, &a)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	var d Decoder
	var got Attrs
	for b.Loop() {
		d.Reset(enc)
		d.AttrsInto(&got)
		if d.Err() != nil {
			b.Fatal(d.Err())
		}
	}
}

func BenchmarkDecodeAttrsExtended(b *testing.B) {
	a := fullAttrs(AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime | AttrExtended)
	enc := AppendAttrs(nil, &a)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	var d Decoder
	var got Attrs
	for b.Loop() {
		d.Reset(enc)
		d.AttrsInto(&got)
		if d.Err() != nil {
			b.Fatal(d.Err())
		}
	}
}
