package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// sluiceSpan is the library's W (sftp.Resume): a stopped transfer's part is proven
// below its size less this.
const sluiceSpan = 64 << 20

// --retries through a network path that resets connections (internal/faultproxy): the
// first connections of the command are reset at points a seed draws, anywhere in the
// transfer, so a retry resumes a part the reset left. Each run ends with exit 0 and the
// source's bytes, never a wrong file. And each retry continues from what the try
// before knew: a get from the end of its part, which the failed try cut to what it
// had written and marked; a put from the prefix the server had acknowledged, which
// the failed try could not cut (its connection was gone) but recorded in the
// command's sftp.Journal. Without those, a retry would go back up to 64 MiB (the
// library's W).
func TestRetriesThroughResets(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	const size = sluiceSpan + 16<<20 + 777
	src, data := randomFile(t, dir, "src.bin", size)
	for _, seed := range []uint64{1, 2} {
		for _, op := range []string{"put", "get"} {
			t.Run(fmt.Sprintf("%s seed=%d", op, seed), func(t *testing.T) {
				// The first two connections are reset once a seeded count of bytes
				// has passed (if they carry as much); the third gets through.
				rng := rand.New(rand.NewPCG(seed, 9))
				steps := []faultproxy.Step{
					{After: 4<<20 + rng.Int64N(size-8<<20), Fault: faultproxy.Reset},
					{After: 4<<20 + rng.Int64N(size-8<<20), Fault: faultproxy.Reset},
				}
				proxy, err := faultproxy.New(s.Addr, faultproxy.WithPlan(func(n int) faultproxy.Step {
					if n < len(steps) {
						return steps[n]
					}
					return faultproxy.Step{}
				}))
				require.NoError(t, err)
				t.Cleanup(func() { proxy.Close() })
				port := proxy.Addr()[strings.LastIndexByte(proxy.Addr(), ':')+1:]
				kh := knownHostsFile(t, knownhosts.Line([]string{proxy.Addr()}, s.HostKey))
				args := []string{"-i", s.KeyFile, "-known-hosts", kh, "-P", port, op, "--retries", "3"}
				dst := filepath.Join(dir, fmt.Sprintf("%s-%d.bin", op, seed))
				from, to := src, s.User+"@127.0.0.1:"+dst
				if op == "get" {
					from, to = s.User+"@127.0.0.1:"+src, dst
				}
				part := dst + ".sluice-part"
				if op == "put" {
					part = filepath.Join(dir, "."+filepath.Base(dst)+".sluice-part")
				}
				var starts, knew []int64 // each retry's first report, and what the try before knew
				failedAt := int64(-1)
				r := runApp(t, func(a *app) {
					// The pause between tries is not what is tested.
					a.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
					a.testProgress = func(p sftp.Progress) {
						switch {
						case p.Err != nil:
							failedAt = p.Bytes // a put's: the prefix acknowledged
						case failedAt >= 0:
							starts = append(starts, p.Bytes)
							if op == "get" { // the part as the failed try left it
								fi, err := os.Stat(part)
								require.NoError(t, err)
								failedAt = fi.Size()
							}
							knew, failedAt = append(knew, failedAt), -1
						}
					}
				}, append(args, from, to)...)
				requireOK(t, r)
				// The second reset comes only if the retry carries enough bytes (it
				// sends what the first try had not got through), and may hit a lane's
				// extra connection, which the transfer survives: there is at least one
				// retry.
				require.Positive(t, proxy.Faults(), "stderr:\n%s", r.stderr)
				require.NotEmpty(t, starts, "stderr:\n%s", r.stderr)
				require.Equal(t, len(starts), strings.Count(r.stderr, "; retrying"), "stderr:\n%s", r.stderr)
				require.Equal(t, knew, starts, "a retry did not continue from what the try before knew")
				got, err := os.ReadFile(dst)
				require.NoError(t, err)
				require.True(t, bytes.Equal(data, got), "the copy is not the source")
			})
		}
	}
}
