package sftp

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The proof that a file a striped transfer reopens by name on another lane is the
// File's own (reopen.go): against a private sshd whose file is swapped for a link
// before the siblings open, and against the in-process server for the edge cases.

// swapOnce returns a beforeSiblingOpen hook that, the first time it runs, moves name
// to name+".orig" and puts a symbolic link to target in its place: a third party with
// write access to the directory, between the File's open and its siblings'.
func swapOnce(t *testing.T, name, target string) func(string) {
	var once sync.Once
	return func(opened string) {
		once.Do(func() {
			if opened != name {
				t.Errorf("a sibling opens %q, want %q", opened, name)
			}
			if err := os.Rename(name, name+".orig"); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(target, name); err != nil {
				t.Error(err)
			}
		})
	}
}

// awaitOpens waits until the server has logged n opens of name.
func (e *stripeEnv) awaitOpens(t *testing.T, name string, n int) error {
	return pollHandles(func(string) int { return e.opened(t, name) }, name, n)
}

// A striped upload whose file is swapped for a link to another file before its
// siblings open writes nothing through the link: every sibling reads the target
// instead of the nonce and is closed; the upload completes on its own lane, into the
// file it created.
func TestStripedUploadRefusesASwappedFile(t *testing.T) {
	e := newStripeEnv(t, 0)
	victimData := []byte("ssh-ed25519 AAAA... the victim's authorized key\n")
	victim := e.file(t, "authorized_keys", victimData)
	name := e.file(t, "up", nil)
	c, _ := e.client(t, "", WithChannels(4), withBeforeSiblingOpen(swapOnce(t, name, victim)))
	data := randBytes(stripeSize, 41)
	// After the first MiB the source waits until the three siblings have opened (the
	// server logs each open before it answers): most of the upload is still to go.
	f, n, err := upload(t, c, name, data, true, 1<<20, func() error { return e.awaitOpens(t, name, 4) })
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	closeFile(t, f)

	require.Equal(t, victimData, readLocal(t, victim), "the link's target was written")
	requireSameBytes(t, data, readLocal(t, name+".orig"))
	hs := e.closedHandles(t, name)
	require.Greater(t, len(hs), 1, "no sibling was opened: the test proves nothing")
	var writers int
	for _, h := range hs {
		if h.written > 0 {
			writers++
			require.EqualValues(t, len(data)+nonceLen, h.written, "the File's own handle: the data and one nonce")
		} else {
			require.LessOrEqual(t, h.read, int64(nonceLen), "a refused sibling read more than the nonce's place")
		}
	}
	require.Equal(t, 1, writers, "handles that wrote: %+v", hs)
}

// A striped download whose file is swapped for a link to another file of the same
// size (another modification time) before its siblings open takes no data from them.
func TestStripedDownloadRefusesASwappedFile(t *testing.T) {
	e := newStripeEnv(t, 0)
	data := randBytes(stripeSize, 42)
	name := e.file(t, "down", data)
	decoy := e.file(t, "decoy", randBytes(stripeSize, 43))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(decoy, old, old))
	c, _ := e.client(t, "", WithChannels(4), withBeforeSiblingOpen(swapOnce(t, name, decoy)))
	// After the first byte the download waits until the three siblings hold the decoy
	// open and have joined: the rest is read over all four lanes.
	f, got, err := download(t, c, name, 1, func() error { return e.awaitLanes(c, decoy, 3) })
	require.NoError(t, err)
	requireSameBytes(t, data, got)
	closeFile(t, f)
	require.NoError(t, e.waitServerHandles(name+".orig", 0))
	require.NoError(t, e.waitServerHandles(decoy, 0), "a refused sibling's handle left open")
	require.Greater(t, len(e.closedHandles(t, name)), 1, "no sibling was opened: the test proves nothing")
}

// stripedTestServer is a Client striping over sessions of one in-process server (a
// pipe opener), four lanes.
func stripedTestServer(t *testing.T, opts testserver.Options) (*Client, *testserver.Server) {
	t.Helper()
	tsNoLeaks(t)
	srv := testserver.New(opts)
	t.Cleanup(func() { srv.Close() })
	open := func(context.Context) (io.Reader, io.WriteCloser, error) {
		r, w := srv.Conn()
		return r, w, nil
	}
	r, w := srv.Conn()
	c, err := NewClientPipe(testCtx(t), r, w, WithPipeOpener(open), WithChannels(4), withStripeMinRTT(0))
	require.NoError(t, err)
	pinLanes(c, 4)
	t.Cleanup(func() { c.Close() })
	return c, srv
}

