package testserver

import (
	"path"
	"sync"
)

// quirkState is what Quirks remember across sessions: which files are open for
// writing (SecondWriter) and which are being read under an ExtractCount.
type quirkState struct {
	mu         sync.Mutex
	writers    map[string]int // open write handles by cleanPath
	extracting map[string]int // open read handles by cleanPath
	extracted  map[string]int // read opens used by cleanPath
}

func newQuirkState() *quirkState {
	return &quirkState{writers: map[string]int{}, extracting: map[string]int{}, extracted: map[string]int{}}
}

func (qs *quirkState) isExtracting(name string) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.extracting[name] > 0
}

// quirkHandle is what a handle opened under Quirks remembers.
type quirkHandle struct {
	path       string // cleanPath of the name it was opened by
	writing    bool   // counted in quirkState.writers
	extracting string // counted in quirkState.extracting: the name, "" if not
	// HoleFailsClose: the contiguous end written so far, and whether a WRITE fell
	// outside it (a gap or a rewrite the server could not have passed on).
	next    uint64
	pending map[uint64]uint64 // offset -> end of WRITEs beyond next
	stale   bool
}

func (ss *session) openQuirky(b []byte, r *request) []byte {
	q, qs := ss.cfg.Quirks, ss.srv.quirks
	name := cleanPath(r.path)
	write := r.pflags&(OpenWrite|OpenAppend) != 0
	read := r.pflags&OpenRead != 0 || !write
	st, statErr := ss.fs.stat(string(r.path), true)
	exists := statErr == nil && st.perm&sIFMT == sIFREG
	if rf := openRefusal(q, r.pflags, read, write, exists, statErr); rf.code != 0 {
		return appendStatusMsg(b, r.id, rf.code, rf.msg)
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if rf := qs.busy(q, name, read, write); rf.code != 0 {
		return appendStatusMsg(b, r.id, rf.code, rf.msg)
	}
	if write && exists && q.OverwriteTruncates {
		r.pflags |= OpenTrunc | OpenCreat
	}
	if write && q.ImplicitDirs {
		ss.makeParents(string(r.path))
	}
	ss.lastHandle = nil
	b = ss.execute(b, r)
	if h := ss.lastHandle; h != nil {
		h.q = qs.opened(q, name, read, write, exists)
	}
	return b
}

// busy refuses an OPEN of a file another handle holds: a second writer
// (SecondWriter), or any OPEN of a file being extracted. Callers hold qs.mu.
func (qs *quirkState) busy(q *Quirks, name string, read, write bool) refusal {
	switch {
	case write && q.SecondWriter != 0 && qs.writers[name] > 0:
		return refusal{code: q.SecondWriter}
	case read && q.ExtractCount > 0 && qs.extracting[name] > 0:
		return notExtractable(name)
	}
	return refusal{}
}

// opened counts a handle just opened on name. Callers hold qs.mu.
func (qs *quirkState) opened(q *Quirks, name string, read, write, exists bool) *quirkHandle {
	h := &quirkHandle{path: name}
	if write {
		h.writing = true
		qs.writers[name]++
	}
	if read && !write && q.ExtractCount > 0 && exists {
		h.extracting = name
		qs.extracting[name]++
		qs.extracted[name]++
	}
	return h
}

// openRefusal is the status an OPEN gets from the Quirks, before it is tried.
func openRefusal(q *Quirks, pflags uint32, read, write, exists bool, statErr error) refusal {
	switch {
	case read && write && q.ReadWriteOpen != 0:
		return refusal{code: q.ReadWriteOpen, msg: "Cannot open file in mode: " + modeNames(pflags)}
	case pflags&OpenAppend != 0 && q.AppendOpen != 0:
		return refusal{code: q.AppendOpen}
	case write && exists && pflags&OpenTrunc == 0 && q.ResumeOpen != 0:
		return refusal{code: q.ResumeOpen}
	case !write && statErr != nil && q.OpenMissing != 0:
		return refusal{code: q.OpenMissing}
	}
	return refusal{}
}

// modeNames spells pflags as AWS Transfer Family's refusal does.
func modeNames(pflags uint32) string {
	s := ""
	for _, f := range []struct {
		bit  uint32
		name string
	}{{OpenWrite, "WRITE"}, {OpenTrunc, "TRUNCATE"}, {OpenCreat, "CREATE"}, {OpenAppend, "APPEND"}, {OpenExcl, "EXCLUSIVE"}, {OpenRead, "READ"}} {
		if pflags&f.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += f.name
		}
	}
	return s
}

