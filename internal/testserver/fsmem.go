package testserver

import "slices"

// memFile is an open node of the in-memory tree. An open handle keeps a removed
// file's data alive, as on Unix, because it holds the node.
type memFile struct {
	f *fsys
	n *node
}

func (m memFile) isDir() bool { return m.n.isDir() }

// appendRead copies the file's bytes straight into the reply buffer: one copy, no
// allocation once the recycled buffers have grown to the read size.
func (m memFile) appendRead(b []byte, off, want uint64) ([]byte, bool, error) {
	m.f.mu.RLock()
	defer m.f.mu.RUnlock()
	data := m.n.data
	if off >= uint64(len(data)) {
		return b, true, nil
	}
	k := min(want, uint64(len(data))-off)
	b = slices.Grow(b, int(k))
	return append(b, data[off:off+k]...), false, nil
}

func (m memFile) writeAt(off uint64, data []byte, appendMode bool) error {
	return m.f.writeAt(m.n, off, data, appendMode)
}

func (m memFile) attrs() (attrs, error) {
	m.f.mu.RLock()
	defer m.f.mu.RUnlock()
	return m.n.attrs(), nil
}

func (m memFile) setattrs(a attrs, writable bool) error {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	return m.f.setattrs(m.n, a, writable)
}

func (m memFile) close() error { return nil }

// memDir is an open directory of the in-memory tree.
type memDir struct {
	f    *fsys
	dir  *node
	list []string
}

func (d *memDir) names() []string { return d.list }

func (d *memDir) entry(name string) (attrs, string, bool) {
	d.f.mu.RLock()
	defer d.f.mu.RUnlock()
	return d.f.entry(d.dir, name)
}

func (d *memDir) close() {}

func (f *fsys) close() error { return nil }

// writeFile creates or replaces the contents of a regular file, following links.
func (f *fsys) writeFile(name string, data []byte, perm uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.resolve(name, true)
	if err != nil {
		return err
	}
	n := l.node
	switch {
	case n == nil:
		n = f.newNode(sIFREG | perm)
		f.addEntry(l.parent, l.name, n)
	case !n.isReg():
		return eISDIR
	}
	n.data = append(n.data[:0], data...)
	n.mtime = now32()
	return nil
}

// readFile returns a copy of a file's contents (links followed).
func (f *fsys) readFile(name string) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, err := f.find(name, true)
	if err != nil {
		return nil, err
	}
	if !n.isReg() {
		return nil, eISDIR
	}
	return slices.Clone(n.data), nil
}
