package sftp

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/testserver"
)

// The keepalive of these tests: short, so that a silent connection is given up
// within a second, and long enough that a loaded machine answering a probe late is
// not taken for silence before the test breaks the connection.
const (
	testKeepalive      = 200 * time.Millisecond
	testKeepaliveCount = 3
)

// withKeepaliveAnswered runs fn each time a keepalive is answered.
func withKeepaliveAnswered(fn func()) Option {
	return func(o *options) error {
		o.keepaliveAnswered = fn
		return nil
	}
}

// answers returns an option counting keepalive answers, and the channel they arrive
// on (a test waits for n of them: they are its clock).
func answers() (Option, <-chan struct{}) {
	ch := make(chan struct{}, 64)
	return withKeepaliveAnswered(func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}), ch
}

// awaitAnswers waits for n more keepalive answers on ch, dropping those that came
// before.
func awaitAnswers(t *testing.T, ch <-chan struct{}, n int) {
	t.Helper()
	for len(ch) > 0 {
		<-ch
	}
	for range n {
		tsRecv(t, ch, "a keepalive answer")
	}
}

// requireSilent checks that err is a dead channel's error whose cause is the server's
// silence.
func requireSilent(t testing.TB, err error) {
	t.Helper()
	requireClosedConn(t, err)
	var silent *errServerSilent
	require.ErrorAs(t, err, &silent, "want the server's silence as the cause, got %v", err)
}

// requireDone waits, bounded, for c's Done.
func requireDone(t testing.TB, c *Client) {
	t.Helper()
	tsRecv(t, tsGo(func() struct{} { <-c.Done(); return struct{}{} }), "Client.Done")
}

// stallSwitch is a Stall hook whose matches a test adds as it goes.
type stallSwitch struct {
	mu      sync.Mutex
	matches []func(testserver.Request) bool
}

func (s *stallSwitch) hook(r testserver.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.matches {
		if m(r) {
			return true
		}
	}
	return false
}

func (s *stallSwitch) add(m func(testserver.Request) bool) {
	s.mu.Lock()
	s.matches = append(s.matches, m)
	s.mu.Unlock()
}

func (s *stallSwitch) clear() {
	s.mu.Lock()
	s.matches = nil
	s.mu.Unlock()
}

// onPath matches requests of type typ on name.
func onPath(typ uint8, name string) func(testserver.Request) bool {
	return func(r testserver.Request) bool { return r.Type == typ && r.Path == name }
}

func TestWithKeepaliveChecksItsArguments(t *testing.T) {
	for _, bad := range []struct {
		interval time.Duration
		count    int
	}{{-time.Second, 3}, {25 * time.Hour, 3}, {time.Second, 0}, {time.Second, 1001}} {
		_, err := newClient([]Option{WithKeepalive(bad.interval, bad.count)})
		require.Error(t, err, "WithKeepalive(%v, %d)", bad.interval, bad.count)
	}
	c, err := newClient(nil)
	require.NoError(t, err)
	require.Equal(t, keepaliveSpec{interval: defaultKeepaliveInterval, count: defaultKeepaliveCount}, c.opts.keepalive, "on by default")
	c, err = newClient([]Option{WithKeepalive(0, 0)})
	require.NoError(t, err)
	require.Zero(t, c.opts.keepalive.interval, "WithKeepalive(0, 0) turns it off")
	for _, bad := range []time.Duration{-time.Second, 25 * time.Hour} {
		_, err := newClient([]Option{WithSFTPKeepalive(bad)})
		require.Error(t, err, "WithSFTPKeepalive(%v)", bad)
	}
}

