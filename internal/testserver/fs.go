package testserver

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Unix st_mode type bits. SFTP v3 servers in the OpenSSH tradition send the
// whole st_mode as "permissions", so nodes store exactly that.
const (
	sIFMT  = 0o170000
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
)

const (
	// umask is applied to the modes OPEN and MKDIR create, as the
	// sftp-server process's umask would be (Debian's default 022).
	umask = 0o022
	// defaultID is the uid and gid of every node the server creates.
	defaultID = 1000
	// maxSymlinks matches Linux's MAXSYMLINKS; more is ELOOP.
	maxSymlinks = 40
	// maxNameLen matches NAME_MAX; longer elements are ENAMETOOLONG.
	maxNameLen = 255
	// dirSize is what STAT reports as a directory's size, like ext4.
	dirSize = 4096
)

// node is an inode: a directory, a regular file or a symlink. Directory
// entries point at nodes, so a hard link is two entries sharing one node and
// an open handle keeps a removed file's data alive, as on Unix.
type node struct {
	mode         uint32 // type bits | permission bits
	uid, gid     uint32
	atime, mtime uint32
	nlink        uint32
	data         []byte           // regular files
	target       string           // symlinks
	children     map[string]*node // directories
	parent       *node            // directories only (they can't be hard-linked), for ".."
}

func (n *node) isDir() bool  { return n.mode&sIFMT == sIFDIR }
func (n *node) isReg() bool  { return n.mode&sIFMT == sIFREG }
func (n *node) isLink() bool { return n.mode&sIFMT == sIFLNK }

// The server acts as the owner of every node, so only the owner bits count.
// Enforcing them lets client tests provoke PERMISSION_DENIED with a chmod.
func (n *node) canRead() bool  { return n.mode&0o400 != 0 }
func (n *node) canWrite() bool { return n.mode&0o200 != 0 }

func (n *node) size() uint64 {
	switch {
	case n.isDir():
		return dirSize
	case n.isLink():
		return uint64(len(n.target))
	}
	return uint64(len(n.data))
}

// attrs reports a node the way OpenSSH does for STAT: flags 0x0f, full mode.
func (n *node) attrs() attrs {
	return attrs{
		flags: AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime,
		size:  n.size(),
		uid:   n.uid, gid: n.gid,
		perm:  n.mode,
		atime: n.atime, mtime: n.mtime,
	}
}

func now32() uint32 { return uint32(time.Now().Unix()) }

// fsys is the in-memory tree. One RWMutex guards the whole tree and all file
// contents: READ takes it shared so striped downloads over several sessions
// don't serialise, everything that mutates takes it exclusively.
type fsys struct {
	mu      sync.RWMutex
	root    *node
	maxSize int64
	// ignoreTimes: SETSTAT and FSETSTAT leave times as they are (Options.IgnoreSetTimes).
	ignoreTimes bool
}

func newFS(maxSize int64) *fsys {
	f := &fsys{maxSize: maxSize}
	f.root = f.newNode(sIFDIR | 0o755)
	f.root.nlink = 2
	return f
}

func (f *fsys) newNode(mode uint32) *node {
	t := now32()
	n := &node{mode: mode, uid: defaultID, gid: defaultID, atime: t, mtime: t, nlink: 1}
	if mode&sIFMT == sIFDIR {
		n.children = make(map[string]*node)
	}
	return n
}

// lookup is the result of resolving a path.
type lookup struct {
	node   *node    // nil when the final element doesn't exist (yet)
	parent *node    // directory holding the final element; nil only for "/"
	name   string   // the final element's name in parent
	names  []string // canonical elements from the root to the final element
}

func (l lookup) path() string { return "/" + strings.Join(l.names, "/") }

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// lastIsDot reports whether the final lexical element is "." or "..":
// renaming or removing such a path is EINVAL on Unix, and resolving it
// would otherwise act on a different directory than the one named.
func lastIsDot(p string) bool {
	els := splitPath(p)
	if len(els) == 0 {
		return false
	}
	last := els[len(els)-1]
	return last == "." || last == ".."
}

