package sftp

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Lanes. A transfer moves its requests over one lane or several: a lane is an SFTP
// channel with the file's handle on it (the File's own, or a sibling the transfer
// opened for striping, see channelpool.go). The same code drives one lane and many.

// lane is one channel a transfer uses, with the file's handle on that channel.
type lane struct {
	cn      *conn
	handle  string
	out     int  // requests in flight on this lane; the scheduler's alone
	sibling bool // opened by the transfer, which closes it at the end

	// A download's sibling joins before its FSTAT is compared with the File's
	// (reopen.go): verdict is closed once it has been, proven set before.
	verdict chan struct{}
	proven  bool

	// unsent counts an upload's WRITEs queued on the lane's channel and not yet
	// written (write.go): each channel has its own writer, so a lane whose window is
	// exhausted holds back only its own WRITEs, and maxUnsent keeps new ones off it.
	unsent atomic.Int32
}

// lanes is the part of a transfer that knows its channels: it picks the lane for each
// request, takes in lanes as they are opened, sizes their number (lanerule.go), drops
// a sibling whose channel died, and closes the siblings at the end.
type lanes struct {
	f *File
	// ctx is the transfer's: every wait of it ends with it (errors.go). The File's life
	// for its io methods, the call's ctx for Get and Put; an upload, and a download that
	// writes at offsets, replace it with their errgroup's, derived from it.
	ctx    context.Context
	ch     chan response  // every reply of the transfer, from every lane
	all    []*lane        // all[0] is the File's own lane
	active int            // requests go to all[:active]; the rest stay open, idle
	pflags sshfx.OpenFlag // how siblings are opened: READ, or READ|WRITE without CREAT/TRUNC
	upload bool
	lost   bool // an upload's sibling died with WRITEs that may still land (siblingEnd)

	ctl    laneCtl
	joins  chan *lane   // from the opener: new lanes, and nil when a round is done
	want   chan laneAsk // to the opener: the lane count to reach, and how to prove them
	stop   context.CancelFunc
	opened chan struct{} // closed when the opener is done

	proof *roundProof // an upload's current round's (reopen.go); the scheduler's

	// A download's own FSTAT, which its siblings' must match (reopen.go).
	ownOnce sync.Once
	own     sshfx.Attrs
	ownErr  error
}

func (f *File) newLanes(ctx context.Context, window int, pflags sshfx.OpenFlag, upload bool) lanes {
	return lanes{
		f:      f,
		ctx:    ctx,
		ch:     make(chan response, window+1),
		all:    []*lane{{cn: f.cn, handle: f.handle}},
		active: 1,
		pflags: pflags,
		upload: upload,
	}
}

// stripeMin is how large a transfer must be before it stripes: enough that the few
// round trips of opening handles are paid back.
const stripeMin = 8 << 20

// minStripe is how large a transfer must be before it stripes: stripeMin (tests lower
// it).
func (c *Client) minStripe() int64 {
	if c.opts.stripeFrom > 0 {
		return c.opts.stripeFrom
	}
	return stripeMin
}

// canStripe reports whether this transfer may add lanes.
func (ls *lanes) canStripe() bool {
	c := ls.f.c
	return ls.joins == nil && !ls.f.append && c.stripes() && !c.oneLane(ls.upload)
}

// stripe starts adding lanes, as many as the rule starts with, in the background.
func (ls *lanes) stripe() {
	if !ls.canStripe() {
		return
	}
	c := ls.f.c
	ceiling := c.opts.channels
	// Room for every lane the opener can add and one end-of-round marker: a round is
	// asked for only once the one before has ended.
	ls.joins = make(chan *lane, ceiling+1)
	ls.want = make(chan laneAsk, 1)
	ls.opened = make(chan struct{})
	ctx, cancel := context.WithCancel(ls.ctx)
	ls.stop = cancel
	rtt := time.Duration(c.main.minRTT.Load())
	ls.ask(ls.ctl.start(rtt, ceiling, c.laneMemory.of(ls.upload)))
	go ls.opener(ctx)
}

