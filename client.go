package sftp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

const (
	// defaultDataSize is what the draft guarantees every server accepts (packets of at
	// least 34000 bytes): used when the server does not publish limits@openssh.com.
	defaultDataSize = 32768
	// maxDataSize keeps every request under OpenSSH's 256 KiB message cap with room for
	// the header and a 256-byte handle, like OpenSSH's own client.
	maxDataSize = 261120
	minDataSize = 512
)

type options struct {
	maxInflight  int   // 0: the default window (Client.window)
	maxPacket    int   // 0: negotiate
	memoryLimit  int64 // what one call may hold from server data (budget.go)
	channels     int
	stripeMinRTT time.Duration
	stallGrace   time.Duration // 0: writeStallGrace (tests shorten it)
	// transferMemory is what the buffers of the Client's transfers may hold
	// (transfermemory.go); 0: the default.
	transferMemory int64
	// span and stripeFrom, when not 0, stand for maxSpan and stripeMin: tests lower
	// them, so that transfers of a few MiB do what large ones do.
	span       int64
	stripeFrom int64
	// beforeSiblingOpen, when set, runs before a transfer opens its file on another
	// lane (tests swap the file there).
	beforeSiblingOpen func(name string)
	// wrapStreams, when set, stands between each SSH channel and the Client (tests
	// watch the packets with it).
	wrapStreams func(io.Reader, io.WriteCloser) (io.Reader, io.WriteCloser)

	// dial makes more SSH connections to the server (WithDialer); channelsPerConn is how
	// many channels share one before the Client dials another.
	dial            func(context.Context) (*ssh.Client, error)
	channelsPerConn int
	openPipe        func(context.Context) (io.Reader, io.WriteCloser, error) // WithPipeOpener

	subsystem string      // "" means "sftp"
	command   string      // run instead of a subsystem when not ""
	env       [][2]string // name, value: sent before the subsystem or command
	stderr    io.Writer   // receives the server's standard error; nil discards it

	// For servers that are not POSIX file systems (serveropts.go).
	sequential  bool // WithSequential
	readOnce    bool // WithReadOnce
	largeWrites int  // WithLargeWrites, 0 without

	hashCommand bool // WithHashCommand: Hash may run sha256sum and the like (hashcmd.go)

	keepalive     keepaliveSpec // WithKeepalive (keepalive.go)
	sftpKeepalive time.Duration // WithSFTPKeepalive; 0: off
	// keepaliveAnswered, when set, runs each time a keepalive is answered (tests
	// count them: they are the clock a test of a slow reply waits on).
	keepaliveAnswered func()

	logger *slog.Logger // WithLogger (observe.go); nil: no events
}

// Option configures a Client. Each checks its value and reports a bad one from
// NewClient, before any connection state exists.
type Option func(*options) error

// WithMaxInflight sets how many requests a transfer keeps in flight, summed over the
// channels it stripes over, whatever the link: each holds one request's data at most,
// so n bounds a transfer's memory. Without it a transfer keeps 64 on one channel, and
// where the Client stripes (see WithChannels) 12 for each channel it may use, enough
// to fill each channel's 2 MiB window, within 32 MiB of requests. More helps only
// until the SSH channel windows are full; WithMaxInflight(1) sends one request at a
// time. Whatever n, the transfer's buffers come out of the Client's transfer memory
// (WithTransferMemory), shared by every transfer under way.
func WithMaxInflight(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 4096 {
			return fmt.Errorf("sftp: WithMaxInflight(%d): want 1 to 4096", n)
		}
		o.maxInflight = n
		return nil
	}
}

// WithMaxPacket sets the data bytes per READ or WRITE. By default it is what the
// server's limits@openssh.com allows (261120 on OpenSSH 8.6+), else 32768. A larger
// value than the server allows is lowered to the server's limit. n must be 512 to
// 16 MiB: NewClient refuses a value outside that range (pkg/sftp's MaxPacket took any
// n from 1 up), since requests of a few bytes would cost a round trip per few bytes.
func WithMaxPacket(n int) Option {
	return func(o *options) error {
		if n < minDataSize || n > 16<<20 {
			return fmt.Errorf("sftp: WithMaxPacket(%d): the data bytes per request must be %d to %d", n, minDataSize, 16<<20)
		}
		o.maxPacket = n
		return nil
	}
}

