package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sftp"
	"golang.org/x/term"
)

const (
	// redrawEvery is the least time between two drawings of the status line. Faster
	// than this a terminal flickers and the numbers cannot be read anyway.
	redrawEvery = 100 * time.Millisecond
	// rateWindow is how far back the rate looks: long enough to smooth the bursts of
	// a pipelined transfer, short enough to follow a real change in speed.
	rateWindow = 5 * time.Second
	// clearLine is "erase to the end of the line" (ECMA-48 EL): a shorter line drawn
	// over a longer one leaves no tail.
	clearLine = "\x1b[K"
)

// display shows one put or get as it runs and sums it up at the end. On a terminal it
// keeps one status line redrawn in place; elsewhere (a pipe, a log file) it prints
// only the summary, since a log full of carriage returns helps nobody.
//
// The library calls update for every piece of data, unthrottled and never two at a
// time; display throttles its drawing itself. A ticker also redraws, so that a stalled
// transfer shows its rate falling instead of a frozen line. All times come from now,
// which tests replace to script a transfer without sleeping.
type display struct {
	w    io.Writer
	now  func() time.Time
	live bool       // draw a status line: w is a terminal
	cols func() int // the terminal's width, 0 when unknown; nil when not live

	op, src string
	// dst is where the copy goes, as resolved before the transfer; a single file's
	// own report replaces it with the library's exact name.
	dst string

	mu      sync.Mutex
	began   time.Time
	drawnAt time.Time // also the start of the first throttle interval
	drawn   bool      // a status line is on the screen
	samples []sample  // for the rate: at began and at each drawing, the last rateWindow
	last    sftp.Progress
	events  bool            // any report arrived
	tree    bool            // a report named a file other than src
	active  map[string]bool // files started and not yet ended
	resumed int64           // bytes that part files held before this run, when their files started
	skipped int             // files --sync left alone
	failed  int             // files that failed in this try (a tree goes on past them)
	done    bool            // finish has run: draw no more

	// A transfer tried again (--retries) keeps one display: the library's counts are
	// each try's, and these carry the earlier tries'.
	before     tryTotals
	tryOffsets int64 // this try: what files already held when they started (not moved by it)
	tryDone    int64 // this try: the bytes of the files it completed
	// interrupted are the files an earlier try started and did not finish: a retry
	// continues them from bytes this run moved, not resumed ones. Kept only when
	// retrying is set.
	interrupted map[string]bool
	retrying    bool

	stopTick chan struct{}
	tickDone chan struct{}
}

type sample struct {
	t     time.Time
	moved int64
}

// tryTotals are what the earlier tries of a transfer did.
type tryTotals struct {
	files int   // completed (moved or skipped): a retry leaves them out
	bytes int64 // the completed files' bytes
	moved int64 // bytes moved
}

func newDisplay(w io.Writer, live bool, cols func() int, now func() time.Time, op, src, dst string) *display {
	began := now()
	return &display{
		w: w, now: now, live: live, cols: cols,
		op: op, src: src, dst: dst,
		began: began, drawnAt: began,
		samples:     []sample{{began, 0}},
		active:      map[string]bool{},
		interrupted: map[string]bool{},
	}
}

// update takes one report from the library.
func (d *display) update(p sftp.Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ended := p.Done || p.Err != nil
	if p.Skipped {
		d.skipped++ // up to date already: nothing of it moves, nothing counts
	}
	if !d.active[p.Path] && !ended {
		// A file's first report: its bytes were in its part file already, and are not
		// part of the rate.
		d.active[p.Path] = true
		d.tryOffsets += p.Bytes
		if !d.interrupted[p.Path] {
			d.resumed += p.Bytes
		}
	}
	if ended {
		delete(d.active, p.Path)
	}
	switch {
	case p.Done:
		delete(d.interrupted, p.Path)
		if !p.Skipped {
			d.tryDone += p.Bytes
		}
	case p.Err != nil && d.retrying:
		d.interrupted[p.Path] = true
	}
	if p.Err != nil && !p.Canceled {
		d.failed++
	}
	// Get and Put report a single file under the source name they were given, and a
	// tree's files under longer names.
	if p.Path == d.src {
		d.dst = p.Dest
	} else {
		d.tree = true
	}
	d.last, d.events = p, true
	d.redraw(d.now())
}