// opener opens the file on channels of the Client until the lanes reach the count
// asked for, each round ending with a nil on joins. Each lane is proven to be on the
// File's file before it counts (reopen.go).
func (ls *lanes) opener(ctx context.Context) {
	defer close(ls.opened)
	c := ls.f.c
	var mu sync.Mutex
	used := map[*conn]bool{ls.f.cn: true}
	for {
		var a laneAsk
		select {
		case a = <-ls.want:
		case <-ctx.Done():
			return
		}
		c.eachChannel(ctx, a.n, func(cn *conn) {
			mu.Lock()
			taken := used[cn]
			used[cn] = true
			mu.Unlock()
			if !taken {
				ls.openSibling(ctx, cn, a)
			}
		})
		ls.joins <- nil
	}
}

// join takes what the opener sent: a new lane, or the end of a round (nil).
func (ls *lanes) join(l *lane) {
	if l == nil {
		ls.ctl.roundDone(len(ls.all))
	} else {
		ls.all = append(ls.all, l)
	}
	ls.setActive()
}

func (ls *lanes) setActive() {
	ls.active = len(ls.all)
	if ls.ctl.target > 0 {
		ls.active = max(1, min(ls.active, ls.ctl.target))
	}
}

// moved tells the lane rule that n bytes of the transfer are done.
func (ls *lanes) moved(n int) {
	if ls.joins == nil {
		return
	}
	if grow := ls.ctl.moved(n, ls.active); grow > 0 {
		ls.ask(grow)
	}
	ls.setActive()
}

// pick returns the working lane with the fewest requests in flight: a lane held back
// by its window collects requests, so new ones go to the others.
func (ls *lanes) pick() *lane {
	best := ls.all[0]
	for _, l := range ls.all[1:ls.active] {
		if l.out < best.out {
			best = l
		}
	}
	return best
}

// survives reports whether the transfer can go on after a request on l failed with
// err: l is a sibling whose channel is gone, and the transfer is alive. The caller
// then drops l and asks again on the lanes left. The File's own lane, a protocol
// violation or the transfer's own end are failures of the transfer.
func (ls *lanes) survives(l *lane, err error) bool {
	return l.sibling && channelLost(err) && ls.ctx.Err() == nil
}

// channelLost reports whether err is a request's failure with its channel (closed,
// or its connection gone), not a server's answer nor a reply that broke the channel.
func channelLost(err error) bool {
	var pe *ProtocolError
	return errors.Is(err, net.ErrClosed) && !errors.As(err, &pe)
}

// dropLane takes a sibling whose channel died out of the transfer; false if it was out
// already. Its requests still in flight come back failed, one by one.
func (ls *lanes) dropLane(l *lane) bool {
	i := slices.Index(ls.all, l)
	if i <= 0 {
		return false
	}
	ls.all = slices.Delete(ls.all, i, i+1)
	ls.lost = true
	ls.setActive()
	return true
}

// forget abandons the given requests (grouped by lane) and drains their replies.
func (ls *lanes) forget(ids map[*lane][]uint32) {
	inTransit := 0
	for l, list := range ids {
		inTransit += l.cn.forget(list)
		l.out = 0
	}
	for ; inTransit > 0; inTransit-- {
		r := <-ls.ch
		r.release()
	}
	drainReady(ls.ch, func(r response) bool { r.release(); return true })
}

