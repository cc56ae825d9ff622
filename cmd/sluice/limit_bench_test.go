//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The --limit measurement (issue 21): the hand-written bucket against
// golang.org/x/time/rate (its WaitN, and limiter, which reserves with rate and sleeps
// itself), both paced the way pace paces a connection (chunks of at
// most a burst, accounted before each write), over loopback TCP with four
// connections sharing one limiter as a striped transfer's do. Reported: the rate
// reached as a share of the one asked for, and CPU seconds per GiB moved (user+sys of
// the whole process: the copying is the same for both, so the difference is the
// limiter's).
//
//	go test -run '^$' -bench BenchmarkLimiter -benchtime 1x ./cmd/sluice

// bucket is what pacing needs from a limiter.
type bucket interface {
	take(n int)
	chunk() int
	close()
}

// handBucket is the hand-written bucket --limit had before, kept to compare.
type handBucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	done   chan struct{}
	once   sync.Once
}

func newHandBucket(r int64) *handBucket {
	burst := max(float64(r)/10, 4096)
	return &handBucket{rate: float64(r), burst: burst, tokens: burst, done: make(chan struct{})}
}

func (l *handBucket) close()     { l.once.Do(func() { close(l.done) }) }
func (l *handBucket) chunk() int { return int(l.burst) }

func (l *handBucket) take(n int) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	l.tokens -= float64(n)
	wait := time.Duration(0)
	if l.tokens < 0 {
		wait = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if wait > 0 {
		sleepUntil(wait, l.done)
	}
}

// xrateBucket is the same contract on golang.org/x/time/rate's WaitN.
type xrateBucket struct {
	l      *rate.Limiter
	burst  int
	ctx    context.Context
	cancel context.CancelFunc
}

func newXrateBucket(r int64) *xrateBucket {
	burst := int(max(r/10, 4096))
	ctx, cancel := context.WithCancel(context.Background())
	return &xrateBucket{l: rate.NewLimiter(rate.Limit(r), burst), burst: burst, ctx: ctx, cancel: cancel}
}

func (x *xrateBucket) take(n int) {
	for n > 0 {
		k := min(n, x.burst)
		if x.l.WaitN(x.ctx, k) != nil {
			return
		}
		n -= k
	}
}
func (x *xrateBucket) chunk() int { return x.burst }
func (x *xrateBucket) close()     { x.cancel() }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measurePace moves data over conns loopback connections sharing l for d, and
// returns the bytes moved and the CPU time used.
func measurePace(b *testing.B, l bucket, conns int, d time.Duration) (int64, time.Duration) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	var moved atomic.Int64
	stop := make(chan struct{})
	var writers sync.WaitGroup
	buf := make([]byte, 32<<10) // an SSH channel's packets
	cpu0 := cpuTime()
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		writers.Add(1)
		go func() {
			defer writers.Done()
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for done := 0; done < len(buf); {
					n := min(len(buf)-done, l.chunk())
					l.take(n)
					m, err := c.Write(buf[done : done+n])
					moved.Add(int64(m))
					if err != nil {
						return
					}
					done += n
				}
			}
		}()
	}
	time.Sleep(d) // a measurement of a rate over time, not a synchronisation
	close(stop)
	l.close()
	writers.Wait()
	cpu := cpuTime() - cpu0
	ln.Close()
	wg.Wait()
	return moved.Load(), cpu
}

func BenchmarkLimiter(b *testing.B) {
	for _, mib := range []int64{1, 10, 100} {
		for _, impl := range []string{"hand", "xrate", "pace"} {
			b.Run(fmt.Sprintf("%s/%dMiBps", impl, mib), func(b *testing.B) {
				r := mib << 20
				var moved int64
				var cpu time.Duration
				const d = 4 * time.Second
				for range b.N {
					var l bucket = newHandBucket(r)
					switch impl {
					case "xrate":
						l = newXrateBucket(r)
					case "pace": // what --limit uses
						l = newLimiter(r)
					}
					m, c := measurePace(b, l, 4, d)
					moved += m
					cpu += c
				}
				want := float64(r) * d.Seconds() * float64(b.N)
				b.ReportMetric(100*float64(moved)/want, "%rate")
				b.ReportMetric(cpu.Seconds()/(float64(moved)/(1<<30)), "cpu-s/GiB")
			})
		}
	}
}