// The keepalive is on by default on an SSH connection, off on a pipe unless asked
// for, and off when turned off.
func TestKeepaliveDefaults(t *testing.T) {
	tsNoLeaks(t)
	s := newSSHTestServer(t, testserver.Options{})
	for _, tc := range []struct {
		name string
		opts []Option
		on   bool
	}{{"default", nil, true}, {"off", []Option{WithKeepalive(0, 0)}, false}} {
		sc := s.dial(t, s.addr)
		c, err := NewClient(testCtx(t), sc, tc.opts...)
		require.NoError(t, err)
		base := c.source.(*sshChannels).base
		require.Equal(t, tc.on, base.alive != nil, "%s: the SSH connection's keepalive", tc.name)
		require.Nil(t, c.sftpAlive, "%s: no SFTP keepalive unless asked for", tc.name)
		require.NoError(t, c.Close())
	}
	c, _ := newTestServerClient(t, testserver.Options{})
	require.Nil(t, c.sftpAlive, "a pipe Client probes only when WithKeepalive is given")
}

// A connection that goes silent (a black hole: no FIN, no RST) ends every call
// waiting on it, each with an error matching net.ErrClosed whose cause says the server
// stopped answering, and the Client with it: Done is closed and Err says why, as for
// a reset. Each call is left waiting on a reply the server withholds, so that every
// kind of wait is under way when the link goes silent.
func TestKeepaliveGivesUpASilentConnection(t *testing.T) {
	tsNoLeaks(t)
	stalls := &stallSwitch{}
	s := newSSHTestServer(t, testserver.Options{Stall: stalls.hook})
	require.NoError(t, s.srv.WriteFile("big", randBytes(6<<20, 1), 0o644))
	require.NoError(t, s.srv.WriteFile("closeme", []byte("x"), 0o644))
	p := blackHoleProxy(t, s)
	sc := s.dial(t, p.Addr())
	c, err := NewClient(testCtx(t), sc, WithKeepalive(testKeepalive, testKeepaliveCount))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t)

	type call struct {
		name string
		err  <-chan error
	}
	var calls []call
	waiting := func(name string, m func(testserver.Request) bool, f func() error) {
		t.Helper()
		stalls.add(m)
		n := s.srv.Stalled()
		calls = append(calls, call{name, tsGo(f)})
		tsWaitStalled(t, s.srv, n+1)
	}
	waiting("Stat", onPath(testserver.TypeStat, "statme"), func() error {
		_, err := c.Stat(ctx, "statme")
		return err
	})
	waiting("Open", onPath(testserver.TypeOpen, "openme"), func() error {
		_, err := c.Open(ctx, "openme")
		return err
	})
	f, err := c.Open(ctx, "closeme")
	require.NoError(t, err)
	waiting("File.Close", ofType(testserver.TypeClose), f.Close)
	down, err := c.Open(ctx, "big")
	require.NoError(t, err)
	waiting("download", atOrPast(testserver.TypeRead, 4<<20), func() error {
		_, err := down.WriteTo(io.Discard)
		return err
	})
	up, err := c.Create(ctx, "up")
	require.NoError(t, err)
	waiting("upload", atOrPast(testserver.TypeWrite, 4<<20), func() error {
		_, err := up.ReadFrom(bytes.NewReader(randBytes(6<<20, 2)))
		return err
	})
	require.NoError(t, c.Err(), "the Client is alive while the server withholds replies")

	require.Positive(t, p.Break(faultproxy.BlackHole))
	for _, cl := range calls {
		err := tsRecv(t, cl.err, cl.name)
		requireSilent(t, err)
	}

	requireDone(t, c)
	requireSilent(t, c.Err())
	_, err = c.Stat(ctx, "/")
	requireSilent(t, err)
	require.ErrorContains(t, c.Err(), "the server stopped answering")
}

