package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sftp"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

// script drives a display with a clock that moves only when told to.
type script struct {
	t     *testing.T
	clock time.Time
	out   bytes.Buffer
	d     *display
}

func newScript(t *testing.T, live bool, cols int, op, src, dst string) *script {
	s := &script{t: t, clock: time.Unix(1_000_000, 0)}
	var colsFn func() int
	if live {
		colsFn = func() int { return cols }
	}
	s.d = newDisplay(&s.out, live, colsFn, func() time.Time { return s.clock }, op, src, dst)
	return s
}

// at sets the clock to ms after the start, then delivers p (if any) or a tick.
func (s *script) at(ms int, p *sftp.Progress) {
	s.clock = time.Unix(1_000_000, 0).Add(time.Duration(ms) * time.Millisecond)
	if p == nil {
		s.d.tick()
	} else {
		s.d.update(*p)
	}
}

// take returns what the display wrote since the last take.
func (s *script) take() string {
	str := s.out.String()
	s.out.Reset()
	return str
}

// oneFile is a report on a single file of size bytes, bytes of them done.
func oneFile(path, dest string, done, size int64) *sftp.Progress {
	return &sftp.Progress{Path: path, Dest: dest, Bytes: done, Size: size,
		TotalBytes: done, TotalSize: size, FilesTotal: 1, InProgress: 1}
}

func finished(p *sftp.Progress) *sftp.Progress {
	p.Done, p.Files, p.InProgress = true, 1, 0
	return p
}

// A single file on a terminal: drawn no sooner than 100 ms after the start and then
// at most every 100 ms, with the rate over the last five seconds; wiped at the end
// and followed by the summary.
func TestDisplaySingleFileLive(t *testing.T) {
	t.Parallel()
	const size = 100 * mib
	s := newScript(t, true, 80, "get", "/srv/big.bin", "big.bin")
	src, dst := "/srv/big.bin", "/home/u/big.bin" // Dest from the reports wins

	s.at(0, oneFile(src, dst, 0, size))
	s.at(50, oneFile(src, dst, 1*mib, size))
	require.Empty(t, s.take(), "nothing is drawn in the first 100 ms")

	// 2 MiB in 0.1 s: 20 MiB/s; 98 MiB left: 4.9 s.
	s.at(100, oneFile(src, dst, 2*mib, size))
	require.Equal(t, "\rbig.bin  2.0 MiB / 100.0 MiB    2%  20.0 MiB/s  ETA 0:05\x1b[K", s.take())

	s.at(150, oneFile(src, dst, 3*mib, size))
	s.at(199, nil)
	require.Empty(t, s.take(), "throttled: less than 100 ms since the last drawing")

	// 5 MiB in 0.25 s: still 20 MiB/s; 95 MiB left: 4.75 s.
	s.at(250, oneFile(src, dst, 5*mib, size))
	require.Equal(t, "\rbig.bin  5.0 MiB / 100.0 MiB    5%  20.0 MiB/s  ETA 0:05\x1b[K", s.take())

	// Stalled: a tick at 6 s looks back 5 s, to the drawing at 0.25 s, and sees
	// nothing moved since.
	s.at(6000, nil)
	require.Equal(t, "\rbig.bin  5.0 MiB / 100.0 MiB    5%  0 B/s  ETA --:--\x1b[K", s.take())

	// Moving again: 5 MiB since the 0.25 s sample, 6 s ago: 873813 B/s (853.3 KiB/s);
	// 90 MiB left at that rate is 108 s.
	s.at(6050, oneFile(src, dst, 7*mib, size))
	require.Empty(t, s.take())
	s.at(6250, oneFile(src, dst, 10*mib, size))
	require.Equal(t, "\rbig.bin  10.0 MiB / 100.0 MiB   10%  853.3 KiB/s  ETA 1:48\x1b[K", s.take())

	// Done at 7 s; the window now starts at 2 s, so the 0.25 s sample is still the
	// oldest one kept: 95 MiB in 6.75 s is 14.07 MiB/s.
	s.at(7000, finished(oneFile(src, dst, size, size)))
	require.Equal(t, "\rbig.bin  100.0 MiB / 100.0 MiB  100%  14.1 MiB/s  ETA 0:00\x1b[K", s.take())
	s.at(7400, nil) // a last tick before finish: no report since, nothing new to say
	require.Equal(t, "\rbig.bin  100.0 MiB / 100.0 MiB  100%  13.3 MiB/s  ETA 0:00\x1b[K", s.take())

	s.d.finish(nil)
	require.Equal(t, "\r\x1b[K"+"get /srv/big.bin -> /home/u/big.bin: 104857600 bytes in 7.40 s, 13.5 MiB/s\n", s.take())
	s.at(8000, nil)
	require.Empty(t, s.take(), "nothing after finish")
}

