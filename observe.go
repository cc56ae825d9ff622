package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Observability: what a service running a Client for days wants to see without a
// debugger. Two things, both cheap enough to leave on:
//
//   - Stats: counters per Client (bytes, requests, replies, errors, data channels,
//     dials, keepalive misses, reconnects), plain atomics a service copies into
//     whatever it exports (expvar, Prometheus, OpenTelemetry), so the package needs no
//     metrics dependency. Each channel's reader and writer add to them once per reply
//     and once per Write: no allocation, no lock.
//   - WithLogger: connection-level events (a data channel opened, closed or given up,
//     an SSH connection dialled or dropped, a keepalive unanswered, a server
//     capability the Client falls back from, the Client failing), never one per
//     request. Off by default: with no logger no event builds an attribute or calls
//     anything, and the per-request paths never reach a log call at all.
//
// Every event starts at a one-line hook where it happens (conn.fail, the channel
// pool, the channel source, the keepalive, serverFacts.refuse); the hooks lead here.

// WithLogger makes the Client log its connection-level events to l; nil (the
// default) logs nothing. Events are rare (a handful per connection, never one per
// request), so l may write synchronously. Messages and attribute keys are stable:
//
//	Info  "sftp: data channel opened"     channel, open
//	Info  "sftp: data channel closed"     channel, open
//	Warn  "sftp: data channel given up"   channel, open, err
//	Info  "sftp: connection dialled"      connection
//	Warn  "sftp: dial failed"             err
//	Info  "sftp: connection closed"       connection
//	Warn  "sftp: connection dropped"      connection, err
//	Warn  "sftp: keepalive unanswered"    connection, silent, limit
//	Warn  "sftp: capability fallback"     capability, err or size
//	Error "sftp: client failed"           err
//	Info  "sftp: reconnected"
//
// channel numbers a data channel within the Client (from 1; the main channel,
// which carries small calls, is 0 and its end is "client failed"); open is how many
// data channels are open after the event; connection numbers an SSH connection (0
// is the one given to NewClient, 1 and up those dialled with WithDialer); err is the
// cause; silent is how long the connection has sent nothing, limit how long it may
// before it is given up (WithKeepalive's interval times count); capability names
// what the server does not do, which the Client now does without: a Refusal's
// String with err the server's STATUS (logged the first time only, as Capabilities
// records it), "limits@openssh.com" when the server publishes no limits (size: the
// data bytes per request, 32768), "read cap" when it returns less than asked for
// (size: what it returns), "phantom directories". A data channel closed by the
// Client (Close, or for lying idle) is "closed"; one that died (reset, the server's exit, a protocol
// error, a stalled write, a silent connection) is "given up", and transfers go on
// over the others. The handler may call Stats, but no other method of the Client:
// some events are logged with a lock of the Client held.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		o.logger = l
		return nil
	}
}

// Stats is a snapshot of a Client's counters (Client.Stats). Counters only grow,
// except DataChannelsOpen, which is a gauge; each is read atomically, but the
// snapshot is not taken at one instant.
type Stats struct {
	// BytesSent and BytesReceived count the bytes of SFTP packets written to and read
	// from all the Client's channels (the SFTP payload of the SSH channels: headers
	// and data, without SSH's framing and the INIT/VERSION exchange).
	BytesSent     uint64
	BytesReceived uint64
	// Requests counts the requests written to the server, Replies the replies read,
	// on all channels (keepalive REALPATHs included, INIT/VERSION not). A request
	// withdrawn before it went out (its ctx ended) is not counted.
	Requests uint64
	Replies  uint64
	// Errors counts the STATUS replies other than OK and EOF (the server refused or
	// failed a request), and the protocol errors that closed a channel.
	Errors uint64
	// DataChannelsOpen is how many data channels (the SFTP channels beside the main
	// one, for striping and for files on a long link) are open now;
	// DataChannelsOpened counts those ever opened, and DataChannelsGivenUp those
	// that died under the Client (reset, the server's exit, a protocol error, a
	// stalled write, a silent connection) rather than being closed by it.
	DataChannelsOpen    int64
	DataChannelsOpened  uint64
	DataChannelsGivenUp uint64
	// Dials counts the SSH connections the Client dialled (WithDialer) and got.
	Dials uint64
	// KeepaliveMisses counts keepalive intervals that passed with a probe out and
	// nothing from the server on its SSH connection (see WithKeepalive): each is one
	// "sftp: keepalive unanswered" event. A pipe Client's probe counts none.
	KeepaliveMisses uint64
	// Reconnects counts the times the Client was reconnected after its connection
	// died.
	Reconnects uint64
}

// Stats returns the Client's counters. It sends nothing and is cheap: a service may
// call it on every scrape.
func (c *Client) Stats() Stats {
	o := &c.obs
	return Stats{
		BytesSent:           o.bytesSent.Load(),
		BytesReceived:       o.bytesReceived.Load(),
		Requests:            o.requests.Load(),
		Replies:             o.replies.Load(),
		Errors:              o.errors.Load(),
		DataChannelsOpen:    o.open.Load(),
		DataChannelsOpened:  o.opened.Load(),
		DataChannelsGivenUp: o.givenUp.Load(),
		Dials:               o.dials.Load(),
		KeepaliveMisses:     o.misses.Load(),
		Reconnects:          o.reconnects.Load(),
	}
}

