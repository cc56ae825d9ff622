package sftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// FuzzClientReplies makes the client read an arbitrary byte stream as the server's
// replies, after a valid VERSION. Whatever the bytes, the calls must return (each has
// a short deadline), nothing may panic, and once the Client is closed nothing it
// started may still run.
func FuzzClientReplies(f *testing.F) {
	for _, s := range scriptedSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		ignore := goleak.IgnoreCurrent()
		runScripted(t, stream, 25*time.Millisecond)
		goleak.VerifyNone(t, ignore)
	})
}

// TestScriptedRepliesHarness checks the fuzz harness itself: with well-formed replies
// in the right order every call succeeds, so the fuzzer starts from the paths real
// servers take rather than from a channel that dies at once.
func TestScriptedRepliesHarness(t *testing.T) {
	tsNoLeaks(t)
	got := runScripted(t, scriptedHappy(), testTimeout)
	require.NoError(t, got.statErr)
	require.Equal(t, int64(scriptedSize), got.statSize)
	require.NoError(t, got.openErr)
	require.NoError(t, got.readAtErr)
	require.Equal(t, scriptedSize, got.readAtN)
	require.NoError(t, got.writeToErr)
	require.Equal(t, int64(scriptedSize), got.writeToN)
	require.NoError(t, got.closeErr)
	require.NoError(t, got.readDirErr)
	require.Equal(t, []string{"a"}, got.names)
}

const scriptedSize = 70000 // three READs of 32768 (no limits@openssh.com: the default)

// scriptedResults is what the calls of runScripted returned.
type scriptedResults struct {
	statErr, openErr, readAtErr, writeToErr, closeErr, readDirErr error
	statSize                                                      int64
	readAtN                                                       int
	writeToN                                                      int64
	names                                                         []string
}

// runScripted connects a Client to a peer that answers VERSION (no extensions) and then
// sends stream, one frame (as its length field delimits it) after each request it
// reads, so replies come paced by requests, the way a server's do. When stream runs
// out the peer hangs up. The client meanwhile makes a fixed round of calls, each
// bounded by deadline; then it closes and the peer must wind down.
func runScripted(t *testing.T, stream []byte, deadline time.Duration) scriptedResults {
	clientR, peerW := io.Pipe()
	peerR, clientW := io.Pipe()
	requests := make(chan struct{}, 1<<12)
	readerDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the peer's reader: one token per request, INIT included
		defer wg.Done()
		defer close(readerDone)
		var hdr [4]byte
		for {
			if _, err := io.ReadFull(peerR, hdr[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, peerR, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
				return
			}
			select {
			case requests <- struct{}{}:
			default: // only the pacing suffers
			}
		}
	}()
	go func() { // the peer's writer: VERSION after INIT, then a frame per request
		defer wg.Done()
		defer peerW.Close()
		next := func() bool {
			select {
			case <-requests:
				return true
			case <-readerDone:
				return false
			}
		}
		if !next() {
			return
		}
		if _, err := peerW.Write(scriptedPacket(sshfx.TypeVersion, 3, nil)); err != nil {
			return
		}
		for rest := stream; len(rest) > 0 && next(); {
			n := frameLen(rest)
			if _, err := peerW.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
	}()

	var res scriptedResults
	bounded := func(fn func(ctx context.Context)) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		fn(ctx)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	c, err := NewClientPipe(ctx, clientR, clientW)
	cancel()
	require.NoError(t, err, "VERSION is valid: NewClientPipe must succeed")
	bounded(func(ctx context.Context) {
		var fi fs.FileInfo
		if fi, res.statErr = c.Stat(ctx, "/a"); res.statErr == nil {
			res.statSize = fi.Size()
		}
	})
	var file *File
	bounded(func(ctx context.Context) { file, res.openErr = c.Open(ctx, "/a") })
	if file != nil {
		// File methods take no context: their ctx forms, which the io methods call
		// with the File's life, are what bounds them here.
		bounded(func(ctx context.Context) {
			res.readAtN, res.readAtErr = file.readAt(ctx, make([]byte, scriptedSize), 0)
		})
		bounded(func(ctx context.Context) {
			res.writeToN, res.writeToErr = file.writeTo(ctx, "writeto", io.Discard)
		})
		bounded(func(ctx context.Context) { res.closeErr = file.close(ctx) })
	}
	bounded(func(ctx context.Context) {
		var entries []fs.DirEntry
		entries, res.readDirErr = c.ReadDir(ctx, "/")
		for _, e := range entries {
			res.names = append(res.names, e.Name())
		}
	})

	done := make(chan struct{})
	go func() {
		c.Close()
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("Client.Close or the peer did not finish within %v", testTimeout)
	}
	// A reply that breaks the protocol closes the channel: whichever call met it, and
	// whichever check fired, its error must say so the way every later call's does.
	for i, err := range []error{res.statErr, res.openErr, res.readAtErr, res.writeToErr, res.closeErr, res.readDirErr} {
		if errors.As(err, new(*ProtocolError)) && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("call %d: a *ProtocolError that does not match net.ErrClosed: %v", i, err)
		}
	}
	return res
}