// retry starts the display's next try (--retries): what this one completed and moved
// is carried over, and its failures are forgotten, as their files are tried again.
func (d *display) retry() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.before.files += d.last.Files
	d.before.bytes += d.tryDone
	d.before.moved += d.last.TotalBytes - d.tryOffsets
	d.last = sftp.Progress{Path: d.last.Path, Dest: d.last.Dest}
	d.tryOffsets, d.tryDone, d.failed = 0, 0, 0
	clear(d.active)
}

// totalBytes, totalSize, files and filesTotal are the library's counts with the earlier
// tries' added. d.mu must be held.
func (d *display) totalBytes() int64 { return d.before.bytes + d.last.TotalBytes }

func (d *display) totalSize() int64 {
	if d.last.TotalSize < 0 {
		return -1
	}
	return d.before.bytes + d.last.TotalSize
}

func (d *display) files() int      { return d.before.files + d.last.Files }
func (d *display) filesTotal() int { return d.before.files + d.last.FilesTotal }

// tick redraws without a report, so the rate and ETA move on when the data does not.
func (d *display) tick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.redraw(d.now())
}

// startTicker starts the goroutine that calls tick, when there is a line to redraw.
func (d *display) startTicker() {
	if !d.live {
		return
	}
	d.stopTick, d.tickDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.tickDone)
		t := time.NewTicker(redrawEvery)
		defer t.Stop()
		for {
			select {
			case <-d.stopTick:
				return
			case <-t.C:
				d.tick()
			}
		}
	}()
}

