package sftp

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"sync/atomic"
)

// Hashing a file while a transfer moves it (Verify). The engine hands the bytes it
// moves, as they move, to a sumFeed, which hashes them in offset order on a goroutine
// of its own: never on the goroutine that drives the transfer, where SHA-256 (about
// half a second per GiB) would slow every transfer down by that much.
//
//   - An upload's scheduler hands chunks out in offset order (write.go dispatch); each
//     one it hands the feed keeps its buffer (an extra reference on its heldBuf) until
//     hashed, so the producers, which need a buffer for every chunk they read, never
//     run more than the window ahead of the hashing.
//   - A download's pieces arrive in any order and are written at their offsets by the
//     writer goroutines (read.go writeAt), then given to the feed, which keeps the ones
//     that came early until their turn. A piece leaves the window only once it is
//     written and hashed, so what waits for its turn counts in the window.
//
// No local byte is read twice: what the transfer moves is hashed from the buffers it
// moves it in. Only a resumed transfer's prefix, moved by an earlier run, is read back
// from the local file (runningSum.prefix).

// runningSum is the hash of a file's first bytes, fed in offset order.
type runningSum struct {
	alg  HashAlgorithm
	h    hash.Hash
	next int64 // bytes hashed so far: the offset the next write must come from
	err  error // a write out of order: the sum covers nothing reliable
}

func newRunningSum(alg HashAlgorithm) (*runningSum, error) {
	h, err := alg.newHash()
	if err != nil {
		return nil, err
	}
	return &runningSum{alg: alg, h: h}, nil
}

// write hashes data, the bytes at off, which must be where the sum has reached.
func (rs *runningSum) write(off int64, data []byte) {
	if rs.err != nil {
		return
	}
	if off != rs.next {
		rs.err = fmt.Errorf("sftp: verify: bytes at %d hashed after %d bytes (internal error)", off, rs.next)
		return
	}
	rs.h.Write(data)
	rs.next += int64(len(data))
}

// prefix hashes the first n bytes of r: what an earlier run moved, before a resumed
// transfer goes on from n.
func (rs *runningSum) prefix(r io.ReaderAt, n int64) error {
	if rs.next != 0 || n < 0 {
		return errors.New("sftp: verify: prefix hashed out of turn (internal error)")
	}
	m, err := io.Copy(rs.h, io.NewSectionReader(r, 0, n))
	rs.next = m
	if err == nil && m < n {
		err = fmt.Errorf("sftp: verify: the %d bytes an earlier run moved are not all there (%d read)", n, m)
	}
	return err
}

// sum returns the digest of the bytes hashed, which must be exactly size.
func (rs *runningSum) sum(size int64) ([]byte, error) {
	if rs.err != nil {
		return nil, rs.err
	}
	if rs.next != size {
		return nil, fmt.Errorf("sftp: verify: %d bytes hashed of the %d moved (internal error)", rs.next, size)
	}
	return rs.h.Sum(nil), nil
}

// Write hashes b as the next bytes, for transfers that move the data in order.
func (rs *runningSum) Write(b []byte) (int, error) {
	rs.write(rs.next, b)
	return len(b), nil
}

// summer is a local file (or a stand-in for one) whose bytes a transfer must hash as it
// moves them: File.ReadFrom and WriteTo look for it on their source or destination.
type summer interface {
	runningSum() *runningSum
}

// summedFile is the local file a Get writes with Verify: it keeps the methods that let
// WriteTo write it at offsets from several goroutines, and carries the running sum
// the engine feeds.
type summedFile struct {
	localFile
	rs *runningSum
}

// localFile is what WriteTo uses of a Get's local file: *os.File, or progressFile
// around one.
type localFile interface {
	io.Writer
	io.WriterAt
	io.Seeker
}

func (s *summedFile) runningSum() *runningSum { return s.rs }

// sumOf returns the running sum a transfer's local end carries, if any.
func sumOf(v any) *runningSum {
	if s, ok := v.(summer); ok {
		return s.runningSum()
	}
	return nil
}

// sumPiece is bytes of the file for the feed: data at off, held in the buffer of an
// upload's chunk (held, or a copy of it) or of a download's reply (seg, of which n
// bytes were written).
type sumPiece struct {
	off  int64
	data []byte
	held *heldBuf
	copy *[]byte
	seg  segment
	n    int
}