// uploadTS writes src to name on srv through c with ReadFrom and returns what it wrote.
func uploadTS(t *testing.T, c *Client, name string, src io.Reader) (int64, error) {
	t.Helper()
	f, err := c.Create(testCtx(t), name)
	require.NoError(t, err)
	var n int64
	within(t, func() { n, err = f.ReadFrom(src) })
	require.NoError(t, f.Close())
	return n, err
}

// Siblings that read the nonce back join, the nonce's place gets the data, and each
// proof costs a sibling one READ of the nonce.
func TestStripedUploadProvesSiblings(t *testing.T) {
	c, srv := stripedTestServer(t, testserver.Options{})
	for i, sized := range []bool{true, false} {
		data := randBytes(stripeSize, uint64(50+i))
		var src io.Reader = bytes.NewReader(data)
		if !sized {
			src = io.MultiReader(src) // no size: striping starts past a window
		}
		srv.ResetStats()
		n, err := uploadTS(t, c, "/up", src)
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), n)
		got, err := srv.ReadFile("/up")
		require.NoError(t, err)
		requireSameBytes(t, data, got)
		reads := srv.Requests(testserver.TypeRead)
		require.GreaterOrEqual(t, reads, 1, "no sibling was proven (sized %v)", sized)
		require.LessOrEqual(t, reads, 4, "one READ per sibling")
	}
	require.True(t, c.knownReadWrite.Load())
}

// A round whose next chunk is shorter than the nonce (the source's last few bytes)
// refuses its siblings rather than write the nonce past the end of the file.
func TestStripedUploadShortChunkRefusesTheRound(t *testing.T) {
	c, srv := stripedTestServer(t, testserver.Options{})
	c.knownReadWrite.Store(true) // the nonce is wanted as soon as the round starts
	size := c.Limits().MaxWrite*(channelWindow/c.Limits().MaxWrite) + 5
	data := randBytes(size, 60)
	// No size known: the round starts once a window has been handed to lanes, and
	// the next chunk is the last 5 bytes.
	n, err := uploadTS(t, c, "/up", io.MultiReader(bytes.NewReader(data)))
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	got, err := srv.ReadFile("/up")
	require.NoError(t, err)
	requireSameBytes(t, data, got)
	require.Zero(t, srv.Requests(testserver.TypeRead), "a sibling was asked to prove a nonce never written")
}

// A transfer with nothing left to send does not wait for siblings still opening: the
// held chunk goes out on the File's lane and the transfer ends. (A sibling already
// reading the nonce is waited for: see roundProof.)
func TestStripedUploadEndsBeforeItsSiblingsAreProven(t *testing.T) {
	c, srv := stripedTestServer(t, testserver.Options{Stall: func(r testserver.Request) bool {
		return r.Type == testserver.TypeOpen && r.Seq == 1 // each sibling session's first OPEN
	}})
	t.Cleanup(func() { srv.ReleaseStalled() })
	c.knownReadWrite.Store(true)
	data := randBytes(stripeSize, 61)
	n, err := uploadTS(t, c, "/up", bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	got, err := srv.ReadFile("/up")
	require.NoError(t, err)
	requireSameBytes(t, data, got)
}

// A transfer that ends mid-round reports no byte written from the nonce's chunk on:
// the nonce may still be in the file there, and Resume must rewrite it.
func TestStripedUploadCutMidRoundKeepsTheNonceOut(t *testing.T) {
	stallWrite := stallFirst(atOrPast(testserver.TypeWrite, 4<<20))
	c, srv := stripedTestServer(t, testserver.Options{Stall: func(r testserver.Request) bool {
		// Every sibling's READ of the nonce, and one WRITE, so that the transfer
		// cannot end by itself.
		return r.Type == testserver.TypeRead || stallWrite(r)
	}})
	t.Cleanup(func() { srv.ReleaseStalled() })
	c.knownReadWrite.Store(true)
	data := randBytes(stripeSize, 62)
	f, err := c.Create(testCtx(t), "/up")
	require.NoError(t, err)
	res := tsGo(func() tsResult {
		n, err := f.ReadFrom(bytes.NewReader(data)) // sized: the nonce goes on the first chunk
		return tsResult{n, err}
	})
	tsWaitStalled(t, srv, 2) // a sibling proving itself (the nonce is written), and the WRITE
	require.NoError(t, f.Close())
	n, err := tsRecv(t, res, "ReadFrom after Close").get()
	require.Error(t, err)
	require.Zero(t, n, "bytes reported written past the nonce's place")
}
