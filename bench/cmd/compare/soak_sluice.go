//go:build !nosluice

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	sluice "github.com/sluicehq/sftp"
)

func init() { soakWorkload = sluiceSoak }

// sluiceSoak runs the soak's goroutines on one sluice Client with its defaults. Every
// goroutine stops at the same deadline; a read cut short by it is not an error, and
// counts the bytes it had moved.
func sluiceSoak(ctx context.Context, j *job) (soakResult, error) {
	conn, err := dial(ctx, j)
	if err != nil {
		return soakResult{}, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	c, err := sluice.NewClient(ctx, conn)
	if err != nil {
		return soakResult{}, err
	}
	defer c.Close()
	s := j.Soak
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, start.Add(s.Duration))
	defer cancel()

	var (
		mu       sync.Mutex
		lat      []time.Duration
		bulk     int64
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	stats := s.Workers / 2
	for range stats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for rctx.Err() == nil {
				t0 := time.Now()
				_, err := c.Stat(rctx, s.StatPath)
				if err != nil {
					if rctx.Err() == nil {
						fail(fmt.Errorf("stat %s: %w", s.StatPath, err))
					}
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	if s.Bulk {
		for range s.Workers - stats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rctx.Err() == nil {
					n, err := readAll(rctx, c, s.BulkPath)
					mu.Lock()
					bulk += n
					mu.Unlock()
					if err != nil {
						if rctx.Err() == nil {
							fail(fmt.Errorf("read %s: %w", s.BulkPath, err))
						}
						break
					}
					if n != soakBulkSize {
						fail(fmt.Errorf("read %d bytes of %s, want %d", n, s.BulkPath, soakBulkSize))
						break
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return soakResult{}, firstErr
	}
	if len(lat) == 0 {
		return soakResult{}, errors.New("no Stat completed")
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return soakResult{
		Stats:     len(lat),
		StatP50Ms: ms(percentile(lat, 0.5)),
		StatP90Ms: ms(percentile(lat, 0.9)),
		StatP99Ms: ms(percentile(lat, 0.99)),
		BulkBytes: bulk,
		Seconds:   elapsed.Seconds(),
	}, nil
}

// readAll reads name to the end into io.Discard (File.WriteTo, the transfer engine),
// ending early when ctx does.
func readAll(ctx context.Context, c *sluice.Client, name string) (int64, error) {
	f, err := c.Open(ctx, name)
	if err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	n, err := io.Copy(io.Discard, f)
	if cerr := f.Close(); err == nil && ctx.Err() == nil {
		err = cerr
	}
	return n, err
}
