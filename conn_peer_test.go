package sftp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Harness: the scripted peer.
//
// This file provides a scripted peer: a goroutine on the other end of two io.Pipes
// that reads the client's raw packets (rawPacket) and writes replies crafted byte by
// byte, so every ordering, malformation and failure of the wire can be produced on
// demand, down to a reply split across reads. Use it for conn itself (framing, request
// ids, the single failure path, what a broken VERSION or a reply of the wrong type
// does) and for fuzzing the client's decoding (fuzz_client_test.go); use the
// in-process server (testserver_env_test.go) when a server that keeps its state is
// easier than a script. Tests of conn's behaviour go in conn_test.go or here; every
// wait is bounded by testCtx (testctx_test.go).

type rawPacket struct {
	typ  sshfx.PacketType
	id   uint32 // 0 for INIT
	body []byte // after the id (after the type for INIT)
}

// path reads the string a STAT (or any one-string request) carries.
func (p rawPacket) path() string { return sshfx.NewDecoder(p.body).String() }

// scriptPeer is the server end of the pipes. Like sshfx.Decoder its first error
// sticks and turns later steps into no-ops, so a script reads as a plain sequence and
// reports its first failure when it returns.
type scriptPeer struct {
	r   *io.PipeReader // what the client writes
	w   *io.PipeWriter // what the client reads
	err error
}

func (p *scriptPeer) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

func (p *scriptPeer) readFull(b []byte) {
	if p.err == nil {
		_, err := io.ReadFull(p.r, b)
		p.fail(err)
	}
}

