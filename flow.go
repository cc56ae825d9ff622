package sftp

import "time"

// Flow control and tuning: every number that bounds what a transfer keeps in flight,
// and every other tuning number (defaults, worker counts, thresholds), lives here, so
// the arithmetic can be read (and changed) in one place.
//
//   - The window (Client.window, File.window) is how many requests one transfer keeps
//     in flight, summed over its lanes. Each holds at most one pooled data buffer, so it
//     is also what bounds a transfer's memory: window x (request size + packetSlack).
//   - A lane's cap (readLaneCap, writeLaneCap) is how many of those one SSH channel
//     carries at once: about what its flow-control window holds. More would only
//     queue at the server (reads) or inside x/crypto's Write (writes).
//   - maxUnsent is how many WRITEs a lane may have queued on its channel's writer. A lane
//     whose window the server refills slowly (dropbear grants 24 KiB) keeps its
//     packets unsent, and new ones go to the other lanes: that is how the lanes
//     adapt to the window each server really grants, which x/crypto does not expose.

// stripeMin is how large a transfer must be before it stripes: enough that the few
// round trips of opening handles are paid back.
const stripeMin = 8 << 20

// maxSpan (W) bounds how far out of order any transfer writes, summed over all its
// lanes: no byte is written W or more past the transfer's contiguous prefix known
// written (an upload's acknowledged prefix; a download's prefix its writers have
// written to an io.WriterAt), whatever the window, the lanes or the order in which
// servers carry out and answer the requests. So whatever stops a transfer, even a
// killed process that cuts nothing, everything below size-W of what it leaves is
// written, and Resume continues from there (resume.go has the proof).
//
// It is one constant, not a function of WithMaxInflight, WithChannels or the request
// size, because a later run relies on the bound an earlier one kept, whatever options
// either used; for the same reason it may be raised in a later version, never lowered.
// It costs no throughput: it is twice the largest striped window (windowBudget), so a
// window can run a whole window's worth past a request that is late at the prefix. It
// is also what a resumed transfer sends again at most, so it is not larger.
const maxSpan = 64 << 20

// span is W for this Client's transfers: maxSpan (tests lower it).
func (c *Client) span() int64 {
	if c.opts.span > 0 {
		return c.opts.span
	}
	return maxSpan
}

// minStripe is how large a transfer must be before it stripes: stripeMin (tests lower
// it).
func (c *Client) minStripe() int64 {
	if c.opts.stripeFrom > 0 {
		return c.opts.stripeFrom
	}
	return stripeMin
}

// channelWindow is the flow-control window of one SSH session channel as x/crypto/ssh
// grants it to the server (so it bounds every download lane exactly), and as
// OpenSSH's sshd grants it to the client (so it bounds upload lanes against sshd).
// Other servers grant other windows to uploads (dropbear 24 KiB, ProFTPD 4 GiB); the
// write side does not rely on this figure for them, see maxUnsent.
const channelWindow = 2 << 20

// maxUnsent is how many WRITEs of an upload may be queued on a lane's channel and not
// yet written: the one x/crypto is sending and one ready behind it, so the channel's
// writer never waits for the scheduler, while a lane parked on an exhausted window
// takes no more.
const maxUnsent = 2

// windowBudget bounds, in bytes, the window of a striped transfer. What a download
// holds (requests whose data has arrived but is not yet consumed, the data of every
// reply in flight once it lands) and what an upload holds (sibling WRITEs until
// acknowledged, see heldBuf) are at most the window's buffers; with the garbage
// collector's headroom the process then stays within about twice this. 32 MiB keeps
// 16 lanes at a full 2 MiB window each, and carries 320 MiB/s at 100 ms, more than
// two cores move through SSH.
const windowBudget = 32 << 20

// window is how many requests a transfer keeps in flight: the configured depth, and
// when striping enough per lane to fill a 2 MiB channel window (12 requests), up to
// windowBudget.
func (c *Client) window() int {
	w := c.opts.maxInflight
	if c.stripes() {
		size := max(c.limits.MaxRead, c.limits.MaxWrite, minDataSize) + packetSlack
		w = max(w, min(c.opts.channels*12, windowBudget/size))
	}
	return w
}