// cacheLine separates counters written by different goroutines, so that a writer and
// a reader adding at once do not bounce one cache line between cores.
type cacheLine [64]byte

// observer is a Client's counters and logger.
type observer struct {
	log *slog.Logger // nil: no events

	// The channels' writers'.
	bytesSent atomic.Uint64
	requests  atomic.Uint64
	_         cacheLine
	// The channels' readers'.
	bytesReceived atomic.Uint64
	replies       atomic.Uint64
	errors        atomic.Uint64
	_             cacheLine
	// The rest change a few times per connection.
	open       atomic.Int64
	opened     atomic.Uint64
	givenUp    atomic.Uint64
	dials      atomic.Uint64
	misses     atomic.Uint64
	reconnects atomic.Uint64
	channels   atomic.Int64 // numbers handed to data channels
	links      atomic.Int64 // numbers handed to dialled connections
}

// channelTag is what the observer knows of one of the Client's channels: which it is,
// and whether it still counts as open.
type channelTag struct {
	o    *observer
	num  int64 // 0: the main channel
	open atomic.Bool
}

// track starts counting cn as the Client's main channel or (data) a data channel,
// before any request is sent on it. A channel that failed before it was tagged
// is ended here, as fail found no tag to end.
func (o *observer) track(cn *conn, data bool) {
	t := &channelTag{o: o}
	if data {
		t.num = o.channels.Add(1)
		t.open.Store(true)
		open := o.open.Add(1)
		o.opened.Add(1)
		if o.log != nil {
			o.log.LogAttrs(bg, slog.LevelInfo, "sftp: data channel opened", slog.Int64("channel", t.num), slog.Int64("open", open))
		}
	}
	cn.tag.Store(t)
	if cn.failed() != nil {
		t.ended(cn.failCause())
	}
}

// bg is the context events are logged with: they belong to the Client, not to a call.
var bg = context.Background()

// failCause is the cause c failed with (nil while it is alive).
func (c *conn) failCause() error {
	var ce *closedError
	if errors.As(c.failed(), &ce) {
		return ce.cause
	}
	return nil
}

// ended is conn.fail's hook: a protocol error counts as an error, a data channel
// stops counting as open (once), and the main channel's death is the Client's.
func (t *channelTag) ended(cause error) {
	if t == nil {
		return
	}
	o := t.o
	var pe *ProtocolError
	if errors.As(cause, &pe) {
		o.errors.Add(1)
	}
	// Closed by the Client: at Close, or for lying idle (channelidle.go).
	closed := errors.Is(cause, errClientClosed) || errors.Is(cause, errChannelRetired)
	if t.num == 0 {
		if !closed && o.log != nil {
			o.log.LogAttrs(bg, slog.LevelError, "sftp: client failed", slog.Any("err", cause))
		}
		return
	}
	if !t.open.CompareAndSwap(true, false) {
		return
	}
	open := o.open.Add(-1)
	if !closed {
		o.givenUp.Add(1)
	}
	switch {
	case o.log == nil:
	case closed:
		o.log.LogAttrs(bg, slog.LevelInfo, "sftp: data channel closed", slog.Int64("channel", t.num), slog.Int64("open", open))
	default:
		o.log.LogAttrs(bg, slog.LevelWarn, "sftp: data channel given up", slog.Int64("channel", t.num), slog.Int64("open", open), slog.Any("err", cause))
	}
}

// writing counts the packets of b.entries[i..j], which the channel's writer is about
// to write (its hook): before the Write, so that a reply is never counted before its
// request. INIT, seq 1 on every channel, is no request and is not counted.
func (c *conn) writing(b *wqueue, i, j int) {
	t := c.tag.Load()
	if t == nil {
		return
	}
	e, last := &b.entries[i], &b.entries[j]
	packets, bytes := uint64(j-i+1), uint64(len(e.pkt))
	if e.copied() {
		bytes = uint64(last.off + last.n - e.off)
	}
	if b.base+uint64(i) == 1 {
		packets, bytes = packets-1, bytes-uint64(e.n)
	}
	t.o.bytesSent.Add(bytes)
	t.o.requests.Add(packets)
}

// sawReply counts a reply of length n (the reader's hook); body is what follows
// its id, nil when it was not read into memory.
func (c *conn) sawReply(n uint32, typ sshfx.PacketType, body []byte) {
	t := c.tag.Load()
	if t == nil {
		return
	}
	t.o.bytesReceived.Add(uint64(n) + 4)
	t.o.replies.Add(1)
	if typ == sshfx.TypeStatus && len(body) >= 4 && StatusCode(binary.BigEndian.Uint32(body)) > StatusEOF {
		t.o.errors.Add(1)
	}
}

