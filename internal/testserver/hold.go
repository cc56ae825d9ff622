package testserver

import (
	"bytes"
	"math/rand/v2"
)

// heldWrites are the WRITEs a session has read and not yet carried out
// (Options.HoldWrites), oldest first. The reader goroutine alone uses them.
type heldWrites struct {
	list []request // copies: their byte slices are their own
	rng  *rand.Rand
}

// hold keeps r for later when it is a WRITE the session would carry out now, and
// then carries out the oldest of those held beyond what this moment's draw keeps.
// Any other request first has every held WRITE carried out, so that a session's
// requests take effect in the order they came. It reports whether r was kept.
func (ss *session) hold(r *request) bool {
	if r.typ != TypeWrite || r.bad || (ss.cfg.Fail != nil && ss.failCode(r) != 0) {
		ss.applyHeld(0)
		return false
	}
	c := *r
	c.handle, c.data = bytes.Clone(r.handle), bytes.Clone(r.data)
	c.path, c.path2, c.ext = nil, nil, nil
	ss.held.list = append(ss.held.list, c)
	ss.applyHeld(ss.held.rng.IntN(ss.cfg.HoldWrites + 1))
	return true
}

// applyHeld carries out and answers the oldest held WRITEs until at most keep are
// left.
func (ss *session) applyHeld(keep int) {
	n := len(ss.held.list) - keep
	if n <= 0 {
		return
	}
	for i := range n {
		r := &ss.held.list[i]
		ss.emit(r, ss.execute(ss.getBuf(), r))
	}
	left := copy(ss.held.list, ss.held.list[n:])
	clear(ss.held.list[left:])
	ss.held.list = ss.held.list[:left]
}

// drop forgets the held WRITEs: the session has ended, and they are never carried
// out nor answered.
func (h *heldWrites) drop() {
	clear(h.list)
	h.list = nil
}
