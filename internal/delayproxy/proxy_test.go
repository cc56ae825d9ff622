package delayproxy

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pattern returns n pseudo-random bytes, different per seed, so that a reordered or
// duplicated chunk shows up in the comparison.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sinkServer is a target that, per connection, reads everything while writing its own
// reply stream, then half-closes; it reports the hash of what it received.
type sinkServer struct {
	ln       net.Listener
	reply    []byte
	received chan [sha256.Size]byte
	wg       sync.WaitGroup
}

func newSinkServer(t *testing.T, reply []byte) *sinkServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &sinkServer{ln: ln, reply: reply, received: make(chan [sha256.Size]byte, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go s.serve(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *sinkServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := c.Write(s.reply); err == nil {
			_ = c.(*net.TCPConn).CloseWrite()
		}
	}()
	h := sha256.New()
	_, _ = io.Copy(h, c)
	wg.Wait()
	s.received <- [sha256.Size]byte(h.Sum(nil))
}

// exchange sends up through addr while reading the reply, and returns the reply. It runs
// on helper goroutines, so it reports errors instead of failing the test itself.
func exchange(addr string, up []byte) ([]byte, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(up)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	down, rerr := io.ReadAll(c)
	if err := <-werr; err != nil {
		return nil, err
	}
	return down, rerr
}

func TestPassThroughBothWays(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
		opts  []Option
	}{
		{name: "no-delay", delay: 0},
		{name: "delay", delay: 2 * time.Millisecond},
		// A tiny queue exercises back-pressure: the reader must wait for the writer.
		{name: "small-queue", delay: time.Millisecond, opts: []Option{WithMaxQueued(1000)}},
		{name: "rate", delay: time.Millisecond, opts: []Option{WithRate(64 << 20), WithDownRate(32 << 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down := pattern(1, 3<<20+17)
			srv := newSinkServer(t, down)
			p, err := New(srv.ln.Addr().String(), tc.delay, tc.opts...)
			require.NoError(t, err)
			defer p.Close()

			const conns = 3
			var wg sync.WaitGroup
			got := make([][]byte, conns)
			errs := make([]error, conns)
			ups := make([][]byte, conns)
			for i := range conns {
				ups[i] = pattern(uint64(10+i), 2<<20+i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], errs[i] = exchange(p.Addr(), ups[i])
				}()
			}
			wg.Wait()
			want := map[[sha256.Size]byte]int{}
			for i := range conns {
				require.NoError(t, errs[i], "connection %d", i)
				require.True(t, bytes.Equal(down, got[i]), "connection %d: reply corrupted (%d bytes, want %d)", i, len(got[i]), len(down))
				want[sha256.Sum256(ups[i])]++
			}
			for range conns {
				h := <-srv.received
				require.Positive(t, want[h], "the target received a stream nobody sent")
				want[h]--
			}
		})
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	// A target that accepts and then stays silent: the proxied connection stays open
	// until Close tears it down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	p, err := New(ln.Addr().String(), 5*time.Millisecond)
	require.NoError(t, err)

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("queued, maybe never delivered"))
	require.NoError(t, err)
	server := <-accepted
	defer server.Close()
	require.NoError(t, ln.Close())

	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the client side must see the connection end")
	require.False(t, isTimeout(err), "Close did not end the connection")

	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	require.Error(t, err, "the proxy must stop listening")
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestUnreachableTargetClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())

	p, err := New(dead, 0)
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, isTimeout(err))
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []Option{WithRate(0), WithUpRate(-1), WithDownRate(0), WithMaxQueued(0)} {
		_, err := New("127.0.0.1:1", 0, o)
		require.Error(t, err)
	}
	_, err := New("127.0.0.1:1", -time.Millisecond)
	require.Error(t, err)
}

// TestSSHThroughProxy runs an SSH session and the sftp subsystem handshake across the
// proxy to a real sshd, the way the benchmark harness uses it.
func TestSSHThroughProxy(t *testing.T) {
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{Ciphers: []string{sshdtest.CipherAES128GCM}})
	p, err := New(s.Addr, 2*time.Millisecond)
	require.NoError(t, err)
	defer p.Close()

	c, err := s.DialVia(p.Addr())
	require.NoError(t, err)
	defer c.Close()
	sess, err := c.NewSession()
	require.NoError(t, err)
	defer sess.Close()
	sess.Stdin = bytes.NewReader(pattern(7, 1<<20))
	out, err := sess.Output("sha256sum")
	require.NoError(t, err)
	sum := sha256.Sum256(pattern(7, 1<<20))
	require.Contains(t, string(out), hexString(sum[:]))
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, digits[x>>4], digits[x&15])
	}
	return string(out)
}

// BenchmarkPassThrough moves a stream one way through the proxy with no delay, to show
// what the proxy itself costs next to the clients it sits between.
func BenchmarkPassThrough(b *testing.B) {
	const size = 16 << 20
	data := pattern(3, size)
	srv := &sinkServer{reply: nil}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv.ln, srv.received = ln, make(chan [sha256.Size]byte, 1)
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			srv.wg.Add(1)
			go srv.serve(c)
		}
	}()
	defer func() {
		_ = ln.Close()
		srv.wg.Wait()
	}()
	p, err := New(ln.Addr().String(), 0)
	require.NoError(b, err)
	defer p.Close()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		_, err := exchange(p.Addr(), data)
		require.NoError(b, err)
		<-srv.received
	}
}
