package main

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"100": 100 << 10, "500K": 500 << 10, "10M": 10 << 20, "1.5M": 3 << 19, "2G": 2 << 30,
		"4096B": 4096, "10MiB/s": 10 << 20, "1m": 1 << 20,
	} {
		got, err := parseRate(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-1M", "fast", "1T", "1e30"} {
		_, err := parseRate(in)
		require.Error(t, err, in)
	}
}

// The bucket, on a scripted clock: a burst passes at once, then the debt is slept
// off at the rate, and idle time refills no more than one burst.
func TestLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	var slept []time.Duration
	l := newLimiter(100 << 10) // burst 10 KiB
	l.now = func() time.Time { return now }
	l.sleep = func(d time.Duration, _ <-chan struct{}) { slept = append(slept, d); now = now.Add(d) }

	l.take(10 << 10)
	require.Empty(t, slept, "one burst needs no wait")
	l.take(10 << 10)
	require.Equal(t, []time.Duration{100 * time.Millisecond}, slept, "the next 10 KiB take 1/10 s at 100 KiB/s")

	now = now.Add(time.Hour)
	slept = nil
	l.take(10 << 10)
	l.take(5 << 10)
	require.Equal(t, []time.Duration{50 * time.Millisecond}, slept, "an hour idle refills one burst, not an hour's worth")

	// Writes go in chunks of at most a burst, each accounted before it is written.
	var out bytes.Buffer
	slept = nil
	n, err := limitedWrite(&out, l, make([]byte, 25<<10))
	require.NoError(t, err)
	require.Equal(t, 25<<10, n)
	require.Equal(t, 25<<10, out.Len())
	var total time.Duration
	for _, d := range slept {
		total += d
	}
	require.Equal(t, 250*time.Millisecond, total.Round(time.Millisecond))
}

// TestLimiterCloseEndsWait: a take paying off a long debt (here more than an hour,
// at 1 byte/s) returns once the limiter is closed, as it is when the connection closes on Ctrl-C,
// instead of sleeping the debt off.
func TestLimiterCloseEndsWait(t *testing.T) {
	t.Parallel()
	l := newLimiter(1)
	var sleeping sync.WaitGroup
	sleeping.Add(1)
	real := l.sleep
	l.sleep = func(d time.Duration, done <-chan struct{}) {
		require.Greater(t, d, time.Hour)
		sleeping.Done()
		real(d, done)
	}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		l.take(2 * l.chunk())
	}()
	sleeping.Wait()
	l.close()
	select {
	case <-returned:
	case <-time.After(testTimeout):
		t.Fatal("take still sleeping after close")
	}
	l.close() // idempotent
	l.sleep = real
	l.take(1 << 20) // no more waiting once closed
}

// One session's connections share its --limit: a burst on one leaves none for the
// other, and closing one does not end the pacing of the rest; closing the session's
// pace does.
func TestPaceSharedByConnections(t *testing.T) {
	t.Parallel()
	p := newPace(100 << 10) // bursts of 10 KiB
	now := time.Unix(0, 0)
	var slept []time.Duration
	p.wr.now = func() time.Time { return now }
	p.wr.sleep = func(d time.Duration, done <-chan struct{}) {
		select {
		case <-done:
			return
		default:
		}
		slept = append(slept, d)
		now = now.Add(d)
	}
	a1, a2 := net.Pipe()
	b1, b2 := net.Pipe()
	defer a2.Close()
	defer b2.Close()
	go io.Copy(io.Discard, a2)
	go io.Copy(io.Discard, b2)
	ca, cb := p.conn(a1), p.conn(b1)

	_, err := ca.Write(make([]byte, 10<<10))
	require.NoError(t, err)
	require.Empty(t, slept)
	_, err = cb.Write(make([]byte, 10<<10))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{100 * time.Millisecond}, slept, "the second connection paid for the first's burst")

	require.NoError(t, ca.Close())
	slept = nil
	_, err = cb.Write(make([]byte, 10<<10))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{100 * time.Millisecond}, slept, "still paced after another connection closed")

	p.close()
	slept = nil
	_, err = cb.Write(make([]byte, 10<<10))
	require.NoError(t, err)
	require.Empty(t, slept, "no pacing once the session's pace is closed")
	require.NoError(t, cb.Close())
	var nilPace *pace
	require.Equal(t, a1, nilPace.conn(a1), "no --limit: the connection as it is")
}