// dialled is the hook of a dial for a connection (WithDialer): on success, l is
// numbered and counted.
func (o *observer) dialled(l *sshLink, err error) {
	if err == nil {
		l.num = o.links.Add(1)
		o.dials.Add(1)
	}
	switch {
	case o.log == nil:
	case err == nil:
		o.log.LogAttrs(bg, slog.LevelInfo, "sftp: connection dialled", slog.Int64("connection", l.num))
	case !errors.Is(err, errClientClosed):
		o.log.LogAttrs(bg, slog.LevelWarn, "sftp: dial failed", slog.Any("err", err))
	}
}

// linkEnded is the hook of an SSH connection the Client stopped using: closed by the
// Client (closing), else dropped with cause.
func (o *observer) linkEnded(l *sshLink, cause error, closing bool) {
	switch {
	case o.log == nil:
	case closing:
		o.log.LogAttrs(bg, slog.LevelInfo, "sftp: connection closed", slog.Int64("connection", l.num))
	default:
		o.log.LogAttrs(bg, slog.LevelWarn, "sftp: connection dropped", slog.Int64("connection", l.num), slog.Any("err", cause))
	}
}

// missed counts a keepalive interval gone unanswered on connection num, silent for
// silent of the limit.
func (o *observer) missed(num int64, silent, limit time.Duration) {
	o.misses.Add(1)
	if o.log != nil {
		o.log.LogAttrs(bg, slog.LevelWarn, "sftp: keepalive unanswered", slog.Int64("connection", num),
			slog.Duration("silent", silent), slog.Duration("limit", limit))
	}
}

// The capability fallbacks: something the server does not do, which the Client now
// does without.
const fallbackMsg = "sftp: capability fallback"

// refused logs a kind of request the server was first seen to refuse (serverFacts).
func (o *observer) refused(r Refusal, err error) {
	if o.log != nil {
		o.log.LogAttrs(bg, slog.LevelWarn, fallbackMsg, slog.String("capability", r.String()), slog.Any("err", err))
	}
}

// noLimits logs a server that publishes no limits@openssh.com: requests carry the
// draft's 32768 bytes.
func (o *observer) noLimits() {
	if o.log != nil {
		o.log.LogAttrs(bg, slog.LevelWarn, fallbackMsg, slog.String("capability", extLimits), slog.Int("size", defaultDataSize))
	}
}

// readCapLearned logs a server seen to return at most size bytes per READ.
func (o *observer) readCapLearned(size int64) {
	if o.log != nil {
		o.log.LogAttrs(bg, slog.LevelWarn, fallbackMsg, slog.String("capability", "read cap"), slog.Int64("size", size))
	}
}

// phantomDirs logs a server that reports directories at names that do not exist.
func (o *observer) phantomDirs() {
	if o.log != nil {
		o.log.LogAttrs(bg, slog.LevelWarn, fallbackMsg, slog.String("capability", "phantom directories"))
	}
}

// noteReconnect records that c replaces prev, a Client whose connection died, for a
// wrapper that reconnects (reconnect.go): c's counters go on from prev's, so that
// Stats read through the wrapper only grow, plus one reconnect, which is logged. The
// gauge is not carried: prev's channels are gone. prev may be nil (a reconnect
// counted without a predecessor's counters).
func (c *Client) noteReconnect(prev *Client) {
	o := &c.obs
	if prev != nil {
		p := prev.Stats()
		o.bytesSent.Add(p.BytesSent)
		o.bytesReceived.Add(p.BytesReceived)
		o.requests.Add(p.Requests)
		o.replies.Add(p.Replies)
		o.errors.Add(p.Errors)
		o.opened.Add(p.DataChannelsOpened)
		o.givenUp.Add(p.DataChannelsGivenUp)
		o.dials.Add(p.Dials)
		o.misses.Add(p.KeepaliveMisses)
		o.reconnects.Add(p.Reconnects)
	}
	o.reconnects.Add(1)
	if o.log != nil {
		o.log.LogAttrs(bg, slog.LevelInfo, "sftp: reconnected")
	}
}

// noteLimits logs a server that publishes no limits@openssh.com (Client.start).
func (c *Client) noteLimits() {
	if !c.hasExt(extLimits) {
		c.obs.noLimits()
	}
}

// learnReadCap keeps size as the server's read cap (read.go), and logs it when it
// is news.
func (c *Client) learnReadCap(size int64) {
	if c.readCap.Swap(size) != size {
		c.obs.readCapLearned(size)
	}
}

// look is the keepalive judge's look at the probe out, at now (life's clock): each
// interval the probe has been out unanswered, with nothing else from the server for
// at least as long, is a miss, noted once. It returns how long the judge waits before
// it looks again: until the probe's next interval or its deadline, whichever is
// first. Called with k.mu held.
func (k *sshKeepalive) look(now int64) time.Duration {
	interval := int64(k.spec.interval)
	out := now - k.sent
	if n := out / interval; n > k.misses {
		k.misses = n
		if silent := now - k.life.last.Load(); silent >= interval && k.missed != nil {
			k.missed(time.Duration(silent))
		}
	}
	next := k.sent + (out/interval+1)*interval
	return time.Duration(max(0, min(next, k.deadline())-now))
}
