//go:build linux

package sftp

import (
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// heldNewChannels gives every channel after the main one a reader held from its
// first Read: such a channel never answers until released, as one whose server is
// still starting (sshd runs a login shell first) does not. pooled is closed once the
// first such channel has sent a second request: its first is INIT, sent as it is
// made, and any other goes out only once the channel is in the Client's pool.
type heldNewChannels struct {
	mu      sync.Mutex
	all     []*holdReader
	created chan *holdReader
	pooled  chan struct{}
}

// requestWatch closes pooled once the requests written through it reach two.
type requestWatch struct {
	io.WriteCloser
	packets packetCounter
	n       int
	pooled  chan struct{}
}

func (r *requestWatch) Write(p []byte) (int, error) {
	if r.n < 2 {
		if r.n += r.packets.count(p); r.n >= 2 {
			close(r.pooled)
		}
	}
	return r.WriteCloser.Write(p)
}

func (hs *heldNewChannels) wrap(r io.Reader, w io.WriteCloser) (io.Reader, io.WriteCloser) {
	h := &holdReader{r: r, waiting: make(chan struct{})}
	hs.mu.Lock()
	if len(hs.all) > 0 {
		h.hold()
		hs.created <- h
		if len(hs.all) == 1 {
			w = &requestWatch{WriteCloser: w, pooled: hs.pooled}
		}
	}
	hs.all = append(hs.all, h)
	hs.mu.Unlock()
	return h, w
}

// TestFileChannelWaitsForAnAnswer: a data channel that has not answered yet (its
// server still starting) gets no file, though it is the least loaded: files stay on
// the main channel until it answers, then go to it. Without this, 64 goroutines
// reading small files on a 50 ms link spent most of their time waiting behind new
// channels' server starts (issue 22: 130-230 ReadFiles/s instead of 550).
func TestFileChannelWaitsForAnAnswer(t *testing.T) {
	e := newStripeEnv(t, 0)
	holds := &heldNewChannels{created: make(chan *holdReader, 4), pooled: make(chan struct{})}
	c, _ := e.newClient(t, "", WithChannels(2), withStreamWrap(holds.wrap))
	ctx := testCtx(t)
	data := randBytes(4096, 41)
	name := e.file(t, "f", data)

	first, err := c.Open(ctx, name)
	require.NoError(t, err)
	require.Same(t, c.main, first.cn, "no data channel yet")
	var held *holdReader
	within(t, func() { held = <-holds.created })
	within(t, func() { <-held.waiting }) // it has not read its VERSION: it cannot answer
	within(t, func() { <-holds.pooled }) // its first request after INIT: it is pooled
	require.Len(t, c.dataChannels(), 1, "the data channel is in the pool")

	second, err := c.Open(ctx, name)
	require.NoError(t, err)
	require.Same(t, c.main, second.cn, "a file on a channel that has not answered")
	got, err := c.ReadFile(ctx, name)
	require.NoError(t, err)
	require.Equal(t, data, got)

	held.release()
	awaitDataChannel(t, c) // its open ends once the channel answered
	third, err := c.Open(ctx, name)
	require.NoError(t, err)
	require.Same(t, c.dataChannels()[0], third.cn, "a file on the data channel once it answered")
	for _, f := range []*File{first, second, third} {
		closeFile(t, f)
	}
}