// window is how many requests this file's transfers keep in flight: the Client's,
// shared out when a tree copy moves several files at once (see File.share).
func (f *File) window() int {
	w := f.c.window()
	if f.share > 1 {
		w = min(w, max(8, 4*w/f.share))
	}
	return w
}

// writeBuffers is how many data buffers an upload holds at once: read and not yet
// written to a channel, or (striping) in flight on a sibling lane. On one lane that
// is enough for every reader and the lane's unsent WRITEs: a WRITE in flight there
// holds a window slot but no buffer (the channel has copied it), so a small set of
// buffers stays warm in the pool instead of a window's worth churning through the GC.
// A sibling's WRITEs keep their buffers until acknowledged, to be sent again if the
// sibling dies (heldBuf), so a striped upload may hold its whole window.
func writeBuffers(c *Client, window int) int {
	if c.stripes() {
		return window
	}
	return min(window, readAtWorkers+maxUnsent)
}

// readLaneCap is how many READs of size one lane keeps at the server when striping:
// about 1.5 channel windows, enough to keep the window full, while a deeper queue on
// the first lane would hold back, in offset order, everything the lanes joining later
// bring.
func readLaneCap(size int) int {
	return max(2, channelWindow*3/2/(size+packetSlack))
}

// writeLaneCap is how many WRITEs of size one lane may have in flight when there are
// several: what fits in sshd's channel window, less room for the small requests of
// other users of the channel. Against a server with a smaller window the channel's
// writer parks in x/crypto's Write and maxUnsent stops feeding it.
func writeLaneCap(size int) int {
	return max(1, (channelWindow-64<<10)/(size+packetSlack))
}

// Tree transfers (tree.go) hold the frontier of their walk, never the whole tree: these
// bound its parts by count, so that an honest tree stays far below the call's memory
// limit (WithMemoryLimit), which every part is charged to as well.
const (
	// treePendingDirs is how many subdirectories a directory's walker keeps before it
	// walks them: past it the walker goes down into them and comes back to the rest
	// of the listing after, so a directory of a million subdirectories is never held
	// whole.
	treePendingDirs = 64
	// treePageEntries bounds the entries taken from one READDIR page at a time (a
	// page is one reply, 100 names on OpenSSH); localPageEntries is the local
	// equivalent, one ReadDir(n) of a local directory.
	treePageEntries  = 1 << 10
	localPageEntries = 256
	// treeRepliesAhead is how many replies a tree's collectors wait for in order
	// (MKDIRs of new directories, CLOSEs of listed ones) while the walk goes on:
	// past it the walk waits. OpenSSH carries out a channel's requests in order, so
	// a new tree's directories are made in one round trip per this many.
	treeRepliesAhead = 256
	// maxTreeDepth is how many directory levels a tree transfer descends, its root
	// being the first, as OpenSSH's client: a server can serve a directory that
	// contains itself forever.
	maxTreeDepth = 64
)

// pipelinedWriteMax is the most data WriteFile sends as WRITEs back to back with the
// CLOSE right behind them, two round trips in all: what one channel window holds, less
// room for the small requests of other users of the channel, so that the burst goes
// out without waiting for the server to grant more. More goes through the engine.
const pipelinedWriteMax = channelWindow - 64<<10

// writeStallGrace is how long a channel's Write may stay blocked after the call that
// sent the packet gave up (its ctx ended) before the channel is given up as one whose
// server stopped taking data (connwrite.go); it also bounds how long closing a channel
// waits for its goroutines. It must not kill a healthy channel whose user merely
// cancelled an upload: that Write is blocked on the channel's flow-control window,
// behind at most a window of data (channelWindow, 2 MiB, against sshd) plus what the
// server's pipes buffer, and the window comes back as the server writes that data and
// the window adjustment crosses the link. stallGraceBase lets a server that takes 1
// MiB/s (a slow disk or link; slower than that we call stalled) drain a window, and
// 4 minimum round trips let the adjustment come back even queued behind replies. A
// longer grace only delays the report: the call has returned at its ctx either way.
func writeStallGrace(minRTT time.Duration) time.Duration {
	return stallGraceBase + 4*minRTT
}