// finish ends the display after the transfer returned err: it stops the ticker, wipes
// the status line, and on success prints the summary.
func (d *display) finish(err error) {
	if d.stopTick != nil {
		close(d.stopTick)
		<-d.tickDone
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done = true
	var out string
	if d.drawn {
		out = "\r" + clearLine
	}
	// A tree that went on past failed files copied the rest: that is summed up too,
	// before the failures are listed.
	var te *sftp.TreeError
	if err == nil || errors.As(err, &te) {
		out += d.summary(d.now()) + "\n"
	}
	if out != "" {
		_, _ = io.WriteString(d.w, out)
	}
}

// redraw draws the status line unless one was drawn less than redrawEvery ago. The
// first waits that long after the start too: a transfer over by then shows only
// its summary, without a line flashing up first. d.mu must be held.
func (d *display) redraw(now time.Time) {
	if !d.live || d.done || !d.events || now.Sub(d.drawnAt) < redrawEvery {
		return
	}
	moved := d.moved()
	d.samples = append(d.samples, sample{now, moved})
	// Keep the newest sample at or before the window's start, so the rate spans the
	// whole window once there is that much history.
	cut := now.Add(-rateWindow)
	i := 0
	for i+1 < len(d.samples) && !d.samples[i+1].t.After(cut) {
		i++
	}
	d.samples = d.samples[i:]
	rate := -1.0
	if s := d.samples[0]; now.After(s.t) {
		rate = float64(moved-s.moved) / now.Sub(s.t).Seconds()
	}
	cols := 0
	if d.cols != nil {
		cols = d.cols()
	}
	_, _ = io.WriteString(d.w, "\r"+d.status(rate, cols)+clearLine)
	d.drawn, d.drawnAt = true, now
}

// moved is the bytes this run has moved: what files held when they started was
// there before this try.
func (d *display) moved() int64 { return d.before.moved + d.last.TotalBytes - d.tryOffsets }

// status is the line shown while the transfer runs, e.g.
// "big.bin  512.0 MiB / 1.0 GiB   50%  100.0 MiB/s  ETA 0:05", or for a tree
// "12/52 files  3.4 MiB / 10.0 MiB   34%  1.2 MiB/s  ETA 0:06". rate is in bytes per
// second, negative when not known yet; cols is the terminal's width, 0 if unknown.
func (d *display) status(rate float64, cols int) string {
	p := d.last
	var head string
	if d.tree {
		head = fmt.Sprintf("%d/%d files", d.files(), d.filesTotal())
	} else if d.op == "get" {
		head = escapeText(path.Base(p.Path))
	} else {
		head = escapeText(filepath.Base(p.Path))
	}
	rateStr := "- B/s"
	if rate >= 0 {
		rateStr = formatBytes(int64(rate)) + "/s"
	}
	var tail string
	total, size := d.totalBytes(), d.totalSize()
	if size < 0 { // the server did not give a size: no total, percentage or ETA
		tail = fmt.Sprintf("  %s  %s", formatBytes(total), rateStr)
	} else {
		pct := 100
		if size > 0 {
			pct = min(100, int(float64(total)*100/float64(size)))
		}
		eta := "--:--"
		if left := size - total; left <= 0 {
			eta = formatETA(0)
		} else if rate > 0 {
			eta = formatETA(time.Duration(float64(left) / rate * float64(time.Second)))
		}
		tail = fmt.Sprintf("  %s / %s  %3d%%  %s  ETA %s", formatBytes(total), formatBytes(size), pct, rateStr, eta)
	}
	return fit(head, tail, cols, !d.tree)
}

// fit keeps head+tail within cols-1 runes: writing the last column makes some
// terminals wrap, and a wrapped line can no longer be redrawn with '\r'. A file name
// loses its start, where long paths differ least; anything else is cut at the end.
func fit(head, tail string, cols int, shortenHead bool) string {
	line := head + tail
	if cols <= 0 {
		return line
	}
	room := cols - 1
	over := utf8.RuneCountInString(line) - room
	if over <= 0 {
		return line
	}
	if shortenHead {
		if keep := utf8.RuneCountInString(head) - over - 3; keep >= 1 {
			r := []rune(head)
			return "..." + string(r[len(r)-keep:]) + tail
		}
	}
	return string([]rune(line)[:max(room, 0)])
}

// summary is the line printed when a transfer succeeds, e.g.
// "put big.bin -> /tmp/x: 1073741824 bytes in 2.31 s, 443.3 MiB/s", or for a tree
// "get /srv/in -> in: 52 files, 1048576 bytes in 0.40 s, 2.5 MiB/s". Bytes that part
// files already held are counted in the total, shown as resumed, and left out of the
// rate.
func (d *display) summary(now time.Time) string {
	secs := now.Sub(d.began).Seconds()
	// A copy done within the clock's resolution has no meaningful rate; avoid +Inf.
	rate := 0.0
	if secs > 0 {
		rate = float64(d.moved()) / (1 << 20) / secs
	}
	what := fmt.Sprintf("%d bytes", d.totalBytes())
	if d.resumed > 0 {
		what += fmt.Sprintf(" (%d resumed)", d.resumed)
	}
	if d.skipped > 0 {
		what += fmt.Sprintf(", %d unchanged skipped", d.skipped)
	}
	if d.failed > 0 {
		what += fmt.Sprintf(", %d failed", d.failed)
	}
	// A single file always reports; a successful transfer without any report was a
	// tree without files.
	if d.tree || !d.events {
		noun := "files"
		if d.files() == 1 {
			noun = "file"
		}
		what = fmt.Sprintf("%d %s, %s", d.files(), noun, what)
	}
	// src and dst may hold server names: escaped like everything else printed.
	return escapeText(fmt.Sprintf("%s %s -> %s: %s in %.2f s, %.1f MiB/s", d.op, d.src, d.dst, what, secs, rate))
}

// formatBytes gives n in binary units with one decimal, e.g. "999 B", "1.5 KiB".
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := -1
	for v >= 1024 && i+1 < len(units) {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// formatETA gives d as m:ss or h:mm:ss, rounded to the second; beyond 99 hours it is
// a guess too poor to show.
func formatETA(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	h, m, sec := s/3600, s/60%60, s%60
	switch {
	case h > 99:
		return "--:--"
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	default:
		return fmt.Sprintf("%d:%02d", m, sec)
	}
}

// detectTerminal reports whether w is a terminal that can redraw a line in place, and
// if so gives a function returning its current width (asked at each drawing, so a
// resized window is followed).
//
// golang.org/x/term decides, rather than a ModeCharDevice check on the file: its
// TCGETS ioctl tells a terminal from /dev/null and other character devices, it works
// on Windows consoles too, and GetSize is needed anyway to keep the line from
// wrapping. It was already in the module graph, through golang.org/x/crypto.
func detectTerminal(w io.Writer) (bool, func() int) {
	f, ok := w.(*os.File)
	if !ok {
		return false, nil
	}
	fd := int(f.Fd())
	// A dumb terminal (Emacs's shell, say) takes '\r' but not the escape that clears
	// the rest of the line.
	if !term.IsTerminal(fd) || strings.TrimSpace(os.Getenv("TERM")) == "dumb" {
		return false, nil
	}
	return true, func() int {
		w, _, err := term.GetSize(fd)
		if err != nil {
			return 0
		}
		return w
	}
}