// defaultChannels is how many channels a transfer may stripe over when the caller did
// not choose (WithChannels): 16 windows of 2 MiB carry 320 MiB/s at 100 ms, more than
// two cores move through SSH.
const defaultChannels = 16

// WithChannels sets the most SFTP channels a Client stripes a large transfer over
// (default 16, enough for a 100 ms link): sessions on its SSH connection, and with
// WithDialer on the connections it dials. Within that ceiling a transfer sizes how
// many it uses to the link: none extra below 2 ms round trip, else as many as the
// round trip suggests, more while each doubling still adds speed. NewClientPipe uses
// one unless WithPipeOpener is given. On links where it stripes, these data channels
// carry the files and the Client's first channel is kept for small calls beside them,
// and unless WithMaxInflight says otherwise a transfer keeps 12 requests in flight for
// each channel it may use (see WithMaxInflight).
func WithChannels(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("sftp: WithChannels(%d): want 1 to 64", n)
		}
		o.channels = n
		return nil
	}
}

// WithDialer lets NewClient open more SSH connections to the same server, for more
// channels (see WithChannels). dial must return a new, authenticated connection to
// the server the Client was made for, and give up once ctx is done (ctx bounds the
// dial only). The Client dials:
//   - when the server refuses another session on the connections it has (sshd's
//     MaxSessions, 10 by default; some servers allow one);
//   - to spread channels: each SSH connection is one cipher stream, run by one
//     goroutine here and one sshd process there, so a connection carries at most 8
//     channels (counting the main channel on the caller's connection), and the ninth
//     channel is the first on a new connection. On long links this lets encryption
//     run on several cores at each end.
//
// The Client owns the connections it dialled: Close closes them (never the one given
// to NewClient), and one that dies is dropped, and dialled again for a later channel.
// NewClientPipe ignores it.
func WithDialer(dial func(ctx context.Context) (*ssh.Client, error)) Option {
	return func(o *options) error {
		if dial == nil {
			return errors.New("sftp: WithDialer: nil dial function")
		}
		o.dial = dial
		return nil
	}
}

// WithPipeOpener lets a NewClientPipe Client stripe large transfers over several pipes
// (see WithChannels): open starts another SFTP server and returns its output (r) and
// input (w), for example another `ssh host -s sftp` process, as the pipes given to
// NewClientPipe. Each pipe is a channel that speaks SFTP (INIT) on its own. ctx
// bounds the opening only (it ends when open returns, so a process started with
// exec.CommandContext(ctx) would be killed): open must give up once ctx is done. Close
// closes every w, and every r that is an io.Closer; the caller reaps the processes it
// started (after Close, each sees its input end). NewClient ignores it.
func WithPipeOpener(open func(ctx context.Context) (io.Reader, io.WriteCloser, error)) Option {
	return func(o *options) error {
		if open == nil {
			return errors.New("sftp: WithPipeOpener: nil open function")
		}
		o.openPipe = open
		return nil
	}
}

// WithSubsystem names the SSH subsystem NewClient starts on each session (default
// "sftp"), for servers that offer SFTP under another name. NewClientPipe ignores it.
func WithSubsystem(name string) Option {
	return func(o *options) error {
		if name == "" {
			return errors.New("sftp: WithSubsystem: empty name")
		}
		if o.command != "" {
			return errors.New("sftp: WithSubsystem and WithServerCommand exclude each other")
		}
		o.subsystem = name
		return nil
	}
}

// WithServerCommand makes NewClient run command on each session (an SSH "exec"
// request) instead of starting a subsystem, and speak SFTP on its standard input and
// output: for example "sudo -n /usr/lib/openssh/sftp-server" to serve files as another
// user, or a server that is installed but not configured as a subsystem. The server's
// shell interprets command. Its standard error is discarded unless WithStderr is
// given. NewClientPipe ignores it.
func WithServerCommand(command string) Option {
	return func(o *options) error {
		if command == "" {
			return errors.New("sftp: WithServerCommand: empty command")
		}
		if o.subsystem != "" {
			return errors.New("sftp: WithSubsystem and WithServerCommand exclude each other")
		}
		o.command = command
		return nil
	}
}

