package sftp

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// BenchmarkReconnectingThroughResets measures a Reconnecting's Put and Get of one
// file of SLUICE_FAULT_SIZE bytes (default 1 GiB) to the private sshd at 10 ms RTT,
// through a proxy that resets every connection each time the file has got another
// 100 MiB further (a link that drops), against the same transfer through the same proxy undisturbed. Each run reports
// its seconds, the undisturbed run's, their ratio (the target is at most 1/0.7), the
// resets and the reconnects. SLUICE_FAULT_RATE (bytes per second) caps the link's
// rate each way.
//
//	go test -run '^$' -bench ReconnectingThroughResets -benchtime 1x .
func BenchmarkReconnectingThroughResets(b *testing.B) {
	if err := sshdtest.SSHDUsable(); err != nil {
		b.Skipf("skipping: %v", err)
	}
	size := int64(1 << 30)
	if v := os.Getenv("SLUICE_FAULT_SIZE"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(b, err, "SLUICE_FAULT_SIZE")
		size = n
	}
	sshd := sshdtest.NewSSHD(b, benchSSHDOptions(sshdtest.SSHDOptions{MaxSessions: 64}))
	var link []delayproxy.Option
	if v := os.Getenv("SLUICE_FAULT_RATE"); v != "" { // bytes per second, each way
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(b, err, "SLUICE_FAULT_RATE")
		link = append(link, delayproxy.WithRate(n))
	}
	long, err := delayproxy.New(sshd.Addr, 5*time.Millisecond, link...)
	require.NoError(b, err)
	b.Cleanup(func() { long.Close() })
	dir := benchDir(b)
	require.NoError(b, os.Chmod(dir, 0o777)) // the bench account writes there
	big := filepath.Join(dir, "big")
	require.NoError(b, os.WriteFile(big, randBytes(int(size), 1), 0o644))
	up, back := filepath.Join(dir, "big-up"), filepath.Join(dir, "big-back")
	const every = 100 << 20

	for _, op := range []string{"put", "get"} {
		b.Run(op, func(b *testing.B) {
			// run makes one transfer through a new fault proxy; with cut, the proxy
			// resets every connection each time the file has got another 100 MiB
			// further, as a link that drops would. It returns the time taken, the
			// resets and the reconnects.
			run := func(cut bool) (took time.Duration, resets int, reconnects int64) {
				p, err := faultproxy.New(long.Addr())
				require.NoError(b, err)
				defer p.Close()
				dial := func(ctx context.Context) (*ssh.Client, error) {
					return dialSSHContext(ctx, p.Addr(), sshd.ClientConfig())
				}
				next := int64(every)
				cutter := OnProgress(func(pr Progress) {
					if cut && pr.Bytes >= next && pr.Bytes < size {
						next = (pr.Bytes/every + 1) * every
						resets++
						p.Break(faultproxy.Reset)
					}
				})
				ctx := context.Background()
				start := time.Now()
				r, err := NewReconnecting(ctx, dial, ReconnectPolicy{MaxFailures: 20})
				require.NoError(b, err)
				defer r.Close()
				if op == "put" {
					err = r.Put(ctx, big, up, cutter)
				} else {
					err = r.Get(ctx, up, back, cutter)
				}
				require.NoError(b, err)
				return time.Since(start), resets, r.Reconnects()
			}
			calm, _, _ := run(false)
			for range b.N {
				took, resets, reconnects := run(true)
				b.ReportMetric(took.Seconds(), "s")
				b.ReportMetric(calm.Seconds(), "s-undisturbed")
				b.ReportMetric(took.Seconds()/calm.Seconds(), "x-time")
				b.ReportMetric(float64(resets), "resets")
				b.ReportMetric(float64(reconnects), "reconnects")
			}
			want, err := os.ReadFile(big)
			require.NoError(b, err)
			got, err := os.ReadFile(map[string]string{"put": up, "get": back}[op])
			require.NoError(b, err)
			require.True(b, bytes.Equal(want, got), "the %s copy differs from its source", op)
		})
	}
}
