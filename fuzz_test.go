package sftp

import (
	"errors"
	"io"
	"testing"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// FuzzDecodeReplies feeds one arbitrary reply (type byte and body) to every reply
// decoder. None may panic, and each may only answer with the payload, nil, io.EOF, the
// server's *StatusError or a *ProtocolError: anything else would reach callers as an
// error they cannot classify.
func FuzzDecodeReplies(f *testing.F) {
	seeds := []struct {
		typ  sshfx.PacketType
		body string
	}{
		{sshfx.TypeStatus, statusBody},
		{sshfx.TypeStatus, "\x00\x00\x00\x01"},
		{sshfx.TypeStatus, "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
		{sshfx.TypeHandle, handleBody},
		{sshfx.TypeData, dataBody},
		{sshfx.TypeAttrs, attrsBody},
		{sshfx.TypeName, nameBody},
		{sshfx.TypeName, oneNameBody},
		{sshfx.TypeName, "\xff\xff\xff\xff"},
		{sshfx.TypeExtendedReply, statVFSBody},
		{sshfx.TypeVersion, versionBody},
	}
	for _, s := range seeds {
		f.Add(byte(s.typ), []byte(s.body))
	}

	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		r := &response{typ: sshfx.PacketType(typ), body: body}
		check := func(op string, err error) {
			t.Helper()
			var se *StatusError
			var pe *ProtocolError
			switch {
			case err == nil, err == io.EOF, errors.As(err, &se):
			case errors.As(err, &pe):
				if pe.Reason == nil {
					t.Fatalf("%s: *ProtocolError without a reason", op)
				}
				_ = pe.Error()
			default:
				t.Fatalf("%s: unclassified error %T: %v", op, err, err)
			}
		}
		wrongType := func(op string, want sshfx.PacketType, err error) {
			t.Helper()
			if err == nil && r.typ != want {
				t.Fatalf("%s accepted a %v", op, r.typ)
			}
		}

		check("status", decodeStatus(body))
		check("expectStatus", expectStatus("X", r))

		h, err := decodeHandle("X", r)
		check("handle", err)
		wrongType("handle", sshfx.TypeHandle, err)
		if err == nil && len(h)+4 != len(body) {
			t.Fatalf("handle of %d bytes from a body of %d", len(h), len(body))
		}

		data, err := decodeData(r)
		check("data", err)
		wrongType("data", sshfx.TypeData, err)
		if err == nil && len(data)+4 != len(body) {
			t.Fatalf("DATA of %d bytes from a body of %d", len(data), len(body))
		}

		_, err = decodeAttrs("X", r)
		check("attrs", err)
		wrongType("attrs", sshfx.TypeAttrs, err)

		names, err := decodeName("X", r)
		check("name", err)
		wrongType("name", sshfx.TypeName, err)
		if err == nil && len(names)*12 > len(body) {
			t.Fatalf("%d names from %d bytes", len(names), len(body))
		}

		_, err = decodeOneName("X", r)
		check("one name", err)
		if err == io.EOF {
			t.Fatal("decodeOneName returned a bare io.EOF")
		}

		_, err = decodeStatVFS(r)
		check("statvfs", err)
		wrongType("statvfs", sshfx.TypeExtendedReply, err)

		exts, err := decodeVersion(body)
		check("version", err)
		if err == io.EOF {
			t.Fatal("decodeVersion returned io.EOF")
		}
		if err != nil && exts != nil {
			t.Fatal("decodeVersion returned extensions with an error")
		}
	})
}
