package sftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"sync"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Proof that a file a transfer reopens by name on another channel (a striping lane,
// lanes.go) is the file its own handle is on. Between the File's open and a sibling's,
// anyone who can write the directory can put a link or another file under the name;
// SFTP v3 shows no inode, so the sibling's handle must be checked by what it reads.
//
// Uploads (a proof, nothing is written through a handle before it): siblings open
// READ|WRITE, without CREAT or TRUNC. For each stripe round the File's own handle, the
// file the client created or opened, writes a random nonce of nonceLen bytes over the
// start of a chunk already read from the source, which the transfer holds back; each
// sibling READs those bytes through its own handle, and only one that reads the nonce
// back joins. Any other outcome (another file, a short read, a refused READ) closes the
// sibling's handle, and the transfer goes on with the lanes it has. The nonce existed
// nowhere but in the client's file, so reading it proves the handle is on that file
// (someone able to read the client's file and write the link's target within the
// round could copy it, but could then write the target anyway). The held chunk goes
// out afterwards on the own lane, behind the nonce's WRITE on the same channel, so the
// real data always lands over the nonce, in every outcome: the round ending, the
// transfer ending first (nothing else to send: the chunk goes at once, and a sibling
// still checking then reads data, not the nonce, and is turned away), or failing
// (the chunk is never acknowledged, so the bytes reported written, a prefix of the
// acknowledged chunks, stop before it, and Resume rewrites it).
//   - A nonce left in the file is inside what Resume sends again. The held chunk is
//     at or past where the run started, and while it is held the acknowledged prefix
//     cannot pass it: so when the upload stops with the nonce not yet overwritten,
//     the nonce lies at or past M = max(R, Pe) of resume.go's proof, and the next run
//     continues at or before M. The held chunk passes the span rule before it is held
//     (inSpan), and one that would keep the next chunk past the span waits no longer
//     for its round (heldBlocks): it goes out, and siblings that have not read the
//     nonce yet are turned away, as when the transfer ends first.
//   - The chunk held is the next in offset order, read from the source, so the nonce
//     is inside the data whether the source's size is known or not; a chunk shorter
//     than the nonce (the source's last) is not used: the round's siblings are
//     refused rather than the file grown past its end.
//   - Each round, later ones included, has its own nonce and chunk: a chunk's nonce
//     is gone once its data is written.
//   - Holding a chunk back writes out of order. Some servers write only in order
//     (rclone without its VFS cache); they also refuse the read-write open, so the
//     nonce is written only once a sibling of the round has opened, or straight away
//     once a sibling of this Client has passed (knownReadWrite): then the round costs
//     one round trip (the sibling's READ) instead of two.
//   - Servers that refuse read-write opens get no upload striping.
//   - Files opened with O_APPEND never stripe (the server ignores offsets).
//
// Downloads: reading another file gives wrong contents, not a write, which a server
// can give anyway. Still, a sibling's replies count only once its FSTAT agrees with the
// File's (size, modification time, permissions, owner: whatever the server sends, the
// same for both). The sibling joins as soon as it is open, its FSTAT queued ahead of
// any READ on its channel, whose replies come in order: so no round trip is added, and
// by the time a READ's answer arrives from it the verdict is due (lane.verdict). A
// sibling that fails the check is dropped and its READs asked again on the others.

// nonceLen is the length of an upload round's nonce: random enough that no file holds
// it by chance.
const nonceLen = 16

// roundProof is the nonce of one stripe round of an upload.
type roundProof struct {
	wanted   chan struct{} // closed when a sibling of the round has opened: write the nonce
	wantOnce sync.Once
	noticed  bool          // the scheduler's: it has seen wanted closed
	ready    chan struct{} // closed once the outcome below is set
	settled  bool          // the scheduler's: ready is closed
	ok       bool          // the nonce is in the file at off
	off      int64
	nonce    [nonceLen]byte

	// The siblings' READs of the nonce. Once the held chunk is to go out before the
	// round is over, no more may start, and it waits for the answers of those sent: a
	// server may change what a READ covers (rclone's cache zeroes a range read through
	// a read-write handle), and the data must land after that.
	mu      sync.Mutex
	reading int
	closed  bool
	drained chan struct{} // closed once closed and no READ is left
}

func newRoundProof() *roundProof {
	return &roundProof{wanted: make(chan struct{}), ready: make(chan struct{}), drained: make(chan struct{})}
}

// beginRead lets a sibling READ the nonce; false once the chunk is going out.
func (p *roundProof) beginRead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.reading++
	return true
}