// stallGraceBase is writeStallGrace without the round trips: a window at 1 MiB/s.
const stallGraceBase = channelWindow / (1 << 20) * time.Second

// busyChannel is how many requests a data channel must have in flight before a new
// file's open asks for another data channel: about a window's worth of full-size
// READs (8 x 255 KiB fills 2 MiB), or dozens of small files.
const busyChannel = 8

// writeAtWorkers is how many goroutines write an io.WriterAt: enough to keep writing
// while one is in a system call.
const writeAtWorkers = 2

// readAtWorkers is how many goroutines read a sized source in parallel. Reading a
// chunk costs a fraction of encrypting it, so two keep a writer fed even while one
// waits on a disk; more only add wake-ups (and buffers, see writeBuffers) on the
// two cores this is measured on.
const readAtWorkers = 2

// defaultSmallParallel is how many small files a tree keeps in flight when the caller
// did not choose Parallel. A tree of a few hundred small files then goes in one wave
// of round trips rather than two or three; smallBudget keeps the memory they hold to
// what 128 files of one full READ or WRITE each would.
const defaultSmallParallel = 512

// smallBudget bounds the bytes the small files in flight hold at once (each is
// charged smallCost), whatever their number.
const smallBudget = 32 << 20

// defaultStripeMinRTT is the round trip below which one channel's window is not what
// limits a transfer: 2 MiB per 2 ms is 1 GiB/s, more than SSH's ciphers move on one
// connection. There extra channels would only add server processes competing for the
// CPU. (Tests lower it to exercise striping on loopback.)
const defaultStripeMinRTT = 2 * time.Millisecond

// defaultChannelsPerConn is how many lanes share one SSH connection before the Client
// dials another (with WithDialer). Each connection is one cipher stream, run by one
// goroutine here and one sshd process there. It was measured on the project's 2-core
// machine at RTT 50 ms (see docs/design.md, Lanes).
const defaultChannelsPerConn = 8

// maxDialing bounds the dials one Client has under way. sshd drops connections that
// have not logged in yet past its MaxStartups (10 by default), and a failed dial ends
// the Client's striping growth.
const maxDialing = 4

// maxChannelAttempts bounds how often one open moves on to another connection after a
// refused session or a dead connection.
const maxChannelAttempts = 3

// readAhead bounds the READDIRs a whole listing keeps in flight. Most directories
// fit in one page, and a listing ends only at a reply of EOF, so a listing read one
// READDIR at a time pays two round trips where one would do: the first batch sends
// two, which brings a small directory's page and its EOF together. A listing that
// goes on doubles its batch up to readAhead, so a large directory costs a round trip
// per readAhead pages; what is in flight is bounded by readAhead replies.
const readAhead = 4

// packetSlack is the room a data buffer keeps beyond its payload for the header of
// a WRITE or DATA packet (type, id, handle up to 256 bytes, offset, lengths).
const packetSlack = 1024

// defaultFlight is the window (requests in flight per transfer) when the caller did
// not choose one (see WithMaxInflight).
const defaultFlight = 64

// defaultChannels is the ceiling of lanes a transfer may use (see WithChannels).
const defaultChannels = 16

// defaultParallel is how many files a tree transfer moves at once when the caller did
// not choose Parallel.
const defaultParallel = 16

// Server-side copy (servercopy.go).
const (
	// copyRange is the bytes one copy-data request asks the server to copy. The server
	// copies a range without answering anything else on the channel (OpenSSH serves one
	// request at a time), so a range is kept to a size it copies in well under a
	// second, and copyFlight of them are kept in flight so the server never waits for
	// the next.
	copyRange  = 64 << 20
	copyFlight = 4
)

// The keepalive's default (WithKeepalive): a probe every 10 s, and a connection with
// nothing from it for 3 of them given up. A silent link is noticed within about 30 s,
// sooner than most callers give up on a request, and within the idle limits of the
// servers that drop quiet sessions (Files.com 60 s, Azure Blob Storage 2 minutes);
// each probe is one small message each way.
const (
	defaultKeepaliveInterval = 10 * time.Second
	defaultKeepaliveCount    = 3
)
