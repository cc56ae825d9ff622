package sftp

import "cmp"

// The flow window: how much a transfer keeps in flight, which is also what bounds its
// memory. The other numbers of the package live beside the mechanism they tune.
//
//   - The window (Client.window, File.window) is how many requests one transfer keeps
//     in flight, summed over its lanes. Each holds at most one pooled data buffer, so it
//     is also what bounds a transfer's memory: window x (request size + packetSlack).
//     What all the transfers of a Client hold together is bounded by its transfer
//     memory (transfermemory.go), of which each transfer takes a slot per buffer.
//   - A lane's cap (readLaneCap, writeLaneCap) is how many of those one SSH channel
//     carries at once: about what its flow-control window holds. More would only
//     queue at the server (reads) or inside x/crypto's Write (writes).
//   - maxUnsent is how many WRITEs a lane may have queued on its channel's writer. A lane
//     whose window the server refills slowly (dropbear grants 24 KiB) keeps its
//     packets unsent, and new ones go to the other lanes: that is how the lanes
//     adapt to the window each server really grants, which x/crypto does not expose.

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

// window is how many requests a transfer keeps in flight: WithMaxInflight's n when
// the caller chose one, whatever the link; else defaultFlight on one channel, and when
// striping enough per lane of the ceiling (WithChannels) to fill a 2 MiB channel
// window (12 requests), up to windowBudget.
func (c *Client) window() int {
	if n := c.opts.maxInflight; n > 0 {
		return n
	}
	if c.stripes() {
		size := max(c.limits.MaxRead, c.limits.MaxWrite, minDataSize) + packetSlack
		return max(defaultFlight, min(c.opts.channels*12, windowBudget/size))
	}
	return defaultFlight
}

// oneChannelWindow is the window a transfer starts from on one channel: what
// WithMaxInflight chose, or defaultFlight.
func (c *Client) oneChannelWindow() int { return cmp.Or(c.opts.maxInflight, defaultFlight) }

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

// defaultFlight is the window (requests in flight per transfer) on one channel when
// the caller did not choose one (see WithMaxInflight), as pkg/sftp's: with the draft's
// 32 KiB requests it fills one 2 MiB channel window, and OpenSSH's 255 KiB requests
// fill eight, so on one channel the window is not what holds a transfer back.
const defaultFlight = 64