// endRead is a READ of the nonce answered (or given up with its channel).
func (p *roundProof) endRead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reading--; p.closed && p.reading == 0 {
		close(p.drained)
	}
}

// closeReads lets no more READs of the nonce start, and reports whether none is left.
func (p *roundProof) closeReads() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		if p.reading == 0 {
			close(p.drained)
		}
	}
	return p.reading == 0
}

// want asks the scheduler for the nonce; any goroutine, any number of times.
func (p *roundProof) want() { p.wantOnce.Do(func() { close(p.wanted) }) }

// settle publishes the outcome; the scheduler's goroutine only, once.
func (p *roundProof) settle(ok bool) {
	if !p.settled {
		p.settled, p.ok = true, ok
		close(p.ready)
	}
}

// laneAsk is what the transfer asks its opener for: a round of lanes up to n, with the
// round's proof for an upload.
type laneAsk struct {
	n     int
	proof *roundProof
}

// ask starts a round of lane opening. For an upload the round gets a proof, which the
// scheduler fills in (armProof).
func (ls *lanes) ask(n int) {
	a := laneAsk{n: n}
	if ls.upload {
		a.proof = newRoundProof()
		if ls.f.c.knownReadWrite.Load() {
			a.proof.want()
		}
		ls.proof = a.proof
	}
	ls.want <- a // room: a round is asked for only once the one before is done
}

// openSibling opens the file on cn and, once it is proven the File's, hands it to the
// transfer as a lane. A sibling that cannot be opened or proven is not the transfer's
// failure: it is left out, and its handle closed (turnAway).
func (ls *lanes) openSibling(ctx context.Context, cn *conn, a laneAsk) {
	c := ls.f.c
	if hook := c.opts.beforeSiblingOpen; hook != nil {
		hook(ls.f.name)
	}
	h, err := c.openHandle(ctx, cn, "open", func(dst []byte, id uint32) []byte {
		return appendOpen(dst, id, ls.f.name, ls.pflags, &sshfx.Attrs{})
	})
	if err != nil {
		c.noteSiblingRefused(ls.upload, err) // capabilities.go
		return
	}
	l := &lane{cn: cn, handle: h, sibling: true}
	if ls.upload {
		a.proof.want()
		if !proveWritten(ctx, c, l, a.proof) {
			ls.turnAway(l)
			return
		}
		c.knownReadWrite.Store(true)
		ls.joins <- l
		return
	}
	ls.joinUnverified(ctx, l)
}

// turnAway closes the handle of a sibling the opener does not hand to the transfer,
// waiting for the reply as finish waits for the siblings' (siblingBound): finish
// waits for the opener, so the transfer returns with every handle it opened closed,
// those turned away included. A sibling whose proof was cut short by the end of the
// transfer is one of them.
func (ls *lanes) turnAway(l *lane) {
	bound, stop := ls.f.siblingBound()
	defer stop()
	l.cn.closeHandle(bound, l.handle)
}

// proveWritten reads the round's nonce through l's handle: true when it is there.
func proveWritten(ctx context.Context, c *Client, l *lane, p *roundProof) bool {
	select {
	case <-p.ready:
	case <-ctx.Done():
		return false
	}
	if !p.ok || !p.beginRead() {
		return false
	}
	proven := false
	err := l.cn.do(ctx, func(dst []byte, id uint32) []byte {
		return appendRead(dst, id, l.handle, uint64(p.off), nonceLen)
	}, func(r response) error {
		data, err := decodeData(&r)
		proven = err == nil && bytes.Equal(data, p.nonce[:])
		return err
	})
	// An abandoned READ (ctx: the transfer is over) was answered or will be before the
	// CLOSE that follows on the channel; nothing of the transfer waits any more.
	p.endRead()
	if err != nil {
		c.noteReadBackRefused(err) // capabilities.go: a STATUS refusing the READ
		return false
	}
	return proven
}

