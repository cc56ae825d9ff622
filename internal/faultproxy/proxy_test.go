package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait: a hang detector, never a verdict.
const testTimeout = time.Minute

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// echoServer is a target that sends back what it reads, reports each piece it reads
// on got and, when a connection's reading ends, the error that ended it on ended; it
// then writes trailer (if any) and closes.
type echoServer struct {
	ln      net.Listener
	trailer []byte
	got     chan []byte
	ended   chan error
	wg      sync.WaitGroup
}

func newEchoServer(t *testing.T, trailer string) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &echoServer{ln: ln, trailer: []byte(trailer), got: make(chan []byte, 1024), ended: make(chan error, 16)}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *echoServer) serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			s.got <- bytes.Clone(buf[:n])
			if _, werr := c.Write(buf[:n]); werr != nil && err == nil {
				err = werr
			}
		}
		if err != nil {
			if len(s.trailer) > 0 {
				c.Write(s.trailer)
			}
			s.ended <- err
			return
		}
	}
}

// received collects what the target read until want bytes have come.
func (s *echoServer) received(t *testing.T, want int) []byte {
	t.Helper()
	var all []byte
	timeout := time.After(testTimeout)
	for len(all) < want {
		select {
		case b := <-s.got:
			all = append(all, b...)
		case <-timeout:
			t.Fatalf("the target got %d bytes of %d", len(all), want)
		}
	}
	return all
}

func (s *echoServer) endErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.ended:
		return err
	case <-time.After(testTimeout):
		t.Fatal("the target's connection did not end")
		return nil
	}
}

func newProxy(t *testing.T, target string, opts ...Option) *Proxy {
	p, err := New(target, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) *net.TCPConn {
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// roundTrip writes b and reads its echo.
func roundTrip(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	_, err := c.Write(b)
	require.NoError(t, err)
	got := make([]byte, len(b))
	_, err = io.ReadFull(c, got)
	require.NoError(t, err)
	require.Equal(t, b, got)
}

// Without a fault everything passes, both ways, and an EOF is passed on as one.
func TestForwards(t *testing.T) {
	s := newEchoServer(t, "")
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	data := randomBytes(1<<20, 1)
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, werr = c.Write(data)
		c.CloseWrite()
	})
	got, err := io.ReadAll(c)
	wg.Wait()
	require.NoError(t, werr)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.ErrorIs(t, s.endErr(t), io.EOF)
	require.Equal(t, 1, p.Accepted())
	require.Zero(t, p.Faults())
}

// A planned reset comes once its bytes have passed: both peers see ECONNRESET, and
// the target has read no more than the plan allowed. The next connection is left
// alone.
func TestPlannedReset(t *testing.T) {
	const after = 100_000
	s := newEchoServer(t, "")
	p := newProxy(t, s.ln.Addr().String(), WithPlan(OnlyFirst(1, Step{After: after, Fault: Reset})))
	c := dial(t, p)
	data := randomBytes(1<<20, 2)
	go c.Write(data) // fails once the reset comes
	got, err := io.ReadAll(c)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	require.NoError(t, p.Wait(testCtx(t), 1))
	require.ErrorIs(t, s.endErr(t), syscall.ECONNRESET)
	var read []byte
	for len(s.got) > 0 {
		read = append(read, <-s.got...)
	}
	require.LessOrEqual(t, len(read)+len(got), after, "more passed than the plan allowed")
	require.Equal(t, data[:len(read)], read)
	require.Equal(t, data[:len(got)], got)

	roundTrip(t, dial(t, p), []byte("the second connection is left alone"))
	require.Equal(t, 1, p.Faults())
}

// A black hole passes nothing more and tells nobody: no FIN, no RST, until the proxy
// closes.
func TestBlackHole(t *testing.T) {
	s := newEchoServer(t, "")
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, []byte("hello"))
	require.Equal(t, "hello", string(s.received(t, 5)))
	require.Equal(t, 1, p.Break(BlackHole))
	_, err := c.Write([]byte("lost"))
	require.NoError(t, err, "the client's kernel takes the write")
	// Nothing told the client: its read waits (here until a deadline already past).
	require.NoError(t, c.SetReadDeadline(time.Now()))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	select {
	case err := <-s.ended:
		t.Fatalf("the target's connection ended (%v): it was told", err)
	default:
	}
	require.NoError(t, p.Close())
	s.endErr(t)
	require.Empty(t, s.got, "bytes passed the black hole")
	require.Equal(t, 1, p.Faults())
}

// HalfCloseDown: the client reads EOF; what it writes still reaches the target.
func TestHalfCloseDown(t *testing.T) {
	s := newEchoServer(t, "")
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, []byte("a"))
	require.Equal(t, "a", string(s.received(t, 1)))
	require.Equal(t, 1, p.Break(HalfCloseDown))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	_, err = c.Write([]byte("still up"))
	require.NoError(t, err)
	require.Equal(t, "still up", string(s.received(t, 8)))
}

// HalfCloseUp: the target reads EOF; what it writes then still reaches the client.
func TestHalfCloseUp(t *testing.T) {
	s := newEchoServer(t, "bye")
	p := newProxy(t, s.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, []byte("a"))
	require.Equal(t, 1, p.Break(HalfCloseUp))
	require.ErrorIs(t, s.endErr(t), io.EOF)
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "bye", string(got))
}

// A fault at 0 bytes happens before anything passes.
func TestPlannedAtZero(t *testing.T) {
	s := newEchoServer(t, "")
	p := newProxy(t, s.ln.Addr().String(), WithPlan(OnlyFirst(1, Step{Fault: HalfCloseDown})))
	c := dial(t, p)
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 1, p.Faults())
}

// Seeded plans are repeatable and within their bounds; Wait ends with the proxy.
func TestSeeded(t *testing.T) {
	a, b := Seeded(7, 100, 200, Reset, BlackHole, None), Seeded(7, 100, 200, Reset, BlackHole, None)
	seen := map[Fault]bool{}
	for n := range 50 {
		require.Equal(t, a(n), b(n))
		require.GreaterOrEqual(t, a(n).After, int64(100))
		require.Less(t, a(n).After, int64(200))
		seen[a(n).Fault] = true
	}
	require.Len(t, seen, 3, "every fault is drawn")
	require.NotEqual(t, Seeded(8, 100, 200, Reset)(0), a(0))

	p := newProxy(t, "127.0.0.1:1")
	require.NoError(t, p.Close())
	require.True(t, errors.Is(p.Wait(testCtx(t), 1), net.ErrClosed))
}