func (ss *session) closeQuirky(b []byte, r *request) []byte {
	h := ss.handles[string(r.handle)]
	if h == nil || h.q == nil {
		return ss.execute(b, r)
	}
	hole := ss.cfg.Quirks.HoleFailsClose && h.q.writing && (h.q.stale || len(h.q.pending) > 0)
	ss.forgetQuirks(h)
	b = ss.execute(b, r)
	if hole {
		_ = ss.fs.remove(h.q.path)
		return appendStatusMsg(b, r.id, StatusFailure, "some file segments were not flushed from the queue")
	}
	return b
}

// forgetQuirks undoes what openQuirky counted for h, when it is closed or its
// session ends. A file whose extraction count is used up goes from the tree.
func (ss *session) forgetQuirks(h *handle) {
	if h.q == nil {
		return
	}
	qs := ss.srv.quirks
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if h.q.writing {
		h.q.writing = false
		if qs.writers[h.q.path]--; qs.writers[h.q.path] <= 0 {
			delete(qs.writers, h.q.path)
		}
	}
	if name := h.q.extracting; name != "" {
		h.q.extracting = ""
		if qs.extracting[name]--; qs.extracting[name] <= 0 {
			delete(qs.extracting, name)
		}
		if qs.extracted[name] >= ss.cfg.Quirks.ExtractCount {
			delete(qs.extracted, name)
			_ = ss.fs.remove(name)
		}
	}
}

// writeQuirky tracks the contiguous end for HoleFailsClose.
func (ss *session) writeQuirky(b []byte, r *request) []byte {
	h := ss.fileHandle(r.handle)
	if h == nil || h.q == nil || !ss.cfg.Quirks.HoleFailsClose || h.append {
		return ss.execute(b, r)
	}
	t := h.q
	end := r.offset + uint64(len(r.data))
	switch {
	case r.offset == t.next:
		t.next = end
		for e, ok := t.pending[t.next]; ok; e, ok = t.pending[t.next] {
			delete(t.pending, t.next)
			t.next = e
		}
	case r.offset > t.next+holeAhead:
		return appendStatus(b, r.id, StatusFailure)
	case r.offset > t.next:
		if t.pending == nil {
			t.pending = map[uint64]uint64{}
		}
		t.pending[r.offset] = end
	default:
		t.stale = true
	}
	return ss.execute(b, r)
}

func (ss *session) statQuirky(b []byte, r *request) []byte {
	q := ss.cfg.Quirks
	if q.ExtractCount > 0 && ss.srv.quirks.isExtracting(cleanPath(r.path)) {
		rf := notExtractable(string(r.path))
		return appendStatusMsg(b, r.id, rf.code, rf.msg)
	}
	if q.MissingIsDir {
		if _, err := ss.fs.stat(string(r.path), r.typ == TypeStat); err == eNOENT {
			a := attrs{flags: AttrSize | AttrPermissions | AttrACModTime, perm: sIFDIR | 0o755}
			return appendAttrsReply(b, r.id, a, nil)
		}
	}
	return ss.execute(b, r)
}

