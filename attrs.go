package sftp

import (
	"fmt"
	"io/fs"
	"math"
	"path"
	"strings"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// FileAttrs is what the server said about a file, as returned by FileInfo.Sys (it
// stands where pkg/sftp's *FileStat did). A server may leave fields out: only those
// whose flag is in Flags were sent, and the others are zero. Test with Flags.Has:
//
//	if fa, ok := fi.Sys().(*sftp.FileAttrs); ok && fa.Flags.Has(sftp.AttrUIDGID) {
//		fmt.Println(fa.UID, fa.GID)
//	}
type FileAttrs struct {
	Flags       AttrFlags      // which of the fields below the server sent
	Size        uint64         // AttrSize
	UID, GID    uint32         // AttrUIDGID
	Permissions uint32         // AttrPermissions: st_mode as sent; some servers omit the type bits
	ATime       time.Time      // AttrACModTime, whole seconds; zero when not sent
	MTime       time.Time      // AttrACModTime, whole seconds; zero when not sent
	Extended    []ExtendedAttr // AttrExtended: vendor pairs, in the order sent
}

// AttrFlags says which optional fields an SFTP ATTRS block carries: the flags word of
// the draft's ATTRS (draft-ietf-secsh-filexfer-02, section 5).
type AttrFlags uint32

// The ATTRS flags of SFTP version 3 (the draft's SSH_FILEXFER_ATTR_*).
const (
	AttrSize        AttrFlags = 0x00000001 // SSH_FILEXFER_ATTR_SIZE: Size
	AttrUIDGID      AttrFlags = 0x00000002 // SSH_FILEXFER_ATTR_UIDGID: UID and GID
	AttrPermissions AttrFlags = 0x00000004 // SSH_FILEXFER_ATTR_PERMISSIONS: Permissions
	AttrACModTime   AttrFlags = 0x00000008 // SSH_FILEXFER_ATTR_ACMODTIME: ATime and MTime
	AttrExtended    AttrFlags = 0x80000000 // SSH_FILEXFER_ATTR_EXTENDED: Extended
)

// Has reports whether every flag in want is set in f.
func (f AttrFlags) Has(want AttrFlags) bool { return f&want == want }

// attrFlagNames are the names String gives the flags, in order of value.
var attrFlagNames = []struct {
	flag AttrFlags
	name string
}{
	{AttrSize, "size"}, {AttrUIDGID, "uidgid"}, {AttrPermissions, "permissions"},
	{AttrACModTime, "acmodtime"}, {AttrExtended, "extended"},
}

// String lists the flags set, joined with "|" ("size|permissions"), with any bit
// version 3 does not define in hexadecimal; "0" when none is set.
func (f AttrFlags) String() string {
	if f == 0 {
		return "0"
	}
	var b strings.Builder
	rest := f
	for _, n := range attrFlagNames {
		if f.Has(n.flag) {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n.name)
			rest &^= n.flag
		}
	}
	if rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", uint32(rest))
	}
	return b.String()
}

// ExtendedAttr is one vendor (type, data) pair of an ATTRS block; Data may be binary.
type ExtendedAttr struct {
	Type string
	Data string
}

func newFileAttrs(a *sshfx.Attrs) *FileAttrs {
	fa := &FileAttrs{
		Flags: AttrFlags(a.Flags), Size: a.Size, UID: a.UID, GID: a.GID,
		Permissions: a.Permissions,
	}
	if a.Has(sshfx.AttrACModTime) {
		fa.ATime = time.Unix(int64(a.ATime), 0)
		fa.MTime = time.Unix(int64(a.MTime), 0)
	}
	for _, e := range a.Extended {
		fa.Extended = append(fa.Extended, ExtendedAttr(e))
	}
	return fa
}

// fileInfo implements fs.FileInfo over ATTRS.
type fileInfo struct {
	name  string
	mode  fs.FileMode
	attrs sshfx.Attrs
}

// newFileInfo builds a FileInfo. typeHint is the type to assume when the server sent
// permissions without type bits (some do): from a READDIR longname, or regular.
func newFileInfo(name string, a *sshfx.Attrs, typeHint fs.FileMode) *fileInfo {
	fi := &fileInfo{name: name, attrs: *a}
	if a.Has(sshfx.AttrPermissions) {
		fi.mode = fromUnixMode(a.Permissions)
		if a.Permissions&unixTypeMask == 0 {
			fi.mode |= typeHint
		}
	} else {
		fi.mode = typeHint
	}
	return fi
}

