package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// reporter tells the user about transfers. Today it prints one summary line per
// finished file; a live display would hook in at start and done too (and would count
// bytes with a wrapper that keeps the *os.File's ReaderAt/WriterAt visible to the
// library). It is safe for concurrent use, because parallel transfers (-j) will share
// one.
type reporter struct {
	mu  sync.Mutex // keeps a line whole; w may be shared with other writers
	w   io.Writer
	now func() time.Time
}

func newReporter(w io.Writer) *reporter { return &reporter{w: w, now: time.Now} }

// start marks the beginning of t and returns the time to pass to done.
func (r *reporter) start(t *transfer) time.Time { return r.now() }

// done reports a transfer that completed with n bytes.
func (r *reporter) done(t *transfer, n int64, began time.Time) {
	line := summary(t, n, r.now().Sub(began))
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(r.w, line)
}

// summary is the line printed when a transfer ends, e.g.
// "put big.bin -> /tmp/x: 1073741824 bytes in 2.31 s, 443.2 MiB/s".
func summary(t *transfer, n int64, d time.Duration) string {
	secs := d.Seconds()
	// A file copied within the clock's resolution has no meaningful rate; avoid +Inf.
	rate := 0.0
	if secs > 0 {
		rate = float64(n) / (1 << 20) / secs
	}
	return fmt.Sprintf("%s %s -> %s: %d bytes in %.2f s, %.1f MiB/s", t.op, t.from(), t.to(), n, secs, rate)
}