// WithEnv asks the server to set the environment variable name to value for the
// SFTP server of each session (an SSH "env" request, sent before the subsystem or
// command starts); it may be given several times. OpenSSH's sshd accepts only the
// names its AcceptEnv allows: NewClient fails with an error naming the variable when
// the server refuses one. NewClientPipe ignores it.
func WithEnv(name, value string) Option {
	return func(o *options) error {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("sftp: WithEnv(%q): not a variable name", name)
		}
		o.env = append(o.env, [2]string{name, value})
		return nil
	}
}

// WithStderr copies what the SFTP server writes to its standard error on each session
// to w (by default it is discarded): with WithServerCommand, for example, to see why
// the command failed. Writes to w come from a goroutine of the SSH session, so w must
// be safe for that; it is not closed. NewClientPipe ignores it: the caller owns the
// server's stderr there.
func WithStderr(w io.Writer) Option {
	return func(o *options) error {
		o.stderr = w
		return nil
	}
}

// Limits are the sizes this client negotiated with the server.
type Limits struct {
	MaxPacket      int // longest packet the server accepts
	MaxRead        int // data bytes per READ this client asks for
	MaxWrite       int // data bytes per WRITE this client sends
	MaxOpenHandles int // 0 when the server sets no limit or did not say
}

// Client is an SFTP client. It is safe for concurrent use.
type Client struct {
	opts   options
	main   *conn
	exts   map[string]string
	limits Limits
	// dataSize is the payload room of a dataPool buffer. Atomic because the pool's New
	// may run on a reader goroutine while start is still negotiating it.
	dataSize atomic.Int64
	dataPool sync.Pool
	mem      transferMemory // the budget of every transfer's buffers (transfermemory.go)

	// readCap is the largest DATA the server has been seen to return when asked for
	// more (0 until a short read is seen). Later transfers start from it, so they do
	// not rediscover a server's read cap one transfer at a time.
	readCap atomic.Int64

	// draftSymlink: the server takes SYMLINK's paths in the draft's order, though it
	// advertises no symlink-order extension (see asyncsshDraftSymlink).
	draftSymlink bool

	// source opens the data channels (channelsource.go); nil for a pipe without
	// WithPipeOpener.
	source     channelSource
	chans      channelPool
	dataOpener dataChannelOpener // opens data channels for files (filechannel.go)
	laneMemory laneMemory        // the lane counts transfers settled on (lanerule.go)
	// knownReadWrite: an upload's sibling opened read-write has been proven here, so
	// the server writes out of order and later rounds write their nonce at once
	// (reopen.go).
	knownReadWrite atomic.Bool
	// facts is what the server was seen to do (capabilities.go); large is
	// WithLargeWrites' size and whether the server takes it (serveropts.go).
	facts serverFacts
	large largeWriteState

	// hashes is what the Client has learned of how the server hashes files (hash.go).
	hashes hashMeans

	// partEnds counts the ends of failed uploads under way, which Close lets finish
	// (partcut.go).
	partEnds partEnds

	// sftpAlive sends WithSFTPKeepalive's requests, and is a pipe's keepalive
	// (keepalive.go); nil when off. The SSH connections' keepalives are the source's.
	sftpAlive *sftpKeepalive

	obs observer // Stats' counters and WithLogger's events (observe.go)

	closeOnce sync.Once
	ids       atomic.Uint32 // request ids, shared by all channels (see conn.ids)
}