// frameLen is how much of stream the next frame takes: one packet by its length
// field, or all that is left when that is less.
func frameLen(stream []byte) int {
	if len(stream) < 4 {
		return len(stream)
	}
	n := 4 + uint64(binary.BigEndian.Uint32(stream))
	return int(min(n, uint64(len(stream))))
}

// scriptedPacket builds a reply: length, type, id (or VERSION's version), body.
func scriptedPacket(typ sshfx.PacketType, id uint32, body []byte) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
	p = append(p, byte(typ))
	p = binary.BigEndian.AppendUint32(p, id)
	return append(p, body...)
}

func scriptedString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func scriptedStatus(id uint32, code sshfx.Status) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(code))
	b = scriptedString(b, "")
	b = scriptedString(b, "")
	return scriptedPacket(sshfx.TypeStatus, id, b)
}

func scriptedHandle(id uint32, h string) []byte {
	return scriptedPacket(sshfx.TypeHandle, id, scriptedString(nil, h))
}

func scriptedData(id uint32, n int) []byte {
	return scriptedPacket(sshfx.TypeData, id, scriptedString(nil, string(bytes.Repeat([]byte{'x'}, n))))
}

// scriptedAttrs is size and permissions of a regular file.
func scriptedAttrs(id uint32, size uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(sshfx.AttrSize|sshfx.AttrPermissions))
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint32(b, 0o100644)
	return scriptedPacket(sshfx.TypeAttrs, id, b)
}

func scriptedNames(id uint32, names ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(names)))
	for _, n := range names {
		b = scriptedString(b, n)
		b = scriptedString(b, "-rw-r--r-- 1 u g 0 Jan 1 00:00 "+n)
		b = binary.BigEndian.AppendUint32(b, 0)
	}
	return scriptedPacket(sshfx.TypeName, id, b)
}

// scriptedHappy answers runScripted's calls as a well-behaved server would, in the
// order the client sends them.
func scriptedHappy() []byte {
	var s []byte
	for _, p := range [][]byte{
		scriptedAttrs(1, scriptedSize), // STAT
		scriptedHandle(2, "h1"),        // OPEN
		// ReadAt: three READs in one go.
		scriptedData(3, 32768), scriptedData(4, 32768), scriptedData(5, scriptedSize-65536),
		// WriteTo: FSTAT and one READ; once the size is known, two more READs (the
		// last one short, so one more for the rest, which meets EOF).
		scriptedAttrs(6, scriptedSize), scriptedData(7, 32768),
		scriptedData(8, 32768), scriptedData(9, scriptedSize-65536),
		scriptedStatus(10, sshfx.StatusEOF),
		scriptedStatus(11, sshfx.StatusOK), // CLOSE
		// ReadDir: OPENDIR, READDIR, READDIR (EOF), CLOSE.
		scriptedHandle(12, "d1"),
		scriptedNames(13, ".", "..", "a"),
		scriptedStatus(14, sshfx.StatusEOF),
		scriptedStatus(15, sshfx.StatusOK),
	} {
		s = append(s, p...)
	}
	return s
}

// scriptedSeeds starts the fuzzer from the well-formed script and from the usual
// ways of breaking it.
func scriptedSeeds() [][]byte {
	happy := scriptedHappy()
	longData := scriptedData(3, 32769)
	badFlags := scriptedAttrs(1, 5)
	badFlags[11] |= 0x01
	hugeName := scriptedPacket(sshfx.TypeName, 13, binary.BigEndian.AppendUint32(nil, 0xffffffff))
	return [][]byte{
		happy,
		{},
		happy[:len(happy)/2],
		{0x7f, 0xff, 0xff, 0xff, byte(sshfx.TypeAttrs), 0, 0, 0, 1},
		scriptedPacket(250, 1, nil),
		append(scriptedAttrs(1, 5), scriptedAttrs(1, 5)...), // repeated
		scriptedAttrs(0xdeadbeef, 5),                        // unknown id
		append(scriptedAttrs(1, 5), append(scriptedHandle(2, "h"), longData...)...),
		badFlags,
		append(scriptedAttrs(1, 5), append(scriptedHandle(2, "h"), scriptedStatus(3, sshfx.StatusEOF)...)...),
		append(append(scriptedAttrs(1, 5), scriptedStatus(2, sshfx.StatusNoSuchFile)...), append(scriptedHandle(3, "d"), hugeName...)...),
		scriptedPacket(sshfx.TypeStatus, 1, []byte{0, 0, 0, 4}), // bare code, as old servers send
		// STATUS OK to a READ (rclone on a read-write handle): that call fails alone.
		append(scriptedAttrs(1, 5), append(scriptedHandle(2, "h"), scriptedStatus(3, sshfx.StatusOK)...)...),
		scriptedPacket(sshfx.TypeData, 1, nil),
		{0, 0, 0, 0},
	}
}