// The same transfer with stderr not a terminal prints only the summary.
func TestDisplayNotTerminal(t *testing.T) {
	t.Parallel()
	const size = 100 * mib
	s := newScript(t, false, 0, "put", "big.bin", "/srv/in")
	src, dst := "big.bin", "/srv/in/big.bin"
	for i, ms := range []int{0, 100, 250, 6000, 6250} {
		s.at(ms, oneFile(src, dst, int64(i)*mib, size))
		s.at(ms+1, nil)
	}
	s.at(7000, finished(oneFile(src, dst, size, size)))
	require.Empty(t, s.take())
	s.d.finish(nil)
	require.Equal(t, "put big.bin -> /srv/in/big.bin: 104857600 bytes in 7.00 s, 14.3 MiB/s\n", s.take())
}

// A transfer over within 100 ms never draws a line: no wipe, only the summary.
func TestDisplayQuickTransfer(t *testing.T) {
	t.Parallel()
	s := newScript(t, true, 80, "put", "a", "/x/a")
	s.at(0, oneFile("a", "/x/a", 0, 10))
	s.at(20, finished(oneFile("a", "/x/a", 10, 10)))
	s.clock = s.clock.Add(10 * time.Millisecond)
	s.d.finish(nil)
	require.Equal(t, "put a -> /x/a: 10 bytes in 0.03 s, 0.0 MiB/s\n", s.take())

	// A zero-length file takes no time on a coarse clock: the rate is 0, not +Inf.
	s = newScript(t, false, 0, "get", "empty", "e")
	s.at(0, oneFile("empty", "e", 0, 0))
	s.at(0, finished(oneFile("empty", "e", 0, 0)))
	s.d.finish(nil)
	require.Equal(t, "get empty -> e: 0 bytes in 0.00 s, 0.0 MiB/s\n", s.take())
}

// A failed transfer has its line wiped and no summary: the error follows.
func TestDisplayFailure(t *testing.T) {
	t.Parallel()
	s := newScript(t, true, 80, "get", "f", "f")
	s.at(0, oneFile("f", "f", 0, 2048))
	s.at(100, oneFile("f", "f", 1024, 2048))
	require.Equal(t, "\rf  1.0 KiB / 2.0 KiB   50%  10.0 KiB/s  ETA 0:00\x1b[K", s.take())
	p := oneFile("f", "f", 1024, 2048)
	p.Err, p.InProgress = errors.New("boom"), 0
	s.at(150, p)
	s.d.finish(p.Err)
	require.Equal(t, "\r\x1b[K", s.take())

	s = newScript(t, false, 0, "get", "f", "f")
	s.at(0, oneFile("f", "f", 0, 2048))
	s.d.finish(errors.New("boom"))
	require.Empty(t, s.take())
}

// A tree shows files done out of files in all, and resumed bytes count in the total
// but not in the rate.
func TestDisplayTreeResumed(t *testing.T) {
	t.Parallel()
	s := newScript(t, true, 80, "put", "photos", "/srv/photos")
	tot := func(p sftp.Progress) *sftp.Progress {
		p.TotalSize, p.FilesTotal = 4*mib, 3
		return &p
	}
	// a.jpg resumes at 1 MiB of its 2; b.jpg starts from nothing; c.jpg is empty.
	s.at(0, tot(sftp.Progress{Path: "photos/a.jpg", Bytes: mib, Size: 2 * mib, TotalBytes: mib, InProgress: 1}))
	s.at(10, tot(sftp.Progress{Path: "photos/b.jpg", Bytes: 0, Size: 2 * mib, TotalBytes: mib, InProgress: 2}))
	s.at(100, tot(sftp.Progress{Path: "photos/b.jpg", Bytes: mib, Size: 2 * mib, TotalBytes: 2 * mib, InProgress: 2}))
	// 1 MiB moved in 0.1 s; 2 MiB left.
	require.Equal(t, "\r0/3 files  2.0 MiB / 4.0 MiB   50%  10.0 MiB/s  ETA 0:00\x1b[K", s.take())
	s.at(150, tot(sftp.Progress{Path: "photos/a.jpg", Bytes: 2 * mib, Size: 2 * mib, Done: true, TotalBytes: 3 * mib, Files: 1, InProgress: 1}))
	s.at(300, tot(sftp.Progress{Path: "photos/b.jpg", Bytes: 2 * mib, Size: 2 * mib, Done: true, TotalBytes: 4 * mib, Files: 2}))
	// 3 MiB moved in 0.3 s.
	require.Equal(t, "\r2/3 files  4.0 MiB / 4.0 MiB  100%  10.0 MiB/s  ETA 0:00\x1b[K", s.take())
	s.at(310, tot(sftp.Progress{Path: "photos/c.jpg", TotalBytes: 4 * mib, Files: 2, InProgress: 1}))
	s.at(320, tot(sftp.Progress{Path: "photos/c.jpg", Done: true, TotalBytes: 4 * mib, Files: 3}))
	require.Empty(t, s.take())
	s.d.finish(nil)
	// 3 MiB moved in 0.32 s: 9.375 MiB/s.
	require.Equal(t, "\r\x1b[K"+"put photos -> /srv/photos: 3 files, 4194304 bytes (1048576 resumed) in 0.32 s, 9.4 MiB/s\n", s.take())

	// One file is "1 file"; a tree without files (no reports at all) is "0 files".
	s = newScript(t, false, 0, "get", "d", "local/d")
	s.at(0, &sftp.Progress{Path: "d/x", Dest: "local/d/x", Size: 3, TotalSize: 3, FilesTotal: 1, InProgress: 1})
	s.at(500, &sftp.Progress{Path: "d/x", Dest: "local/d/x", Bytes: 3, Size: 3, Done: true, TotalBytes: 3, TotalSize: 3, Files: 1, FilesTotal: 1})
	s.d.finish(nil)
	require.Equal(t, "get d -> local/d: 1 file, 3 bytes in 0.50 s, 0.0 MiB/s\n", s.take())
	s = newScript(t, false, 0, "get", "d", "local/d")
	s.clock = s.clock.Add(time.Second)
	s.d.finish(nil)
	require.Equal(t, "get d -> local/d: 0 files, 0 bytes in 1.00 s, 0.0 MiB/s\n", s.take())
}

