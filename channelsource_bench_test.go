package sftp

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/sluicehq/sftp/internal/sshfx"
)

// benchSSHDOptions has the benchmarks log in as a plain account when they run as root,
// as bench/cmd/compare does: root's shell start-up on a developer's machine would be
// paid once per lane (see sshdtest.SSHDOptions.LoginUser). The account can read what
// the benchmarks write in benchDir.
func benchSSHDOptions(o sshdtest.SSHDOptions) sshdtest.SSHDOptions {
	if os.Geteuid() == 0 {
		o.LoginUser = "sluicebench"
	}
	return o
}

// BenchmarkLaneRamp measures how soon the lanes of a transfer are ready behind a 50 ms
// round trip: a fresh Client opens n extra lanes at once (eachChannel, as a transfer's
// opener does) and each opens a file; a lane is ready when its HANDLE is in. first
// and last are the first and the last lane's time in ms. "waited" sets a lane up
// waiting for each reply (session, subsystem, INIT, then OPEN), "pipelined" sends the
// subsystem request, INIT and OPEN without waiting, "dialled" puts every lane on a
// connection of its own (WithDialer, one channel per connection), pipelined.
func BenchmarkLaneRamp(b *testing.B) {
	const rtt = 50 * time.Millisecond
	sshd := sshdtest.NewSSHD(b, benchSSHDOptions(sshdtest.SSHDOptions{MaxSessions: 64}))
	p, err := delayproxy.New(sshd.Addr, rtt/2)
	require.NoError(b, err)
	b.Cleanup(func() { p.Close() })
	name := filepath.Join(benchDir(b), "f")
	require.NoError(b, os.WriteFile(name, []byte("x"), 0o644))
	ctx := context.Background()
	dial := func(context.Context) (*ssh.Client, error) { return sshd.DialVia(p.Addr()) }

	for _, lanes := range []int{1, 3, 15} {
		for _, mode := range []string{"waited", "pipelined", "dialled"} {
			b.Run(fmt.Sprintf("lanes=%d/%s", lanes, mode), func(b *testing.B) {
				var firsts, lasts time.Duration
				for b.Loop() {
					b.StopTimer()
					base, err := sshd.DialVia(p.Addr())
					require.NoError(b, err)
					opts := []Option{WithChannels(lanes + 1)}
					if mode == "dialled" {
						opts = append(opts, WithDialer(dial), withChannelsPerConn(1))
					}
					c, err := NewClient(ctx, base, opts...)
					require.NoError(b, err)
					c.source.(*sshChannels).pipeline = mode != "waited"
					b.StartTimer()

					start := time.Now()
					var mu sync.Mutex
					var ready []time.Duration
					c.eachChannel(ctx, lanes, func(cn *conn) { // never main: see filechannel.go
						_, err := c.openHandle(ctx, cn, "open", func(dst []byte, id uint32) []byte {
							return appendOpen(dst, id, name, sshfx.FlagRead, &sshfx.Attrs{})
						})
						if err == nil {
							mu.Lock()
							ready = append(ready, time.Since(start))
							mu.Unlock()
						}
					})
					b.StopTimer()
					require.Len(b, ready, lanes)
					slices.Sort(ready)
					firsts += ready[0]
					lasts += ready[len(ready)-1]
					c.Close()
					base.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(firsts.Milliseconds())/float64(b.N), "first-ms")
				b.ReportMetric(float64(lasts.Milliseconds())/float64(b.N), "last-ms")
			})
		}
	}
}

// BenchmarkChannelsPerConn downloads a file over 16 lanes behind a 50 ms round trip,
// with at most k channels per SSH connection (more dialled as needed), each round on
// a fresh Client as a program would, ramp included: it chose defaultChannelsPerConn.
// Set SLUICE_BENCH_MIB for the size (default 256).
func BenchmarkChannelsPerConn(b *testing.B) {
	const rtt = 50 * time.Millisecond
	size := 256 << 20
	if v := os.Getenv("SLUICE_BENCH_MIB"); v != "" {
		var mib int
		_, err := fmt.Sscan(v, &mib)
		require.NoError(b, err)
		size = mib << 20
	}
	name := filepath.Join(benchDir(b), "big")
	require.NoError(b, os.WriteFile(name, randBytes(size, 1), 0o644))
	sshd := sshdtest.NewSSHD(b, benchSSHDOptions(sshdtest.SSHDOptions{MaxSessions: 64, Ciphers: []string{sshdtest.CipherAES128GCM}}))
	p, err := delayproxy.New(sshd.Addr, rtt/2)
	require.NoError(b, err)
	b.Cleanup(func() { p.Close() })
	ctx := context.Background()
	dial := func(context.Context) (*ssh.Client, error) { return sshd.DialVia(p.Addr()) }
	for _, k := range []int{16, 8, 4, 2} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				base, err := dial(ctx)
				require.NoError(b, err)
				c, err := NewClient(ctx, base, WithChannels(16), WithDialer(dial), withChannelsPerConn(k))
				require.NoError(b, err)
				f, err := c.Open(ctx, name)
				require.NoError(b, err)
				n, err := f.WriteTo(io.Discard)
				require.NoError(b, err)
				require.Equal(b, int64(size), n)
				require.NoError(b, f.Close())
				c.Close()
				base.Close()
			}
		})
	}
}