// resolve walks p from the root (relative paths start at "/", the session's
// start directory), following symlinks in every element but the last, and
// in the last too when followLast is set. ".." is physical: it goes to the
// parent of the directory actually reached, as the kernel does. A missing
// final element is not an error (callers that create need its parent);
// a missing intermediate one is ENOENT. Callers hold f.mu.
func (f *fsys) resolve(p string, followLast bool) (lookup, error) {
	if p == "" {
		return lookup{}, eNOENT
	}
	comps := splitPath(p)
	stack := []*node{f.root}
	var names []string
	links := 0
	for i := 0; i < len(comps); i++ {
		c := comps[i]
		top := stack[len(stack)-1]
		if !top.isDir() {
			return lookup{}, eNOTDIR
		}
		switch c {
		case ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
				names = names[:len(names)-1]
			}
			continue
		}
		if len(c) > maxNameLen {
			return lookup{}, eNAMETOOLONG
		}
		last := i == len(comps)-1
		child := top.children[c]
		if child == nil {
			if last {
				return lookup{parent: top, name: c, names: append(names, c)}, nil
			}
			return lookup{}, eNOENT
		}
		if child.isLink() && (!last || followLast) {
			if links++; links > maxSymlinks {
				return lookup{}, eLOOP
			}
			if child.target == "" {
				return lookup{}, eNOENT
			}
			if strings.HasPrefix(child.target, "/") {
				stack = stack[:1]
				names = names[:0]
			}
			comps = append(splitPath(child.target), comps[i+1:]...)
			i = -1
			continue
		}
		stack = append(stack, child)
		names = append(names, c)
	}
	l := lookup{node: stack[len(stack)-1], names: names}
	if len(stack) > 1 {
		l.parent = stack[len(stack)-2]
		l.name = names[len(names)-1]
	}
	return l, nil
}

// find resolves p and insists that it exists.
func (f *fsys) find(p string, follow bool) (*node, error) {
	l, err := f.resolve(p, follow)
	if err != nil {
		return nil, err
	}
	if l.node == nil {
		return nil, eNOENT
	}
	return l.node, nil
}

func (f *fsys) stat(p string, follow bool) (attrs, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, err := f.find(p, follow)
	if err != nil {
		return attrs{}, err
	}
	return n.attrs(), nil
}

// addEntry links n into dir and bumps dir's mtime as creating a name does.
func (f *fsys) addEntry(dir *node, name string, n *node) {
	dir.children[name] = n
	dir.mtime = now32()
	if n.isDir() {
		n.parent = dir
		dir.nlink++
	}
}

func (f *fsys) dropEntry(dir *node, name string) {
	n := dir.children[name]
	delete(dir.children, name)
	dir.mtime = now32()
	if n.isDir() {
		dir.nlink--
	} else {
		n.nlink--
	}
}

// open implements OPEN's pflags like open(2) under OpenSSH: neither READ nor
// WRITE means read-only, CREAT|EXCL fails on any existing name (even a
// dangling symlink), and a directory may be opened read-only (READ on it then
// fails) but not for writing. perm is the final mode for a created file.
func (f *fsys) open(p string, pflags uint32, perm uint32) (file, error) {
	n, err := f.openNode(p, pflags, perm)
	if err != nil {
		return nil, err
	}
	return memFile{f, n}, nil
}

func (f *fsys) openNode(p string, pflags uint32, perm uint32) (*node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	write := pflags&OpenWrite != 0
	read := pflags&OpenRead != 0 || !write
	excl := pflags&(OpenCreat|OpenExcl) == OpenCreat|OpenExcl
	l, err := f.resolve(p, !excl)
	if err != nil {
		return nil, err
	}
	n := l.node
	if n == nil {
		if pflags&OpenCreat == 0 {
			return nil, eNOENT
		}
		if !l.parent.canWrite() {
			return nil, eACCES
		}
		n = f.newNode(sIFREG | perm&0o7777)
		f.addEntry(l.parent, l.name, n)
		return n, nil
	}
	if excl {
		return nil, eEXIST
	}
	if n.isDir() && write {
		return nil, eISDIR
	}
	if (read && !n.canRead()) || (write && !n.canWrite()) {
		return nil, eACCES
	}
	if pflags&OpenTrunc != 0 && n.isReg() && len(n.data) > 0 {
		n.data = n.data[:0]
		n.mtime = now32()
	}
	return n, nil
}

// resolveNew resolves p for an entry about to be made: p must not exist (EEXIST),
// and its directory must be writable (EACCES). Callers hold f.mu.
func (f *fsys) resolveNew(p string) (lookup, error) {
	l, err := f.resolve(p, false)
	if err != nil {
		return l, err
	}
	if l.node != nil {
		return l, eEXIST
	}
	if !l.parent.canWrite() {
		return l, eACCES
	}
	return l, nil
}

func (f *fsys) mkdir(p string, perm uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolveNew(p)
	if err != nil {
		return err
	}
	n := f.newNode(sIFDIR | perm&0o7777)
	n.nlink = 2
	f.addEntry(l.parent, l.name, n)
	return nil
}