// joinUnverified hands a download's sibling to the transfer before its FSTAT has
// answered: the FSTAT is queued first, so on l's channel its reply comes before any
// READ's, and the transfer waits for the verdict (admit) when the first of those does.
func (ls *lanes) joinUnverified(ctx context.Context, l *lane) {
	fstat := l.cn.start(ctx, appendString1(nil, sshfx.TypeFstat, l.cn.newID(), l.handle), nil)
	if fstat.err != nil {
		ls.turnAway(l)
		return
	}
	l.verdict = make(chan struct{})
	ls.joins <- l
	var a sshfx.Attrs
	err := fstat.take(ctx, func(r response) (err error) {
		a, err = decodeAttrs("FSTAT", &r)
		return err
	})
	if err == nil {
		own, oerr := ls.ownAttrs(ctx)
		l.proven = oerr == nil && sameFileAttrs(&own, &a)
	}
	close(l.verdict)
}

// ownAttrs is the FSTAT of the File's own handle, asked once per transfer.
func (ls *lanes) ownAttrs(ctx context.Context) (sshfx.Attrs, error) {
	ls.ownOnce.Do(func() { ls.own, ls.ownErr = ls.f.fstat(ctx) })
	return ls.own, ls.ownErr
}

// sameFileAttrs reports whether got, the attributes of a file reopened by name, can
// be of the file want describes (its own FSTAT, or the Lstat that was checked): of
// size, owner, permissions and modification time, each that want has, got must have
// and match, and want must have a size or a modification time, or nothing would tell
// two files apart. The access time is left out: reading a file may move it. Striping
// (joinUnverified) and Resume (resumeRemotePart) both prove a reopen with it.
func sameFileAttrs(want, got *sshfx.Attrs) bool {
	const compared = sshfx.AttrSize | sshfx.AttrUIDGID | sshfx.AttrPermissions | sshfx.AttrACModTime
	if want.Flags&^got.Flags&compared != 0 || want.Flags&(sshfx.AttrSize|sshfx.AttrACModTime) == 0 {
		return false
	}
	switch {
	case want.Has(sshfx.AttrSize) && want.Size != got.Size,
		want.Has(sshfx.AttrUIDGID) && (want.UID != got.UID || want.GID != got.GID),
		want.Has(sshfx.AttrPermissions) && want.Permissions != got.Permissions,
		want.Has(sshfx.AttrACModTime) && want.MTime != got.MTime:
		return false
	}
	return true
}

// admit reports whether replies that came on l may count: always for the File's own
// lane and a proven upload sibling; for a download's sibling once its FSTAT has agreed
// (waiting for the verdict, which its reply, already in, is about to give).
func (l *lane) admit(ctx context.Context) bool {
	if l.verdict == nil {
		return true
	}
	select {
	case <-l.verdict:
		return l.proven
	case <-ctx.Done():
		return false
	}
}

// unproven reports whether r came from a download's sibling whose FSTAT disagreed
// with the File's: then r is released, the sibling dropped and req asked for again.
func (s *readStream) unproven(req chunk, r *response) bool {
	if r.err != nil || req.lane.admit(s.ctx) {
		return false
	}
	r.release()
	s.refuse(req.lane)
	s.redo = append(s.redo, chunk{off: req.off, n: req.n})
	return true
}

// refuse drops a download's sibling whose FSTAT did not agree: its handle is closed
// (after the READs already sent on it, on the same channel) and what it was asked for
// goes to the other lanes.
func (ls *lanes) refuse(l *lane) {
	if ls.dropLane(l) {
		l.cn.closeLater(l.handle)
	}
}

// The upload's side of the proof, on the scheduler's goroutine.