func (ss *session) setstatQuirky(b []byte, r *request) []byte {
	q := ss.cfg.Quirks
	if r.typ == TypeFsetstat {
		if h := ss.fileHandle(r.handle); h != nil && h.q != nil && h.q.extracting != "" {
			rf := notExtractable(h.q.extracting)
			return appendStatusMsg(b, r.id, rf.code, rf.msg)
		}
	}
	if r.attrs.flags&q.SetstatRefusedAttrs != 0 {
		msg := "SETSTAT unsupported"
		if r.typ == TypeFsetstat {
			msg = "FSETSTAT unsupported"
		}
		return appendStatusMsg(b, r.id, q.SetstatRefused, msg)
	}
	if r.typ == TypeSetstat && r.attrs.flags&AttrSize != 0 && q.TruncateRefused != 0 {
		return appendStatus(b, r.id, q.TruncateRefused)
	}
	r.attrs.flags &^= q.SetstatIgnoredAttrs
	return ss.execute(b, r)
}

func (ss *session) removeQuirky(b []byte, r *request) []byte {
	if ss.cfg.Quirks.RemoveMissingOK {
		if _, err := ss.fs.stat(string(r.path), false); err == eNOENT {
			return appendStatus(b, r.id, StatusOK)
		}
	}
	return ss.execute(b, r)
}

func (ss *session) rmdirQuirky(b []byte, r *request) []byte {
	if ss.cfg.Quirks.RmdirRemovesAll {
		if err := ss.removeAll(string(r.path)); err != nil {
			return appendStatus(b, r.id, statusOf(err))
		}
	}
	return ss.execute(b, r)
}

// removeAll empties the directory p (leaving p itself for RMDIR).
func (ss *session) removeAll(p string) error {
	d, err := ss.fs.opendir(p)
	if err != nil {
		return err
	}
	names := d.names()
	d.close()
	for _, n := range names {
		if n == "." || n == ".." {
			continue
		}
		child := path.Join(p, n)
		a, err := ss.fs.stat(child, false)
		if err != nil {
			continue
		}
		if a.perm&sIFMT == sIFDIR {
			if err := ss.removeAll(child); err != nil {
				return err
			}
			err = ss.fs.rmdir(child)
		} else {
			err = ss.fs.remove(child)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (ss *session) realpathQuirky(b []byte, r *request) []byte {
	q := ss.cfg.Quirks
	if q.PathPrefix == "" {
		return ss.execute(b, r)
	}
	p, err := ss.fs.realpath(string(r.path))
	return appendNameReply(b, r.id, q.PathPrefix+p, err)
}

func (ss *session) renameQuirky(b []byte, r *request) []byte {
	q := ss.cfg.Quirks
	oldp, newp := string(r.path), string(r.path2)
	src, serr := ss.fs.stat(oldp, false)
	_, derr := ss.fs.stat(newp, false)
	switch {
	case serr != nil:
	case q.RenameSelfRemoves && cleanPath(r.path) == cleanPath(r.path2) && src.perm&sIFMT == sIFREG:
		_ = ss.fs.remove(oldp)
		return appendStatus(b, r.id, StatusNoSuchFile)
	case q.RenameFullDir != 0 && src.perm&sIFMT == sIFDIR && !ss.emptyDir(oldp):
		return appendStatus(b, r.id, q.RenameFullDir)
	case derr == nil && q.RenameReplaces:
		return appendStatus(b, r.id, statusOf(ss.fs.rename(oldp, newp, true)))
	case derr == nil && q.RenameExisting != 0:
		return appendStatus(b, r.id, q.RenameExisting)
	}
	return ss.execute(b, r)
}

// makeParents makes the missing directories above p, as ImplicitDirs says.
func (ss *session) makeParents(p string) {
	dir := "/"
	els := splitPath(path.Dir(path.Clean("/" + p)))
	for _, el := range els {
		dir = path.Join(dir, el)
		if _, err := ss.fs.stat(dir, true); err == eNOENT {
			_ = ss.fs.mkdir(dir, 0o755)
		}
	}
}

func (ss *session) emptyDir(p string) bool {
	d, err := ss.fs.opendir(p)
	if err != nil {
		return false
	}
	defer d.close()
	for _, n := range d.names() {
		if n != "." && n != ".." {
			return false
		}
	}
	return true
}