// A reply the server takes long over (a CLOSE that uploads to an object store) is not
// silence: the SSH layer answers the keepalives meanwhile. The CLOSE is withheld while
// more keepalives are answered than the count allows intervals of silence, with
// nothing else on the connection; then it is answered, and the Client goes on.
func TestKeepaliveWaitsOutASlowReply(t *testing.T) {
	tsNoLeaks(t)
	s := newSSHTestServer(t, testserver.Options{Stall: stallFirst(ofType(testserver.TypeClose))})
	sc := s.dial(t, s.addr)
	count, answered := answers()
	c, err := NewClient(testCtx(t), sc, WithKeepalive(testKeepalive, 2), count)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	f, err := c.Create(testCtx(t), "slow")
	require.NoError(t, err)
	_, err = f.Write([]byte("flushed at close"))
	require.NoError(t, err)
	closed := tsGo(f.Close)
	tsWaitStalled(t, s.srv, 1)
	awaitAnswers(t, answered, 2+2)
	require.NoError(t, c.Err(), "given up while a reply was slow")
	require.Empty(t, closed, "Close returned before its reply")
	s.srv.ReleaseStalled()
	require.NoError(t, tsRecv(t, closed, "File.Close"))
	requireWorks(t, c)
}

// WithSFTPKeepalive sends a REALPATH on the main channel every interval, for servers
// that count only SFTP requests as activity; the SSH keepalive is off here, so every
// answer counted is one of them.
func TestSFTPKeepaliveSendsRequests(t *testing.T) {
	tsNoLeaks(t)
	s := newSSHTestServer(t, testserver.Options{})
	sc := s.dial(t, s.addr)
	count, answered := answers()
	c, err := NewClient(testCtx(t), sc, WithKeepalive(0, 0), WithSFTPKeepalive(testKeepalive), count)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	before := s.srv.Requests(testserver.TypeRealpath)
	awaitAnswers(t, answered, 3)
	require.GreaterOrEqual(t, s.srv.Requests(testserver.TypeRealpath)-before, 3, "REALPATHs the server saw")
	requireWorks(t, c)
	require.NoError(t, c.Close())
}

// A striped transfer whose sibling lanes are on a dialled connection that goes silent
// finishes, byte for byte, on the lanes left: the silent connection is given up and
// closed, its lanes dropped like dead ones, and what they had in flight asked again.
// Each lane's requests past 12 MiB are withheld until the sibling lanes are sure to
// hold some (more than one lane's cap), so the silence strands them.
func TestKeepaliveDropsSilentLanes(t *testing.T) {
	for _, dir := range []string{"download", "upload"} {
		t.Run(dir, func(t *testing.T) {
			tsNoLeaks(t)
			stalls := &stallSwitch{}
			s := newSSHTestServer(t, testserver.Options{Stall: stalls.hook})
			data := randBytes(stripeSize, 3)
			require.NoError(t, s.srv.WriteFile("src", data, 0o644))
			dialled := blackHoleProxy(t, s)
			sc := s.dial(t, s.addr)
			dials := recordDials(t, s, dialled.Addr())
			c, err := NewClient(testCtx(t), sc, withStripeMinRTT(0), WithChannels(4), WithDialer(dials.dial),
				withChannelsPerConn(2), WithKeepalive(testKeepalive, testKeepaliveCount))
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			pinLanes(c, 4)
			readyDataChannel(t, c)

			typ, lanesCap := uint8(testserver.TypeRead), readLaneCap(c.limits.MaxRead)
			if dir == "upload" {
				typ, lanesCap = testserver.TypeWrite, writeLaneCap(c.limits.MaxWrite)
			}
			stalls.add(atOrPast(typ, 12<<20))
			var got bytes.Buffer
			done := tsGo(func() error {
				if dir == "download" {
					f, err := c.Open(testCtx(t), "src")
					if err != nil {
						return err
					}
					defer f.Close()
					_, err = f.WriteTo(&got)
					return err
				}
				f, err := c.Create(testCtx(t), "dst")
				if err != nil {
					return err
				}
				if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			})
			tsWaitStalled(t, s.srv, lanesCap+1)
			silenced := dials.dialled()
			require.Positive(t, dialled.Break(faultproxy.BlackHole), "no lane was on a dialled connection")
			stalls.clear()
			s.srv.ReleaseStalled()
			require.NoError(t, tsRecv(t, done, dir))
			if dir == "download" {
				require.True(t, bytes.Equal(data, got.Bytes()), "the download differs")
			} else {
				up, err := s.srv.ReadFile("dst")
				require.NoError(t, err)
				require.True(t, bytes.Equal(data, up), "the upload differs")
			}
			require.NoError(t, c.Err())
			for _, dc := range silenced {
				tsRecv(t, tsGo(dc.Wait), "the Client closing a silent connection it dialled")
			}
		})
	}
}