func (f *fsys) rmdir(p string) error {
	if lastIsDot(p) {
		return eINVAL
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, false)
	n := l.node
	switch {
	case err != nil:
		return err
	case n == nil:
		return eNOENT
	case l.parent == nil:
		return eBUSY
	case !n.isDir():
		return eNOTDIR
	case len(n.children) > 0:
		return eNOTEMPTY
	case !l.parent.canWrite():
		return eACCES
	}
	f.dropEntry(l.parent, l.name)
	return nil
}

// remove is unlink(2): on Linux a directory gives EISDIR, hence FAILURE.
func (f *fsys) remove(p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(p, false)
	switch {
	case err != nil:
		return err
	case l.node == nil:
		return eNOENT
	case l.node.isDir():
		return eISDIR
	case !l.parent.canWrite():
		return eACCES
	}
	f.dropEntry(l.parent, l.name)
	return nil
}

// rename moves oldp to newp. Plain SFTP RENAME (overwrite false) never
// replaces an existing name, even oldp itself, because OpenSSH implements it
// with link()+unlink(); posix-rename (overwrite true) follows rename(2).
func (f *fsys) rename(oldp, newp string, overwrite bool) error {
	if lastIsDot(oldp) || lastIsDot(newp) {
		return eINVAL
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	lo, err := f.resolve(oldp, false)
	if err != nil {
		return err
	}
	if lo.node == nil {
		return eNOENT
	}
	ln, err := f.resolve(newp, false)
	if err != nil {
		return err
	}
	src, dst := lo.node, ln.node
	if lo.parent == nil || ln.parent == nil {
		return eBUSY // the root can't be moved or replaced
	}
	if !lo.parent.canWrite() || !ln.parent.canWrite() {
		return eACCES
	}
	if src.isDir() {
		for d := ln.parent; d != nil; d = d.parent {
			if d == src {
				return eINVAL
			}
		}
	}
	if dst != nil {
		if !overwrite {
			return eEXIST
		}
		if dst == src {
			return nil
		}
		if src.isDir() {
			if !dst.isDir() {
				return eNOTDIR
			}
			if len(dst.children) > 0 {
				return eNOTEMPTY
			}
		} else if dst.isDir() {
			return eISDIR
		}
		f.dropEntry(ln.parent, ln.name)
	}
	delete(lo.parent.children, lo.name)
	lo.parent.mtime = now32()
	if src.isDir() {
		lo.parent.nlink--
	}
	f.addEntry(ln.parent, ln.name, src)
	return nil
}

func (f *fsys) symlink(target, linkp string) error {
	if target == "" {
		return eNOENT
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolveNew(linkp)
	if err != nil {
		return err
	}
	n := f.newNode(sIFLNK | 0o777)
	n.target = target
	f.addEntry(l.parent, l.name, n)
	return nil
}

// link is link(2) as Linux does it: it doesn't follow a symlink in oldp,
// and directories can't be linked (EPERM).
func (f *fsys) link(oldp, newp string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	src, err := f.find(oldp, false)
	if err != nil {
		return err
	}
	if src.isDir() {
		return ePERM
	}
	l, err := f.resolveNew(newp)
	if err != nil {
		return err
	}
	f.addEntry(l.parent, l.name, src)
	src.nlink++
	return nil
}

func (f *fsys) readlink(p string) (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, err := f.find(p, false)
	if err != nil {
		return "", err
	}
	if !n.isLink() {
		return "", eINVAL
	}
	return n.target, nil
}

// realpath canonicalises like OpenSSH's REALPATH: "" means ".", symlinks are
// resolved, and a missing final element still resolves.
func (f *fsys) realpath(p string) (string, error) {
	if p == "" {
		p = "."
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, err := f.resolve(p, true)
	if err != nil {
		return "", err
	}
	return l.path(), nil
}

func (f *fsys) setstat(p string, a attrs, follow bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.find(p, follow)
	if err != nil {
		return err
	}
	if a.flags&AttrSize != 0 && n.isReg() && !n.canWrite() {
		return eACCES
	}
	return f.setattrs(n, a, true)
}

// setattrs applies size, permissions, times, then owner, in OpenSSH's order,
// without stopping at the first failure; the last error is the one reported.
// writable is false for an FSETSTAT on a handle not opened for writing,
// where ftruncate(2) gives EINVAL. Callers hold f.mu exclusively.
func (f *fsys) setattrs(n *node, a attrs, writable bool) error {
	var err error
	if a.flags&AttrSize != 0 {
		switch {
		case n.isDir():
			err = eISDIR
		case !n.isReg() || !writable:
			err = eINVAL
		case a.size > uint64(f.maxSize):
			err = eFBIG
		default:
			n.resize(int(a.size))
			n.mtime = now32()
		}
	}
	if a.flags&AttrPermissions != 0 {
		n.mode = n.mode&sIFMT | a.perm&0o7777
	}
	if a.flags&AttrACModTime != 0 && !f.ignoreTimes {
		n.atime, n.mtime = a.atime, a.mtime
	}
	if a.flags&AttrUIDGID != 0 {
		n.uid, n.gid = a.uid, a.gid
	}
	return err
}

// resize sets the length of a file's data; new bytes read as zero even
// when they come from capacity left over by an earlier truncation.
func (n *node) resize(size int) {
	if size <= len(n.data) {
		n.data = n.data[:size]
		return
	}
	n.grow(size, size)
}

// grow extends n.data to end bytes, zeroing the new bytes below zeroTo (the
// caller is about to overwrite the rest). Capacity doubles so sequential
// WRITEs append in amortised constant time, and TRUNC keeps the capacity so
// a benchmark rewriting one file doesn't reallocate.
func (n *node) grow(end, zeroTo int) {
	old := len(n.data)
	if end <= old {
		return
	}
	if end > cap(n.data) {
		data := make([]byte, end, max(end, 2*cap(n.data)))
		copy(data, n.data)
		n.data = data // fresh memory is already zero
		return
	}
	n.data = n.data[:end]
	if zeroTo > old {
		clear(n.data[old:min(zeroTo, end)])
	}
}

// writeAt stores data at off (or at the end for an APPEND handle).
func (f *fsys) writeAt(n *node, off uint64, data []byte, appendMode bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if appendMode {
		off = uint64(len(n.data))
	}
	end := off + uint64(len(data))
	if off > uint64(f.maxSize) || end > uint64(f.maxSize) {
		return eFBIG
	}
	n.grow(int(end), int(off))
	copy(n.data[off:], data)
	n.mtime = now32()
	return nil
}

// statvfs values are made up but plausible; f_flag 0 (read-write).
func (f *fsys) statvfs() [11]uint64 {
	return [11]uint64{
		4096,    // bsize
		4096,    // frsize
		1 << 24, // blocks
		1 << 23, // bfree
		1 << 23, // bavail
		1 << 20, // files
		1 << 19, // ffree
		1 << 19, // favail
		0x51ce,  // fsid
		0,       // flag
		maxNameLen,
	}
}

// opendir snapshots a directory's names (sorted, after "." and "..") for
// READDIR; each entry is looked up again when its batch is sent, so names
// removed in between are skipped rather than reported stale.
func (f *fsys) opendir(p string) (dirList, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, err := f.find(p, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, eNOTDIR
	}
	if !n.canRead() {
		return nil, eACCES
	}
	names := make([]string, 0, len(n.children)+2)
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	return &memDir{f: f, dir: n, list: append([]string{".", ".."}, names...)}, nil
}

// entry returns what READDIR reports for name in dir: lstat attributes and
// an ls -l style longname. ok is false when the name has gone away. Callers
// hold f.mu.
func (f *fsys) entry(dir *node, name string) (a attrs, long string, ok bool) {
	var n *node
	switch name {
	case ".":
		n = dir
	case "..":
		n = dir.parent
		if n == nil {
			n = dir // the root is its own parent
		}
	default:
		n = dir.children[name]
	}
	if n == nil {
		return attrs{}, "", false
	}
	return n.attrs(), longname(name, n.attrs(), n.nlink), true
}

// longname formats an `ls -l` line in the spirit of OpenSSH's ls_file; it is
// for humans and clients must not parse it.
func longname(name string, a attrs, nlink uint32) string {
	var m [10]byte
	switch a.perm & sIFMT {
	case sIFDIR:
		m[0] = 'd'
	case sIFLNK:
		m[0] = 'l'
	default:
		m[0] = '-'
	}
	const rwx = "rwxrwxrwx"
	for i := range 9 {
		if a.perm&(1<<(8-i)) != 0 {
			m[i+1] = rwx[i]
		} else {
			m[i+1] = '-'
		}
	}
	special := func(bit uint32, at int, set, unset byte) {
		if a.perm&bit != 0 {
			if m[at] == 'x' {
				m[at] = set
			} else {
				m[at] = unset
			}
		}
	}
	special(0o4000, 3, 's', 'S')
	special(0o2000, 6, 's', 'S')
	special(0o1000, 9, 't', 'T')
	t := time.Unix(int64(a.mtime), 0).UTC()
	layout := "Jan _2 15:04"
	if age := time.Since(t); age > 182*24*time.Hour || age < -182*24*time.Hour {
		layout = "Jan _2  2006"
	}
	return fmt.Sprintf("%s %3d %-8d %-8d %8d %s %s", m[:], nlink, a.uid, a.gid, a.size, t.Format(layout), name)
}