// A server that sends no size: no total, percentage or ETA.
func TestDisplayUnknownSize(t *testing.T) {
	t.Parallel()
	s := newScript(t, true, 80, "get", "/proc/x", "x")
	s.at(0, oneFile("/proc/x", "x", 0, -1))
	s.at(200, oneFile("/proc/x", "x", 3000, -1))
	require.Equal(t, "\rx  2.9 KiB  14.6 KiB/s\x1b[K", s.take())
}

// On a narrow terminal the line stays within the width less one column: the file name
// loses its start first.
func TestDisplayNarrow(t *testing.T) {
	t.Parallel()
	name := "a-rather-long-file-name-that-will-not-fit.tar.gz"
	s := newScript(t, true, 60, "put", name, "/x")
	s.at(0, oneFile(name, "/x/"+name, 0, 1000))
	s.at(100, oneFile(name, "/x/"+name, 500, 1000))
	line := "...ot-fit.tar.gz  500 B / 1000 B   50%  4.9 KiB/s  ETA 0:00"
	require.Len(t, line, 59)
	require.Equal(t, "\r"+line+"\x1b[K", s.take())

	require.Equal(t, "abc  tail", fit("abc", "  tail", 10, true), "fits as it is")
	require.Equal(t, "abc  tail", fit("abc", "  tail", 0, true), "width unknown")
	require.Equal(t, "...xyz  tail", fit("abcdefxyz", "  tail", 13, true))
	require.Equal(t, "abcdefxyz  t", fit("abcdefxyz", "  tail", 13, false), "a tree's count is cut at the end")
	require.Equal(t, "ab  tai", fit("ab", "  tail", 8, true), "no room for a name: cut at the end")
	require.Equal(t, "...é  t", fit("ééééé", "  t", 8, true), "counted in runes")
	require.Equal(t, "", fit("a", "b", 1, true))
}

func TestFormatBytesETA(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", mib: "1.0 MiB",
		5 << 30: "5.0 GiB", 3 << 40: "3.0 TiB", 1 << 62: "4.0 EiB",
	} {
		require.Equal(t, want, formatBytes(n), "%d", n)
	}
	for d, want := range map[time.Duration]string{
		0: "0:00", 499 * time.Millisecond: "0:00", 500 * time.Millisecond: "0:01",
		59 * time.Second: "0:59", 61 * time.Second: "1:01", time.Hour: "1:00:00",
		99*time.Hour + 59*time.Minute: "99:59:00", 100 * time.Hour: "--:--",
	} {
		require.Equal(t, want, formatETA(d), "%v", d)
	}
}

// The ticker redraws on its own and stops with finish (goleak checks it is gone).
func TestDisplayTicker(t *testing.T) {
	var out lockedBuffer
	drew := make(chan struct{})
	var once bool
	d := newDisplay(&out, true, func() int {
		// Asked at each drawing: the first one done by the ticker tells the test.
		if !once {
			once = true
			close(drew)
		}
		return 80
	}, time.Now, "get", "f", "f")
	d.startTicker()
	// Backdate the start so the first tick may draw; reports never come.
	d.mu.Lock()
	d.drawnAt = d.drawnAt.Add(-time.Second)
	d.events, d.last = true, *oneFile("f", "f", 0, 10)
	d.mu.Unlock()
	select {
	case <-drew:
	case <-time.After(testTimeout):
		t.Fatal("the ticker never drew")
	}
	d.finish(nil)
	require.Regexp(t, `^\rf  0 B / 10 B    0%  0 B/s  ETA --:--\x1b\[K(.*)\r\x1b\[Kget f -> f: 0 bytes in`, out.String())
}
