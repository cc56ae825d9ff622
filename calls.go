package sftp

import (
	"context"
)

// Requests sent together and their replies collected: a request sent with its own
// reply channel (sendReq), waited for (waitReq), or a batch of them waited for in
// order (collect). The whole-file calls, small-file transfers, listings and lanes
// pipeline their requests this way.

// pendingReq is one request sent, with the channel its reply comes on.
type pendingReq struct {
	id   uint32
	ch   chan response
	sent bool
	err  error // why it was not sent: the channel died, ctx ended
}

// encoder builds the packet of request id for sendThenClose; ref, if not nil, is told
// once the channel no longer reads the packet.
type encoder func(id uint32) (pkt []byte, ref packetRef)

// unshared makes an encoder of build, for a packet in a buffer nobody reuses.
func unshared(build func(id uint32) []byte) encoder {
	return func(id uint32) ([]byte, packetRef) { return build(id), nil }
}

// sendReq sends pkt, request id, on cn, with a reply channel from cn's pool. On an
// error nothing was sent, and the channel is back in the pool. pkt must not be reused
// unless it is no longer than copyMax (see conn.send).
func sendReq(ctx context.Context, cn *conn, id uint32, pkt []byte) (pendingReq, error) {
	return sendReqRef(ctx, cn, id, pkt, nil)
}

// sendReqRef is sendReq for a packet whose buffer the caller reuses once ref is told
// (conn.sendRef).
func sendReqRef(ctx context.Context, cn *conn, id uint32, pkt []byte, ref packetRef) (pendingReq, error) {
	ch, _ := cn.replyChans.Get().(chan response)
	if ch == nil {
		ch = make(chan response, 1)
	}
	if err := cn.sendRef(ctx, id, pkt, ch, ref); err != nil {
		cn.replyChans.Put(ch) // not registered: nothing will come
		return pendingReq{id: id, err: err}, err
	}
	return pendingReq{id: id, ch: ch, sent: true}, nil
}

// waitReq waits, while ctx lasts, for the reply to r, and puts its channel back in
// cn's pool once the reply has been taken from it (see conn.replyChans).
func waitReq(ctx context.Context, cn *conn, r pendingReq) (response, error) {
	resp, clean, err := cn.waitReply(ctx, r.id, r.ch)
	if clean {
		cn.replyChans.Put(r.ch)
	}
	return resp, err
}

// collect waits for the replies to reqs in turn while ctx lasts; once it ends, the
// rest are abandoned (their replies dropped). Each reply or error is passed to take,
// which must release the response.
func collect(ctx context.Context, cn *conn, reqs []pendingReq, take func(i int, r response, err error)) {
	for i, r := range reqs {
		if !r.sent {
			continue
		}
		if ctx.Err() != nil {
			cn.abandon(r.id, r.ch)
			take(i, response{}, ctxError(ctx, ""))
			continue
		}
		resp, err := waitReq(ctx, cn, r)
		take(i, resp, err)
	}
}

// takeReady passes to take the values already waiting on ch, without waiting for
// more, until none is ready or take returns false.
func takeReady[T any](ch <-chan T, take func(T) bool) {
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