// sumFeed hashes the pieces a transfer hands it, in offset order, on its own
// goroutine; pieces that come early wait for their turn (download). Each piece is
// given back (release) once hashed, or once the feed is closed without reaching it.
type sumFeed struct {
	rs      *runningSum
	in      chan sumPiece
	release func(sumPiece)
	done    chan struct{}
	// parked counts pieces waiting for an earlier one: the read side's window rule
	// must know which held pieces no writer can free (read.go fillRedo), and parking
	// one wakes it (parkedWake) to look again, as nothing else might.
	parked     atomic.Int32
	parkedWake chan struct{}
	waiting    map[int64]sumPiece
}

// startSumFeed starts the feed's goroutine. room is the most pieces that can be handed
// to it and not yet given back, so put never blocks.
func startSumFeed(rs *runningSum, room int, release func(sumPiece)) *sumFeed {
	sf := &sumFeed{rs: rs, in: make(chan sumPiece, room), release: release,
		done: make(chan struct{}), parkedWake: make(chan struct{}, 1), waiting: make(map[int64]sumPiece)}
	go sf.run()
	return sf
}

// put hands p to the feed. It never blocks: the caller holds the window slot or
// buffer p came with until the feed gives it back, and in has room for all of them.
func (sf *sumFeed) put(p sumPiece) { sf.in <- p }

// close ends the feed once every piece put is hashed or given back. Nothing may be put
// after it.
func (sf *sumFeed) close() {
	close(sf.in)
	<-sf.done
}

func (sf *sumFeed) run() {
	defer close(sf.done)
	for p := range sf.in {
		if p.off != sf.rs.next {
			sf.waiting[p.off] = p
			sf.parked.Add(1)
			select {
			case sf.parkedWake <- struct{}{}:
			default: // a wake is pending already
			}
			continue
		}
		sf.hash(p)
		for {
			q, ok := sf.waiting[sf.rs.next]
			if !ok {
				break
			}
			delete(sf.waiting, q.off)
			sf.parked.Add(-1)
			sf.hash(q)
		}
	}
	// What still waits follows a piece that never came (the transfer failed): it is
	// given back unhashed, and the sum stops short of it.
	for off, p := range sf.waiting {
		delete(sf.waiting, off)
		sf.parked.Add(-1)
		sf.release(p)
	}
}

func (sf *sumFeed) hash(p sumPiece) {
	sf.rs.write(p.off, p.data)
	sf.release(p)
}

// The upload's side (write.go): the scheduler hands each chunk to the feed as it hands
// it to a lane, in offset order.

// startSum starts hashing the upload's chunks when src carries a running sum.
func (ws *writeStream) startSum(src io.Reader) {
	rs := sumOf(src)
	if rs == nil {
		return
	}
	// Every chunk fed holds a buffer token until hashed, and one copy (sumCopy) is fed
	// at a time: the feed never has more than that to take.
	ws.sum = startSumFeed(rs, cap(ws.bufs)+2, func(p sumPiece) {
		if p.held != nil {
			ws.release(p.held)
			return
		}
		ws.f.c.dataPool.Put(p.copy)
	})
}

// endSum waits for the feed to hash what it was given. It runs once the scheduler has
// returned: nothing more comes.
func (ws *writeStream) endSum() {
	if ws.sum != nil {
		ws.sum.close()
	}
}

// sumHeld feeds c, just handed to a lane in h: the feed holds h until it is hashed.
func (ws *writeStream) sumHeld(c filledChunk, h *heldBuf) {
	if ws.sum == nil {
		return
	}
	h.refs.Add(1)
	ws.sum.put(sumPiece{off: c.off, data: (*c.buf)[dataOff : dataOff+c.n], held: h})
}

// sumCopy feeds a copy of c, the chunk a striping proof holds back (reopen.go): it goes
// out later, after chunks behind it, and is hashed now, in its turn. One chunk per
// round of the proof.
func (ws *writeStream) sumCopy(c filledChunk) {
	if ws.sum == nil {
		return
	}
	bp := ws.f.c.dataBuf()
	n := copy((*bp)[dataOff:], (*c.buf)[dataOff:dataOff+c.n])
	ws.sum.put(sumPiece{off: c.off, data: (*bp)[dataOff : dataOff+n], copy: bp})
}
