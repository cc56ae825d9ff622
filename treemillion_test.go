package sftp

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMillionFileTree measures what a Get and a Put of a million small files hold, in
// two shapes (1,000 directories of 1,000 files; one directory of a million entries),
// against OpenSSH's sftp-server over pipes, under the default memory limit. It takes
// many minutes and 2 GB of tmpfs, so it runs only with SLUICE_MILLION=1; the peak heap
// it logs is the figure quoted in the note of issue 19 (a measurement, not asserted).
func TestMillionFileTree(t *testing.T) {
	if os.Getenv("SLUICE_MILLION") == "" {
		t.Skip("set SLUICE_MILLION=1 to copy a million files both ways and log the peak heap")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_MILLION")); err == nil && v > 1 {
		n = v
	}
	for _, shape := range []struct {
		name string
		path func(i int) string
	}{
		{"1000 directories", func(i int) string { return fmt.Sprintf("d%03d/f%07d", i%1000, i) }},
		{"one directory", func(i int) string { return fmt.Sprintf("f%07d", i) }},
	} {
		t.Run(shape.name, func(t *testing.T) {
			work, err := os.MkdirTemp("/dev/shm", "sluice-million-")
			require.NoError(t, err)
			defer os.RemoveAll(work)
			c, _ := getPutClient(t, work)
			src := filepath.Join(work, "src")
			start := time.Now()
			for i := range n {
				name := filepath.Join(src, filepath.FromSlash(shape.path(i)))
				if err := os.WriteFile(name, []byte(strconv.Itoa(i)), 0o644); err != nil {
					require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
					require.NoError(t, os.WriteFile(name, []byte(strconv.Itoa(i)), 0o644))
				}
			}
			t.Logf("made %d files in %v", n, time.Since(start))
			for _, dir := range []string{"get", "put"} {
				peak := sampleHeap()
				start := time.Now()
				var err error
				if dir == "get" {
					err = c.Get(testCtxFor(t, time.Hour), src, filepath.Join(work, "back"), Recursive())
				} else {
					err = c.Put(testCtxFor(t, time.Hour), filepath.Join(work, "back"), filepath.Join(work, "up"), Recursive())
				}
				objects, live := peak()
				require.NoError(t, err)
				d := time.Since(start)
				t.Logf("%s of %d files (%s): %v, %.0f files/s; peak heap objects %.1f MiB, peak live heap after GC %.1f MiB",
					dir, n, shape.name, d.Round(time.Millisecond), float64(n)/d.Seconds(), float64(objects)/(1<<20), float64(live)/(1<<20))
			}
			require.NoError(t, os.RemoveAll(filepath.Join(work, "back")))
			require.NoError(t, os.RemoveAll(filepath.Join(work, "up")))
		})
	}
}

// sampleHeap samples the heap every 20 ms until the returned function is called, which
// returns the peaks of the heap's objects (live and not yet collected) and of the live
// heap measured by the last GC.
func sampleHeap() func() (objects, live uint64) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	done := make(chan struct{})
	result := make(chan [2]uint64, 1)
	go func() {
		var peak [2]uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			peak[0] = max(peak[0], samples[0].Value.Uint64())
			peak[1] = max(peak[1], samples[1].Value.Uint64())
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		close(done)
		p := <-result
		return p[0], p[1]
	}
}
