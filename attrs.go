package sftp

import (
	"fmt"
	"io/fs"
	"math"
	"path"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// FileAttrs is what the server said about a file, as returned by FileInfo.Sys. Only
// the fields whose flag is in Flags were sent.
type FileAttrs struct {
	Flags       uint32 // SFTP ATTRS flags: 1 size, 2 uid/gid, 4 permissions, 8 times
	Size        uint64
	UID, GID    uint32
	Permissions uint32 // st_mode as sent; the type bits may be missing on some servers
	ATime       time.Time
	MTime       time.Time
	Extended    []ExtendedAttr
}

// ExtendedAttr is one vendor (type, data) pair of an ATTRS block; Data may be binary.
type ExtendedAttr struct {
	Type string
	Data string
}

func newFileAttrs(a *sshfx.Attrs) *FileAttrs {
	fa := &FileAttrs{
		Flags: uint32(a.Flags), Size: a.Size, UID: a.UID, GID: a.GID,
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
type StatVFS struct {
	BlockSize    uint64 // f_bsize
	FragmentSize uint64 // f_frsize: the unit of the block counts
	Blocks       uint64
	BlocksFree   uint64
	BlocksAvail  uint64 // free for unprivileged users
	Files        uint64
	FilesFree    uint64
	FilesAvail   uint64
	FSID         uint64
	Flag         uint64 // 1 read-only, 2 nosuid
	NameMax      uint64
}

// TotalSpace is the size of the file system in bytes.
func (s *StatVFS) TotalSpace() uint64 { return s.FragmentSize * s.Blocks }

// FreeSpace is the bytes available to unprivileged users.
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