func (fi *fileInfo) Name() string      { return fi.name }
func (fi *fileInfo) Size() int64       { return int64(min(fi.attrs.Size, math.MaxInt64)) }
func (fi *fileInfo) Mode() fs.FileMode { return fi.mode }
func (fi *fileInfo) ModTime() time.Time {
	if !fi.attrs.Has(sshfx.AttrACModTime) {
		return time.Time{}
	}
	return time.Unix(int64(fi.attrs.MTime), 0)
}
func (fi *fileInfo) IsDir() bool    { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any       { return newFileAttrs(&fi.attrs) }
func (fi *fileInfo) String() string { return fs.FormatFileInfo(fi) }

// Unix st_mode bits as SFTP servers send them.
const (
	unixTypeMask = 0o170000
	unixSocket   = 0o140000
	unixSymlink  = 0o120000
	unixRegular  = 0o100000
	unixBlock    = 0o060000
	unixDir      = 0o040000
	unixChar     = 0o020000
	unixFIFO     = 0o010000
	unixSetuid   = 0o4000
	unixSetgid   = 0o2000
	unixSticky   = 0o1000
)

func fromUnixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unixTypeMask {
	case unixDir:
		mode |= fs.ModeDir
	case unixSymlink:
		mode |= fs.ModeSymlink
	case unixSocket:
		mode |= fs.ModeSocket
	case unixFIFO:
		mode |= fs.ModeNamedPipe
	case unixBlock:
		mode |= fs.ModeDevice
	case unixChar:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	}
	if m&unixSetuid != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unixSetgid != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unixSticky != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// toUnixPerm converts the permission part of mode (with setuid, setgid, sticky) for
// SETSTAT; type bits are never sent, a server cannot change a file's type.
func toUnixPerm(mode fs.FileMode) uint32 {
	m := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= unixSetuid
	}
	if mode&fs.ModeSetgid != 0 {
		m |= unixSetgid
	}
	if mode&fs.ModeSticky != 0 {
		m |= unixSticky
	}
	return m
}

// typeFromLongname reads the file type from the first character of an ls -l style
// longname, the only other place a server may say it when its permissions lack type
// bits. Unknown or empty means regular.
func typeFromLongname(l string) fs.FileMode {
	if l == "" {
		return 0
	}
	switch l[0] {
	case 'd':
		return fs.ModeDir
	case 'l':
		return fs.ModeSymlink
	case 's':
		return fs.ModeSocket
	case 'p':
		return fs.ModeNamedPipe
	case 'b':
		return fs.ModeDevice
	case 'c':
		return fs.ModeDevice | fs.ModeCharDevice
	}
	return 0
}

// unixTime checks t fits SFTP v3's unsigned 32-bit seconds.
func unixTime(t time.Time) (uint32, error) {
	s := t.Unix()
	if s < 0 || s > math.MaxUint32 {
		return 0, fmt.Errorf("sftp: time %v is outside what SFTP v3 can carry (1970 to 2106)", t)
	}
	return uint32(s), nil
}

func baseName(p string) string {
	b := path.Base(p)
	if b == "." || b == "/" {
		return p
	}
	return b
}

// StatVFS is the file system information from statvfs@openssh.com, as statvfs(2).
// The fields are pkg/sftp's under longer names (its Bsize is BlockSize, Frsize
// FragmentSize, Bfree BlocksFree, Bavail BlocksAvail, Ffree FilesFree, Favail
// FilesAvail, Fsid FSID, Namemax NameMax).
type StatVFS struct {
	BlockSize    uint64 // f_bsize
	FragmentSize uint64 // f_frsize: the unit of the block counts
	Blocks       uint64 // f_blocks: the size of the file system
	BlocksFree   uint64 // f_bfree: free blocks, the ones reserved for root included
	BlocksAvail  uint64 // f_bavail: free blocks an unprivileged user may use
	Files        uint64 // f_files: inodes
	FilesFree    uint64 // f_ffree
	FilesAvail   uint64 // f_favail: free inodes for unprivileged users
	FSID         uint64 // f_fsid
	Flag         uint64 // f_flag: 1 read-only, 2 nosuid
	NameMax      uint64 // f_namemax: the longest file name
}

// TotalSpace is the size of the file system in bytes.
func (s *StatVFS) TotalSpace() uint64 { return s.FragmentSize * s.Blocks }

// FreeSpace is the bytes an unprivileged user can still write: the space df(1) shows
// as available (f_bavail blocks). It is less than pkg/sftp's FreeSpace, which counted
// every free block, the ones the file system reserves for root included (f_bfree);
// that figure is s.FragmentSize * s.BlocksFree.
func (s *StatVFS) FreeSpace() uint64 { return s.FragmentSize * s.BlocksAvail }

func decodeStatVFS(r *response) (*StatVFS, error) {
	d, err := decodeExtendedReply("statvfs", r)
	if err != nil {
		return nil, err
	}
	s := &StatVFS{
		d.Uint64(), d.Uint64(), d.Uint64(), d.Uint64(), d.Uint64(), d.Uint64(),
		d.Uint64(), d.Uint64(), d.Uint64(), d.Uint64(), d.Uint64(),
	}
	if err := d.Done(); err != nil {
		return nil, &ProtocolError{Op: "statvfs", Reason: err}
	}
	return s, nil
}