func (p *scriptPeer) read() rawPacket {
	var hdr [5]byte
	p.readFull(hdr[:])
	if p.err != nil {
		return rawPacket{}
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > 1<<20 {
		p.fail(fmt.Errorf("peer: client sent length %d", n))
		return rawPacket{}
	}
	rest := make([]byte, n-1)
	p.readFull(rest)
	pkt := rawPacket{typ: sshfx.PacketType(hdr[4]), body: rest}
	if pkt.typ != sshfx.TypeInit {
		if len(rest) < 4 {
			p.fail(fmt.Errorf("peer: %v without an id", pkt.typ))
			return rawPacket{}
		}
		pkt.id, pkt.body = binary.BigEndian.Uint32(rest), rest[4:]
	}
	return pkt
}

// readN reads n requests of type typ.
func (p *scriptPeer) readN(n int, typ sshfx.PacketType) []rawPacket {
	var out []rawPacket
	for range n {
		pkt := p.read()
		if p.err != nil {
			return nil
		}
		if pkt.typ != typ {
			p.fail(fmt.Errorf("peer: got %v, want %v", pkt.typ, typ))
			return nil
		}
		out = append(out, pkt)
	}
	return out
}

func (p *scriptPeer) write(pkts ...[]byte) {
	for _, pkt := range pkts {
		if p.err == nil {
			_, err := p.w.Write(pkt)
			p.fail(err)
		}
	}
}

// echo answers each request with a HANDLE naming its path.
func (p *scriptPeer) echo(reqs []rawPacket) {
	for _, req := range reqs {
		p.write(handleReply(req.id, "for "+req.path()))
	}
}

// expectEOF waits for the client to close its end.
func (p *scriptPeer) expectEOF() {
	if p.err != nil {
		return
	}
	pkt := p.read()
	if p.err == io.EOF {
		p.err = nil
	} else if p.err == nil {
		p.fail(fmt.Errorf("peer: got %v id %d, want the client to close", pkt.typ, pkt.id))
	}
}

// expectClose reads a CLOSE of handle h and acknowledges it.
func (p *scriptPeer) expectClose(h string) {
	req := p.read()
	if p.err == nil && (req.typ != sshfx.TypeClose || req.path() != h) {
		p.fail(fmt.Errorf("peer: got %v %q, want CLOSE %q", req.typ, req.body, h))
	}
	p.write(statusReply(req.id, sshfx.StatusOK, ""))
}

// handshake reads INIT, checks it byte for byte, and answers VERSION v with exts
// (name, data pairs).
func (p *scriptPeer) handshake(v uint32, exts ...string) {
	pkt := p.read()
	if p.err == nil && (pkt.typ != sshfx.TypeInit || string(pkt.body) != "\x00\x00\x00\x03") {
		p.fail(fmt.Errorf("peer: first packet %v %x, want INIT 3", pkt.typ, pkt.body))
	}
	p.write(versionPacket(v, exts...))
}

func versionPacket(v uint32, exts ...string) []byte {
	b := []byte{0, 0, 0, 0, byte(sshfx.TypeVersion)} // VERSION carries no id
	b = sshfx.AppendUint32(b, v)
	for _, s := range exts {
		b = sshfx.AppendString(b, s)
	}
	return sshfx.Finish(b, 0)
}

// replyPacket frames body as a reply of type typ to id.
func replyPacket(typ sshfx.PacketType, id uint32, body []byte) []byte {
	return sshfx.Finish(append(sshfx.Begin(nil, typ, id), body...), 0)
}

func handleReply(id uint32, h string) []byte {
	return replyPacket(sshfx.TypeHandle, id, sshfx.AppendString(nil, h))
}

func dataReply(id uint32, data string) []byte {
	return replyPacket(sshfx.TypeData, id, sshfx.AppendString(nil, data))
}

func statusReply(id uint32, code sshfx.Status, msg string) []byte {
	b := sshfx.AppendUint32(nil, uint32(code))
	b = sshfx.AppendString(b, msg)
	b = sshfx.AppendString(b, "")
	return replyPacket(sshfx.TypeStatus, id, b)
}

// peerRun is a running script.
type peerRun struct{ done chan error }

// startPeer runs script on the far end of a fresh pair of pipes and returns the
// client's ends. When the script returns, the peer's ends close.
func startPeer(script func(p *scriptPeer)) (*io.PipeReader, *io.PipeWriter, *peerRun) {
	clientR, peerW := io.Pipe()
	peerR, clientW := io.Pipe()
	run := &peerRun{done: make(chan error, 1)}
	go func() {
		p := &scriptPeer{r: peerR, w: peerW}
		script(p)
		peerW.Close()
		peerR.Close()
		run.done <- p.err
	}()
	return clientR, clientW, run
}

// wait returns the script's first error; the script must end by itself.
func (r *peerRun) wait(t *testing.T) error {
	t.Helper()
	err := recv(t, r.done)
	r.done <- err // later waits (the cleanup) see it too
	return err
}

// checkLeaks fails the test if it leaves a goroutine behind: a reader that outlives its
// conn, or a call that never returned. Registered first, it runs after every other
// cleanup.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// pipeConn starts script as the peer and runs newConn against it. The cleanup closes
// the conn and requires the script to have succeeded.
func pipeConn(t *testing.T, ctx context.Context, script func(p *scriptPeer)) (*conn, *peerRun, error) {
	t.Helper()
	clientR, clientW, run := startPeer(script)
	closer := func() error {
		clientW.Close()
		clientR.Close()
		return nil
	}
	c, err := newConn(ctx, clientR, clientW, closer, true, nil)
	t.Cleanup(func() {
		if c != nil {
			c.close()
		}
		require.NoError(t, run.wait(t), "scripted peer")
	})
	return c, run, err
}

// mustPipeConn is pipeConn after a good handshake.
func mustPipeConn(t *testing.T, script func(p *scriptPeer)) *conn {
	t.Helper()
	c, _, err := pipeConn(t, context.Background(), func(p *scriptPeer) {
		p.handshake(3)
		script(p)
	})
	require.NoError(t, err)
	return c
}

// recv waits for one value from ch, failing the test instead of hanging.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("nothing arrived within %v", testTimeout)
		var zero T
		return zero
	}
}

type callResult struct {
	r   response
	err error
}

// goCall runs one STAT call for path on its own goroutine.
func goCall(ctx context.Context, c *conn, path string) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		r, err := c.start(ctx, appendString1(nil, sshfx.TypeStat, c.newID(), path), nil).wait(ctx)
		out <- callResult{r, err}
	}()
	return out
}

// handleOf decodes a HANDLE reply and gives its buffer back.
func handleOf(t *testing.T, r response) string {
	t.Helper()
	defer r.release()
	h, err := decodeHandle("test", &r)
	require.NoError(t, err)
	return h
}
