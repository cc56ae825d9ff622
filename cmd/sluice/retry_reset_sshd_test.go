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

	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// sluiceSpan is the library's W (sftp.Resume): a stopped transfer's part is proven
// below its size less this.
const sluiceSpan = 64 << 20

// --retries through a network path that resets connections (internal/faultproxy): the
// first connections of the command are reset at points a seed draws, anywhere in the
// transfer, so a retry resumes a part the reset left (and, past the library's W, from
// its proven point, not its end). Each run ends with exit 0 and the source's bytes,
// never a wrong file.
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
				// has passed; the third gets through.
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
				r := runApp(t, func(a *app) {
					// The pause between tries is not what is tested.
					a.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
				}, append(args, from, to)...)
				requireOK(t, r)
				require.Equal(t, 2, proxy.Faults(), "stderr:\n%s", r.stderr)
				require.Equal(t, 2, strings.Count(r.stderr, "; retrying in "), "stderr:\n%s", r.stderr)
				got, err := os.ReadFile(dst)
				require.NoError(t, err)
				require.True(t, bytes.Equal(data, got), "the copy is not the source")
			})
		}
	}
}
