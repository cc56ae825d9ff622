package sftp

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// How a failed upload leaves its part file. The part is cut to the prefix the server
// acknowledged, so that it holds no hole and no nonce (reopen.go) for anyone who looks
// at it, and when nothing of the upload can land after the cut, marked (resumemark.go)
// so that Resume continues it from its end. Resume does not depend on the cut (the
// span bound proves its resume point, resume.go), so the cut is made only where it
// cannot act on another file:
//
//   - through the File's own handle (FSETSTAT), never by name: a co-tenant who can
//     write the directory can swap the name for a link, and a truncate by name would
//     cut the link's target (issue 26);
//   - after every WRITE that may land: every sibling lane's CLOSE answered (a server
//     carries out one channel's requests in order, so a CLOSE answered is every WRITE
//     before it landed), and the FSETSTAT on the File's own channel behind its WRITEs.
//     When the call's ctx ended before the siblings' CLOSEs were answered, the engine
//     leaves them owed (siblingEnd), and the cut, which then runs in the background,
//     waits for them first. A sibling whose channel died, or whose CLOSE failed, may
//     still have WRITEs land: the part is cut, not marked, and a late WRITE may hold
//     it a hole again, which the span bound keeps Resume right about;
//   - when the handle is gone (its channel died, or the CLOSE went out already), there
//     is no cut.
//
// A part of which nothing is known written is removed, by name (removeUnproven).

// siblingEnd is how the sibling lanes of a File's upload ended, for the cut of its
// part should the upload fail (the engine fills it in, lanes.finish).
type siblingEnd struct {
	// lost is set when a sibling's WRITEs may still land: its channel died before its
	// CLOSE was answered, or the CLOSE failed or could not be sent.
	lost bool
	// owed are the CLOSEs sent whose replies the upload did not wait for, its call's
	// ctx having ended: their replies (or their channels' failures) come on ch.
	owed map[uint32]*conn
	ch   <-chan response
}

// settled waits for the CLOSEs owed and reports whether every WRITE of the upload is
// known to have landed: no sibling lost, and every CLOSE answered OK. Each reply
// owed comes, as the reply or as its channel's failure (Client.Close fails them).
func (e *siblingEnd) settled() bool {
	if e == nil {
		return true
	}
	ok := !e.lost
	for len(e.owed) > 0 {
		r := <-e.ch
		if cn := e.owed[r.id]; cn != nil {
			delete(e.owed, r.id)
			ok = ok && r.err == nil && cn.check(expectStatus("CLOSE", &r)) == nil
		}
		r.release()
	}
	return ok
}

// cutAndClose cuts f, the part file of a failed upload, to size through its handle and
// closes it; both replies are awaited (the caller bounds that, see finishPut). When
// every WRITE of the upload is known to have landed (siblingEnd) and the cut was
// answered OK, the part is marked between the two: the mark's FSETSTAT goes out only
// after the cut's reply, in a request of its own (see the mark rule, resume.go).
// Otherwise the cut and the CLOSE go out back to back. The cut is best effort: a
// server that refuses it leaves the part as it is. The error is the CLOSE's.
func cutAndClose(f *File, size int64) error {
	bg := context.Background()
	cut := unshared(func(id uint32) []byte {
		return appendStringAttrs(nil, sshfx.TypeFsetstat, id, f.handle, &sshfx.Attrs{Flags: sshfx.AttrSize, Size: uint64(size)})
	})
	encs := []encoder{cut}
	if size > 0 && f.siblings.Load().settled() {
		encs = nil
		if cutFirst(f, cut) {
			encs = []encoder{unshared(func(id uint32) []byte {
				return appendStringAttrs(nil, sshfx.TypeFsetstat, id, f.handle, markAttrs())
			})}
		}
	}
	calls, cls, err := f.sendThenClose(bg, encs)
	for _, cl := range calls {
		cl.take(bg, status("FSETSTAT")) // best effort; a malformed reply fails the channel
	}
	if cerr := cls.take(bg, status("CLOSE")); cerr != nil || err != nil {
		return f.err("close", firstErr(cerr, err))
	}
	return nil
}

// cutFirst sends the cut alone on f's channel and reports whether the server answered
// OK. f is not closed yet, and nothing else sends on its handle: its upload is over.
func cutFirst(f *File, cut encoder) bool {
	bg := context.Background()
	pkt, _ := cut(f.cn.newID())
	if f.enter(nil) != nil {
		return false // closed: never after the handle's CLOSE
	}
	cl := f.cn.start(bg, pkt, nil)
	f.hmu.RUnlock()
	return cl.take(bg, status("FSETSTAT")) == nil
}

// closeCutting is finishPut's closeFile for an upload whose handle f is still open:
// a failed upload's part is cut to acked through f first (cutAndClose).
func closeCutting(f *File, acked int64) func(failed bool) error {
	return func(failed bool) error {
		if failed {
			return cutAndClose(f, acked)
		}
		return f.Close()
	}
}

// removeUnproven removes the part file of a failed upload of which nothing is known
// written, by name, but only when LSTAT shows a regular file there: REMOVE acts on the
// name and never through a link, so a name swapped between the two requests costs at
// most the entry swapped in, never a file a link points to, and a link found there is
// left alone. WRITEs that landed unacknowledged go with it: nothing of them was proven
// (by the span bound they are all below W, where Resume would start over anyway).
func (t *getPutCall) removeUnproven(ctx context.Context, part string) {
	fi, err := t.c.Lstat(ctx, part)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	t.c.Remove(ctx, part)
}

// partEnds counts the ends of uploads under way: the wait for the siblings' CLOSEs,
// the cut and mark of a failed upload's part, its CLOSE (finishPut). They run in the
// background once the call's ctx has ended, and
//
//   - Client.Close lets them finish, for a while: a Ctrl-C that cancels a Put and then
//     closes its Client leaves the part cut and marked, so the next run continues it
//     from its end;
//   - an upload to the same part on the same Client waits for them (awaitPart)
//     before it looks at the part: a cut landing under it, through the old handle,
//     would remove what it had written past the cut, and a mark would follow.
type partEnds struct {
	mu      sync.Mutex
	n       int
	idle    chan struct{}  // closed when n is back to 0; made when it leaves 0
	parts   map[string]int // ends under way by part name
	changed chan struct{}  // closed and made anew whenever an end finishes
}

func (p *partEnds) start(part string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		p.idle = make(chan struct{})
	}
	p.n++
	if p.parts == nil {
		p.parts = make(map[string]int)
		p.changed = make(chan struct{})
	}
	p.parts[part]++
}

func (p *partEnds) done(part string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n--; p.n == 0 {
		close(p.idle)
	}
	if p.parts[part]--; p.parts[part] == 0 {
		delete(p.parts, part)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait returns once no end is under way, or after d.
func (p *partEnds) wait(d time.Duration) {
	p.mu.Lock()
	idle := p.idle
	busy := p.n > 0
	p.mu.Unlock()
	if !busy {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// awaitPart returns once no end of an upload to part is under way, or with ctx's
// error.
func (p *partEnds) awaitPart(ctx context.Context, part string) error {
	for {
		p.mu.Lock()
		busy := p.parts[part] > 0
		changed := p.changed
		p.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctxError(ctx, "")
		}
	}
}