// NewClient starts the sftp subsystem on a new session channel of sshConn. The Client
// does not own sshConn: closing the Client closes its channels, not the SSH connection
// (but it does close the connections it dialled itself, see WithDialer).
func NewClient(ctx context.Context, sshConn *ssh.Client, opts ...Option) (*Client, error) {
	if sshConn == nil {
		return nil, errors.New("sftp: NewClient: nil *ssh.Client")
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	src := newSSHChannels(c, sshConn)
	c.source = src
	c.draftSymlink = asyncsshDraftSymlink(sshConn.ServerVersion(), sshConn.ClientVersion())
	main, err := src.first(ctx)
	if err != nil {
		src.close()
		return nil, err
	}
	if _, err := c.start(ctx, main); err != nil {
		src.close()
		return nil, err
	}
	c.sftpAlive = startSFTPKeepalive(main, c.opts.sftpKeepalive, keepaliveSpec{}, nil, c.opts.keepaliveAnswered)
	return c, nil
}

// NewClientPipe speaks SFTP over r and w, for example to a local sftp-server process.
// Close closes w, and r too if it is an io.Closer. It uses the one pair of pipes,
// unless WithPipeOpener gives it a way to open more for striping.
func NewClientPipe(ctx context.Context, r io.Reader, w io.WriteCloser, opts ...Option) (*Client, error) {
	if r == nil || w == nil {
		return nil, errors.New("sftp: NewClientPipe: nil reader or writer")
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	closer, closable := pipeCloser(r, w)
	// A pipe has no SSH layer: its keepalive is an SFTP request, judged against what
	// the channel reads (keepalive.go). Only when asked for.
	var judge keepaliveSpec
	var life *lifeClock
	if ka := c.opts.keepalive; ka.set && ka.interval > 0 {
		judge, life = ka, newLifeClock()
	}
	main, err := newConn(ctx, life.reader(r), w, closer, closable, &c.dataPool)
	if err != nil {
		return nil, err
	}
	if c.opts.openPipe == nil {
		c.opts.channels = 1
	} else {
		c.source = newPipeChannels(c)
	}
	if _, err := c.start(ctx, main); err != nil {
		if c.source != nil {
			c.source.close()
		}
		return nil, err
	}
	c.sftpAlive = startSFTPKeepalive(main, c.opts.sftpKeepalive, judge, life, c.opts.keepaliveAnswered)
	return c, nil
}

func newClient(opts []Option) (*Client, error) {
	c := &Client{opts: options{channels: defaultChannels, stripeMinRTT: defaultStripeMinRTT,
		channelsPerConn: defaultChannelsPerConn, memoryLimit: defaultMemoryLimit,
		keepalive: keepaliveSpec{interval: defaultKeepaliveInterval, count: defaultKeepaliveCount}}}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c.opts); err != nil {
			return nil, err
		}
	}
	c.obs.log, c.facts.obs = c.opts.logger, &c.obs
	c.dataSize.Store(defaultDataSize)
	c.mem.init(cmp.Or(c.opts.transferMemory, defaultTransferMemory))
	c.mem.idle.pool = &c.dataPool
	c.dataPool.New = func() any {
		c.mem.idle.fresh.Add(1)
		b := make([]byte, int(c.dataSize.Load())+packetSlack)
		return &b
	}
	return c, nil
}

// start finishes construction: records extensions and negotiates sizes.
func (c *Client) start(ctx context.Context, main *conn) (*Client, error) {
	c.main = main
	c.obs.track(main, false)
	main.ids = &c.ids
	main.stallGraceSet.Store(int64(c.opts.stallGrace))
	c.exts = main.exts
	c.chans.init(main)
	lim := Limits{MaxPacket: 34000, MaxRead: defaultDataSize, MaxWrite: defaultDataSize}
	serverRead, serverWrite := defaultDataSize, defaultDataSize
	if c.hasExt(extLimits) {
		sl, err := c.queryLimits(ctx)
		if err != nil {
			main.close()
			return nil, err
		}
		// 0 means "no fixed limit": keep the default rather than trust it blindly
		// (OpenSSH's client falls back to 64-byte requests there, which is worse).
		lim.MaxPacket = clampLimit(sl.MaxPacket, 34000, 1<<30)
		serverRead = min(clampLimit(sl.MaxRead, defaultDataSize, maxDataSize), lim.MaxPacket-packetSlack)
		serverWrite = min(clampLimit(sl.MaxWrite, defaultDataSize, maxDataSize), lim.MaxPacket-packetSlack)
		serverRead, serverWrite = max(serverRead, minDataSize), max(serverWrite, minDataSize)
		lim.MaxOpenHandles = int(min(sl.MaxOpenHandles, 1<<31-1))
	}
	c.noteLimits()
	lim.MaxRead, lim.MaxWrite = serverRead, serverWrite
	if n := c.opts.maxPacket; n > 0 {
		lim.MaxRead, lim.MaxWrite = min(n, serverRead), min(n, serverWrite)
	}
	c.limits = lim
	c.dataSize.Store(int64(max(lim.MaxRead, c.setLargeWrites(lim.MaxWrite))))
	main.maxPacket.Store(c.maxReply())
	return c, nil
}

