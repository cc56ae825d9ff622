package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The exported protocol numbers are spelled out for readers of the documentation; they
// must stay the wire's.
func TestStatusCodesAreTheWireCodes(t *testing.T) {
	for code, wire := range map[StatusCode]sshfx.Status{
		StatusOK: sshfx.StatusOK, StatusEOF: sshfx.StatusEOF,
		StatusNoSuchFile: sshfx.StatusNoSuchFile, StatusPermissionDenied: sshfx.StatusPermissionDenied,
		StatusFailure: sshfx.StatusFailure, StatusBadMessage: sshfx.StatusBadMessage,
		StatusNoConnection: sshfx.StatusNoConnection, StatusConnectionLost: sshfx.StatusConnectionLost,
		StatusOpUnsupported: sshfx.StatusOpUnsupported,
	} {
		require.Equal(t, uint32(wire), uint32(code), "%v", code)
		require.Equal(t, wire.String(), code.String())
	}
	require.Equal(t, "NO_SUCH_FILE", StatusNoSuchFile.String())
	require.Equal(t, "Status(9)", StatusCode(9).String())
}

func TestAttrFlagsAreTheWireFlags(t *testing.T) {
	for flag, wire := range map[AttrFlags]sshfx.AttrFlag{
		AttrSize: sshfx.AttrSize, AttrUIDGID: sshfx.AttrUIDGID, AttrPermissions: sshfx.AttrPermissions,
		AttrACModTime: sshfx.AttrACModTime, AttrExtended: sshfx.AttrExtended,
	} {
		require.Equal(t, uint32(wire), uint32(flag), "%v", flag)
	}

	f := AttrSize | AttrPermissions
	require.True(t, f.Has(AttrSize))
	require.True(t, f.Has(AttrSize|AttrPermissions))
	require.False(t, f.Has(AttrSize|AttrUIDGID), "Has wants every flag asked for")
	require.False(t, f.Has(AttrACModTime))
	require.True(t, f.Has(0))

	for flags, want := range map[AttrFlags]string{
		0:        "0",
		AttrSize: "size",
		f:        "size|permissions",
		AttrUIDGID | AttrACModTime | AttrExtended: "uidgid|acmodtime|extended",
		AttrSize | 0x40: "size|0x40",
		0x40:            "0x40",
	} {
		require.Equal(t, want, flags.String())
	}
}

// FileAttrs carries the flags the server sent, under their names, and a field whose
// flag is missing is zero.
func TestFileAttrsFlagsFromServer(t *testing.T) {
	dir := serverDir(t)
	local := filepath.Join(dir, "f")
	writeLocal(t, local, []byte("12345"), 0o640)
	mtime := time.Unix(1_600_000_000, 0)
	require.NoError(t, os.Chtimes(local, mtime, mtime))
	c := newServerClient(t, dir)

	fi, err := c.Stat(testCtx(t), "f")
	require.NoError(t, err)
	fa, ok := fi.Sys().(*FileAttrs)
	require.True(t, ok, "Sys() is %T", fi.Sys())
	require.Equal(t, AttrSize|AttrUIDGID|AttrPermissions|AttrACModTime, fa.Flags, "OpenSSH sends all four: %v", fa.Flags)
	require.Equal(t, uint64(5), fa.Size)
	require.True(t, mtime.Equal(fa.MTime))

	fa = newFileAttrs(&sshfx.Attrs{Flags: sshfx.AttrSize, Size: 7})
	require.Equal(t, AttrSize, fa.Flags)
	require.False(t, fa.Flags.Has(AttrACModTime))
	require.True(t, fa.MTime.IsZero(), "times not sent are zero")
}

// What the package documentation tells porting users about os.IsNotExist, checked
// against OpenSSH's server: it is false for this package's errors, where errors.Is
// with the fs errors is true.
func TestOSIsNotExistIsFalseErrorsIsWorks(t *testing.T) {
	dir := serverDir(t)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "locked"), 0o700))
	writeLocal(t, filepath.Join(dir, "locked", "f"), nil, 0o644)
	c := newServerClient(t, dir)
	ctx := testCtx(t)

	_, err := c.Stat(ctx, "missing")
	require.True(t, errors.Is(err, fs.ErrNotExist))
	require.False(t, os.IsNotExist(err), "documented: os.IsNotExist sees only the os package's errors")
	var pe *fs.PathError
	require.True(t, errors.As(err, &pe))
	require.NotSame(t, os.ErrNotExist, pe.Err, "the cause is the server's *StatusError, not os.ErrNotExist")

	if os.Geteuid() == 0 {
		return // root reads the mode-000 directory; the rest needs a plain user
	}
	require.NoError(t, os.Chmod(filepath.Join(dir, "locked"), 0))
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o700) })
	_, err = c.Stat(ctx, "locked/f")
	require.True(t, errors.Is(err, fs.ErrPermission), "%v", err)
	require.False(t, os.IsPermission(err))
}

// Chown's -1 is os.Chown's "leave unchanged", which SFTP v3 cannot say: it is refused
// before anything is sent, rather than sent as 4294967295 for each server to read in
// its own way.
func TestChownMinusOneIsRefused(t *testing.T) {
	dir := serverDir(t)
	writeLocal(t, filepath.Join(dir, "f"), nil, 0o644)
	c, srv := startServer(t, dir, nil)
	srv.drainWrites()
	err := c.Chown(testCtx(t), "f", -1, os.Getgid())
	require.ErrorIs(t, err, syscall.EINVAL)
	requirePathErr(t, err, "chown", "f")
	require.Zero(t, len(srv.writeStarted)+len(srv.writeDone), "nothing sent")
}

// WithMaxPacket's floor is stated in the error, which names the option.
func TestWithMaxPacketRange(t *testing.T) {
	for _, n := range []int{1, minDataSize - 1, 16<<20 + 1} {
		var o options
		err := WithMaxPacket(n)(&o)
		require.ErrorContains(t, err, fmt.Sprintf("WithMaxPacket(%d)", n))
		require.ErrorContains(t, err, "must be 512 to 16777216")
	}
	for _, n := range []int{minDataSize, 32768, 16 << 20} {
		var o options
		require.NoError(t, WithMaxPacket(n)(&o))
		require.Equal(t, n, o.maxPacket)
	}
}