// armProof writes the round's nonce, once a sibling wants it, over the start of the
// next chunk in offset order, which it holds back; it reports whether it took c.
func (ws *writeStream) armProof(c filledChunk) bool {
	p := ws.proof
	if p == nil || ws.nonceID != 0 || ws.heldBack != nil || p.settled {
		return false
	}
	select {
	case <-p.wanted:
		p.noticed = true
	default:
		return false
	}
	if c.n < nonceLen {
		p.settle(false) // the source's last bytes: the nonce would grow the file
		return false
	}
	own := ws.all[0]
	if _, err := rand.Read(p.nonce[:]); err != nil {
		p.settle(false)
		return false
	}
	id := own.cn.newID()
	if err := ws.f.startInto(ws.ctx, own.cn, appendWrite(nil, id, own.handle, uint64(c.off), p.nonce[:]), nil, ws.ch); err != nil {
		p.settle(false)
		return false
	}
	p.off = c.off
	ws.nonceID, ws.nonceFor = id, p
	held := c
	ws.heldBack = &held
	return true
}

// wanted is the channel that tells the scheduler a sibling of the round wants the
// nonce, until the scheduler has noticed it; nil otherwise.
func (ws *writeStream) wanted() <-chan struct{} {
	if p := ws.proof; p != nil && !p.noticed && !p.settled {
		return p.wanted
	}
	return nil
}

// nonceDone files the reply to the nonce's WRITE.
func (ws *writeStream) nonceDone(r response) {
	p := ws.nonceFor
	ws.nonceID, ws.nonceFor = 0, nil
	ok := r.err == nil && ws.all[0].cn.check(expectStatus("WRITE", &r)) == nil
	r.release()
	p.settle(ok)
	if !ok {
		ws.releaseHeld()
	}
}

// roundOver ends the round: the held chunk goes out, and a proof never armed is
// refused (nobody waits for it any more).
func (ws *writeStream) roundOver() {
	if p := ws.proof; p != nil && p != ws.nonceFor {
		p.settle(false)
	}
	ws.proof = nil
	ws.releaseHeld()
}

// releaseHeld sends the held chunk next, on the File's own lane: behind the nonce's
// WRITE on the same channel, so its data lands over the nonce.
func (ws *writeStream) releaseHeld() {
	if ws.heldBack == nil {
		return
	}
	c := *ws.heldBack
	ws.heldBack, ws.heldFor = nil, nil
	c.ownLane = true
	ws.resend = append([]filledChunk{c}, ws.resend...)
}

// proofIdle settles what the proof waits for when the transfer has nothing else to
// send: an unarmed proof that no chunk will arm, a held chunk that would otherwise
// hold the transfer's end until the round is over. The same when the held chunk holds
// the next one back (heldBlocks). The chunk goes once no sibling's READ of the nonce
// is left unanswered (readsDrained wakes the scheduler for it).
func (ws *writeStream) proofIdle(filledOpen bool) {
	idle := !filledOpen && len(ws.ready) == 0 && len(ws.resend) == 0 && len(ws.reqs) == 0
	if !idle && !ws.heldBlocks() {
		return
	}
	p := ws.proof
	if p != nil && p != ws.nonceFor {
		p.settle(false)
	}
	if ws.heldBack == nil {
		return
	}
	if p == nil || p.closeReads() {
		ws.releaseHeld()
	} else {
		ws.heldFor = p
	}
}

// heldBlocks reports whether the chunk held for the proof keeps the next chunk from
// going out: the acknowledged prefix cannot pass the held chunk before it is written,
// so a chunk that ends more than W past the held one's start would wait for the round
// to end however long that takes.
func (ws *writeStream) heldBlocks() bool {
	if ws.heldBack == nil {
		return false
	}
	c, ok := ws.ready[ws.nextOff]
	return ok && c.off+int64(c.n) > ws.heldBack.off+ws.span
}

// readsDrained is the channel closed once the siblings' READs of the nonce the held
// chunk waits for are answered; nil when it waits for none.
func (ws *writeStream) readsDrained() <-chan struct{} {
	if ws.heldFor == nil {
		return nil
	}
	return ws.heldFor.drained
}