func clampLimit(v uint64, def, hi int) int {
	if v == 0 {
		return def
	}
	return int(min(v, uint64(hi)))
}

type serverLimits struct{ MaxPacket, MaxRead, MaxWrite, MaxOpenHandles uint64 }

func (c *Client) queryLimits(ctx context.Context) (serverLimits, error) {
	var sl serverLimits
	err := c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendExtended(dst, id, extLimits)
	}, func(r response) error {
		d, err := decodeExtendedReply("limits", &r)
		if err != nil {
			return err
		}
		sl = serverLimits{d.Uint64(), d.Uint64(), d.Uint64(), d.Uint64()}
		if err := d.Done(); err != nil {
			return &ProtocolError{Op: "limits", Reason: err}
		}
		return nil
	})
	return sl, err
}

// Close closes every SFTP channel of the Client, and the SSH connections it dialled
// (WithDialer) or the pipes it opened (WithPipeOpener). Calls in flight fail with an
// error that matches net.ErrClosed. Close is idempotent.
//
// First, Close lets the ends of failed uploads that went on in the background after
// their call returned (a Put whose ctx ended: the cut of its part file, which keeps
// the part resumable from its end, and the CLOSE of its handles) finish, waiting for
// them at most 2 s plus four round trips, what a healthy server needs; past that
// they are cut off, and the part is resumed from 64 MiB before its end (see Resume).
// Other work in the background (the CLOSE of a handle nobody waits for) is not
// waited for. So a program that cancels its transfers on an interrupt and then closes
// its Client leaves its part files cut and marked, at the cost of that wait at most.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.partEnds.wait(c.main.stallGrace())
		c.sftpAlive.halt()
		c.dataOpener.stop()
		c.chans.closeAll()
		if c.source != nil {
			c.source.close()
		}
		c.dataOpener.wait()
		c.mem.idle.stop()
	})
	return nil
}

// Extensions returns the extensions the server advertised in VERSION (name to data).
func (c *Client) Extensions() map[string]string {
	m := make(map[string]string, len(c.exts))
	for k, v := range c.exts {
		m[k] = v
	}
	return m
}

// Limits returns the sizes negotiated with the server.
func (c *Client) Limits() Limits { return c.limits }

// hasExt reports whether the server advertised ext with the version this client knows.
func (c *Client) hasExt(name string) bool {
	v, ok := c.exts[name]
	return ok && v == extVersions[name]
}

func errUnsupportedExt(name string) error {
	return fmt.Errorf("sftp: the server does not offer %s: %w", name, errors.ErrUnsupported)
}

// maxReply is the longest reply a channel of c accepts: enough for a DATA reply to the
// largest READ this client sends, and never less than OpenSSH's own message cap.
func (c *Client) maxReply() uint32 {
	return uint32(max(defaultMaxReply, int(c.dataSize.Load())+packetSlack))
}

// dataBuf returns a pooled buffer with room for one READ reply or WRITE packet. A
// buffer made before the sizes were negotiated may be too small: it is dropped.
func (c *Client) dataBuf() *[]byte {
	need := int(c.dataSize.Load()) + packetSlack
	for {
		bp := c.dataPool.Get().(*[]byte)
		if cap(*bp) >= need {
			*bp = (*bp)[:need]
			return bp
		}
	}
}
