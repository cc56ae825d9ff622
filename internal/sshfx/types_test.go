package sshfx

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPacketTypeString(t *testing.T) {
	known := map[PacketType]string{
		1: "INIT", 2: "VERSION", 3: "OPEN", 4: "CLOSE", 5: "READ", 6: "WRITE", 7: "LSTAT",
		8: "FSTAT", 9: "SETSTAT", 10: "FSETSTAT", 11: "OPENDIR", 12: "READDIR", 13: "REMOVE",
		14: "MKDIR", 15: "RMDIR", 16: "REALPATH", 17: "STAT", 18: "RENAME", 19: "READLINK",
		20: "SYMLINK", 101: "STATUS", 102: "HANDLE", 103: "DATA", 104: "NAME", 105: "ATTRS",
		200: "EXTENDED", 201: "EXTENDED_REPLY",
	}
	for v := range 256 {
		typ := PacketType(v)
		if want, ok := known[typ]; ok {
			require.Equal(t, want, typ.String())
			continue
		}
		// Unknown types must still print something that identifies the byte.
		require.Equal(t, "PacketType("+strconv.Itoa(v)+")", typ.String())
	}
}

func TestStatusString(t *testing.T) {
	want := []string{
		"OK", "EOF", "NO_SUCH_FILE", "PERMISSION_DENIED", "FAILURE", "BAD_MESSAGE",
		"NO_CONNECTION", "CONNECTION_LOST", "OP_UNSUPPORTED",
	}
	for i, s := range want {
		require.Equal(t, s, Status(i).String())
	}
	require.Equal(t, "OP_UNSUPPORTED", StatusOpUnsupported.String())
	require.Equal(t, "Status(9)", Status(9).String())
	require.Equal(t, "Status(4294967295)", Status(0xffffffff).String())
}

func TestConstantsMatchTheDraft(t *testing.T) {
	require.Equal(t, OpenFlag(0x3f), FlagRead|FlagWrite|FlagAppend|FlagCreat|FlagTrunc|FlagExcl)
	require.Equal(t, AttrFlag(0x8000000f), attrKnown)
	require.Equal(t, 3, ProtocolVersion)
	require.Equal(t, 4, HeaderLen)
}
