package sftp

// Requests given up. SFTP has no cancel: a request whose waiter gave up (its ctx
// ended, a transfer stopped) may still be answered, late or never. Its id stays in
// pending with no channel, so that the reader drops its reply (closing a HANDLE:
// dispatch) rather than taking it for one never asked for, which fails the channel.
// A server that never answers would make those entries grow for the channel's life
// with every call that gives up on it, and a service holds one Client for days. So a
// channel remembers at most maxGivenUp of them, in the order they were given up; past
// that the oldest is forgotten: its id leaves pending, and forgottenBefore marks
// where forgotten ids end. A reply whose id is not pending but at or before that
// mark is taken for a late reply to a forgotten request and dropped like any late
// reply (a HANDLE closed). Ids come from one counter per Client and only grow
// (modulo 2^32), so a request still pending is never at or before the mark as
// forgotten; what the mark gives up is noticing a second reply to an old request,
// or one sent on another of the Client's channels, which then is dropped where
// otherwise it would have failed the channel.

// maxGivenUp is how many given-up requests a channel remembers: more than a
// transfer keeps in flight by default, so that one stopped transfer forgets nothing.
const maxGivenUp = 1024

// givenUpIDs is a channel's record of its given-up requests, guarded by conn.mu.
type givenUpIDs struct {
	ids  []uint32 // in the order given up; ids[head:] are remembered
	head int
	// mark is the latest id forgotten (set once forgot is); a reply to an id not
	// pending and not after it is a late one.
	mark   uint32
	forgot bool
}

// gaveUpLocked marks the pending request id (waiting as w) as given up: its
// reply will be dropped. Past maxGivenUp remembered, the oldest is forgotten.
func (c *conn) gaveUpLocked(id uint32, w waiter) {
	c.pending[id] = waiter{seq: w.seq, acct: w.acct} // acct: a late oversized NAME is skipped, not fatal
	g := &c.given
	g.ids = append(g.ids, id)
	for len(g.ids)-g.head > maxGivenUp {
		old := g.ids[g.head]
		g.head++
		if w, ok := c.pending[old]; ok && w.ch == nil { // not answered since
			delete(c.pending, old)
			if !g.forgot || idAfter(old, g.mark) {
				g.mark = old
			}
			g.forgot = true
		}
	}
	if g.head >= maxGivenUp { // slide down, so the slice stays within twice the bound
		g.ids = append(g.ids[:0], g.ids[g.head:]...)
		g.head = 0
	}
}

// forgottenLocked reports whether id, not in pending, is at or before the mark: a
// late reply to a request this channel forgot.
func (c *conn) forgottenLocked(id uint32) bool {
	g := &c.given
	return g.forgot && !idAfter(id, g.mark)
}

// idAfter reports whether request id a was handed out after b, the counter being
// taken to have moved less than 2^31 between them.
func idAfter(a, b uint32) bool { return int32(a-b) > 0 }

// givenUpPending counts the requests pending with no waiter (tests).
func (c *conn) givenUpPending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.pending {
		if w.ch == nil {
			n++
		}
	}
	return n
}