// On a pipe the probe is an SFTP request. A server that stops answering with
// nothing else to do is given up: the Client ends with the silence as its cause, no
// sooner than count intervals after it fell silent and within one interval more. The
// clock is synctest's: it moves only when every goroutine waits, so the bound is
// the mechanism's arithmetic, not the machine's speed.
func TestPipeKeepaliveGivesUpASilentServer(t *testing.T) {
	tsNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.New(testserver.Options{Stall: ofType(testserver.TypeRealpath)})
		defer srv.Close()
		r, w := srv.Conn()
		c, err := NewClientPipe(context.Background(), r, w, WithKeepalive(time.Second, 3))
		require.NoError(t, err)
		defer c.Close()
		silent := time.Now() // VERSION and limits came in at this instant: nothing after
		<-c.Done()
		requireSilent(t, c.Err())
		took := time.Since(silent)
		require.GreaterOrEqual(t, took, 3*time.Second)
		require.LessOrEqual(t, took, 4*time.Second)
	})
}

// On a pipe, a slow reply holds the probe behind it at a server that answers in
// order (as sftp-server does): the probe is not the oldest request out, so its
// silence is not judged, however long the CLOSE takes.
func TestPipeKeepaliveWaitsOutASlowReply(t *testing.T) {
	tsNoLeaks(t)
	synctest.Test(t, func(t *testing.T) {
		var inOrder atomic.Bool // once the CLOSE is withheld, so is every reply after it
		srv := testserver.New(testserver.Options{Stall: func(r testserver.Request) bool {
			if r.Type == testserver.TypeClose {
				inOrder.Store(true)
			}
			return inOrder.Load()
		}})
		defer srv.Close()
		r, w := srv.Conn()
		c, err := NewClientPipe(context.Background(), r, w, WithKeepalive(time.Second, 3))
		require.NoError(t, err)
		defer c.Close()
		f, err := c.Create(context.Background(), "slow")
		require.NoError(t, err)
		closed := make(chan error, 1)
		go func() { closed <- f.Close() }()
		time.Sleep(time.Minute) // twenty times the keepalive's allowance of silence
		synctest.Wait()
		require.NoError(t, c.Err(), "given up while a reply was slow")
		require.Empty(t, closed, "Close returned before its reply")
		require.Positive(t, srv.Stalled()-1, "no probe went out behind the CLOSE")
		inOrder.Store(false)
		srv.ReleaseStalled()
		require.NoError(t, <-closed)
		_, err = c.Stat(context.Background(), "/")
		require.NoError(t, err)
		require.NoError(t, c.Err())
	})
}

// A Client closed while its keepalive waits for an answer (the server's SSH layer
// stopped for good) returns from Close, and its goroutines end once the caller closes
// the SSH connection (the leak check).
func TestKeepaliveCloseWhileProbing(t *testing.T) {
	tsNoLeaks(t)
	s := newSSHTestServer(t, testserver.Options{})
	p := blackHoleProxy(t, s)
	sc := s.dial(t, p.Addr())
	count, answered := answers()
	c, err := NewClient(testCtx(t), sc, WithKeepalive(testKeepalive, 1000), count, withStallGrace(testKeepalive))
	require.NoError(t, err)
	awaitAnswers(t, answered, 1)
	require.Positive(t, p.Break(faultproxy.BlackHole))
	closed := tsGo(c.Close)
	require.NoError(t, tsRecv(t, closed, "Client.Close"))
	require.ErrorIs(t, c.Err(), errClientClosed)
}
