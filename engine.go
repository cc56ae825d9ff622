package sftp

import (
	"fmt"
)

// The transfer engine: read.go moves data down (WriteTo, ReadAt, Read), write.go up
// (ReadFrom, WriteAt), lanes.go and channelpool.go spread requests over SFTP channels, and
// flow.go holds the arithmetic that bounds what is in flight. Replies of a transfer,
// from every lane, arrive on one Go channel with room for all it keeps in flight, so
// no channel's reader ever blocks; each is matched to its request by id and filed by
// the offset it covers.

// segment is received data not yet consumed; it keeps the reply (and so its pooled
// buffer) alive until then.
type segment struct {
	off  int64
	data []byte
	resp response
}

// chunk is one READ or WRITE in flight: its place in the file and its lane.
type chunk struct {
	off  int64
	n    int
	lane *lane
	// capGuess is set on a READ for the rest of a short DATA: the length that DATA
	// had. If this READ gets data too, the short one was the server's read cap, not
	// the end of the file.
	capGuess int
	// held is a WRITE's buffer on a sibling lane, kept until the reply in case the
	// lane dies and the WRITE must go out again (write.go).
	held *heldBuf
}

// readEnds is what a download's READ replies said about where the file ends: the
// lowest offset a READ got EOF for, and the end of the furthest DATA. DATA past a
// reported end contradicts it, in whichever order the two came: the server is faulty,
// or the file changed during the read. Either way the bytes between that end and the
// data past it are unknown, so the data is good only up to the end, and the download
// fails there rather than pass for a shorter (or, written at offsets, holed) file.
type readEnds struct {
	eof     int64 // lowest offset a READ got EOF for, or -1
	dataEnd int64 // end of the furthest DATA
}

func newReadEnds() readEnds { return readEnds{eof: -1} }

func (e *readEnds) sawEOF(off int64) {
	if e.eof < 0 || off < e.eof {
		e.eof = off
	}
}

func (e *readEnds) sawData(off, n int64) { e.dataEnd = max(e.dataEnd, off+n) }

// conflict is the failure, at the reported end, of replies that contradict each other;
// nil when they agree.
func (e readEnds) conflict() error {
	if e.eof >= 0 && e.dataEnd > e.eof {
		return &eofConflictError{at: e.eof}
	}
	return nil
}

// eofConflictError is the failure of a download whose server reported the end of the
// file at one offset and sent data past it (readEnds).
type eofConflictError struct{ at int64 }

func (e *eofConflictError) Error() string {
	return fmt.Sprintf("sftp: the server reported the end of the file at %d but sent data past it "+
		"(the file changed during the read, or the server is faulty)", e.at)
}

// firstFailure keeps the failure at the lowest offset: everything before it is good,
// and it is what the caller gets once that good part has been handed over.
type firstFailure struct {
	err   error
	errAt int64
}

func (f *firstFailure) fail(at int64, err error) {
	if f.err == nil || at < f.errAt {
		f.err, f.errAt = err, at
	}
}

// prefixTracker files completed pieces by offset and keeps the end of the contiguous
// run from the start: with pieces completing in any order, that is what is known done.
type prefixTracker struct {
	prefix int64
	ahead  map[int64]int // completed pieces past prefix, by offset
}

func newPrefixTracker(start int64, window int) prefixTracker {
	return prefixTracker{prefix: start, ahead: make(map[int64]int, window)}
}

func (p *prefixTracker) done(off int64, n int) {
	if off != p.prefix {
		p.ahead[off] = n
		return
	}
	p.prefix += int64(n)
	for n, ok := p.ahead[p.prefix]; ok; n, ok = p.ahead[p.prefix] {
		delete(p.ahead, p.prefix)
		p.prefix += int64(n)
	}
}