// siblingBound is the ctx that bounds the waits for the CLOSEs of f's sibling handles
// (finish, turnAway): the call's ctx (File.callCtx), and the File's deadline, which
// ends it with errDeadline. Not the transfer's own ctx, which for an upload is its
// errgroup's, ended once the group is done, nor the File's life, which Close ends: a
// transfer that Close stopped still returns with its siblings' handles closed.
func (f *File) siblingBound() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(f.callCtx)
	passed := f.life.deadlinePassed()
	go func() {
		select {
		case <-passed:
			cancel(errDeadline)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// finish stops the opener and closes every sibling handle, waiting for the replies:
// a transfer leaves no handle open. It returns the first CLOSE failure, which matters
// for uploads (a server may report a failed write only at close).
func (ls *lanes) finish() error {
	if ls.stop != nil {
		ls.stop()
		<-ls.opened
		drainReady(ls.joins, func(l *lane) bool {
			if l != nil {
				ls.all = append(ls.all, l)
			}
			return true
		})
	}
	waiting, first := ls.sendCloses()
	// Match replies by id: a reply a dying channel had already handed over may still
	// turn up here, and must not be taken for a CLOSE's. The wait is bounded as every
	// wait of the call is (siblingBound): for a Get, Put, ReadFile or WriteFile by its
	// ctx, for a File's io methods by its deadline, as a server that never answers a
	// CLOSE must not hold the call; otherwise the transfer returns with every handle
	// closed. The replies given up are dropped when they come.
	collect := func(r response) {
		if cn := waiting[r.id]; cn != nil {
			delete(waiting, r.id)
			err := r.err
			if err == nil {
				err = cn.check(expectStatus("CLOSE", &r))
			}
			first = firstErr(first, err)
			ls.lost = ls.lost || err != nil
		}
		r.release()
	}
	bound, stop := ls.f.siblingBound()
	defer stop()
	for len(waiting) > 0 {
		// Replies that are here count even once the call's ctx has ended.
		drainReady(ls.ch, func(r response) bool { collect(r); return len(waiting) > 0 })
		if len(waiting) == 0 {
			break
		}
		select {
		case r := <-ls.ch:
			collect(r)
			continue
		case <-bound.Done():
		}
		if !ls.upload {
			forgetCloses(waiting)
			waiting = nil
		}
		break
	}
	if ls.upload {
		// For the cut of the part, should the upload have failed (partcut.go): the
		// CLOSEs still owed are its to wait for.
		ls.f.siblings.Store(&siblingEnd{lost: ls.lost, owed: waiting, ch: ls.ch})
	}
	ls.all = ls.all[:1]
	return first
}

// sendCloses sends the CLOSE of every sibling handle and returns the ones sent (their
// ids, to their conns) and the first failure to send one. A sibling whose channel is
// gone gets none, and counts as lost, as does one whose CLOSE could not go out.
func (ls *lanes) sendCloses() (waiting map[uint32]*conn, first error) {
	waiting = make(map[uint32]*conn, len(ls.all))
	for _, l := range ls.all {
		if !l.sibling {
			continue
		}
		if l.cn.failed() != nil {
			ls.lost = true
			continue
		}
		id := l.cn.newID()
		if err := l.cn.startInto(context.Background(), appendString1(nil, sshfx.TypeClose, id, l.handle), nil, ls.ch); err != nil {
			first = firstErr(first, err)
			ls.lost = true
			continue
		}
		waiting[id] = l.cn
	}
	return waiting, first
}

// forgetCloses gives up on the CLOSE replies still owed (waiting maps their ids to
// their conns). The CLOSEs went out, so the server still closes the handles; the reader
// drops their late replies. Replies already on their way land in ls.ch, which nobody
// reads any more.
func forgetCloses(waiting map[uint32]*conn) {
	byConn := map[*conn][]uint32{}
	for id, cn := range waiting {
		byConn[cn] = append(byConn[cn], id)
	}
	for cn, ids := range byConn {
		cn.forget(ids)
	}
}

// firstErr keeps the first error of several: first, unless it is nil.
func firstErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// drainReady passes to take the values already waiting on ch, without waiting for
// more, until none is ready or take returns false.
func drainReady[T any](ch <-chan T, take func(T) bool) {
	for {
		select {
		case v := <-ch:
			if !take(v) {
				return
			}
		default:
			return
		}
	}
}
