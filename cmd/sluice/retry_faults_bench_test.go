package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"golang.org/x/crypto/ssh/knownhosts"
)

// BenchmarkRetriesThroughResets measures --retries through a proxy that resets the
// connection (resetproxy_test.go), against the same transfer through it undisturbed:
//
//   - big/put, big/get: one file of SLUICE_FAULT_SIZE bytes (default 1 GiB), cut after
//     8 gaps of 50-150 MiB of traffic (seeded): the time against the undisturbed run;
//   - tree/put, tree/get: 2,000 files of 4 KiB to 1 MiB (seeded), cut every 2-4 s:
//     the bytes on the wire against the tree's size.
//
// Each run reports its seconds (and for big, the undisturbed run's through the same
// kind of proxy), the cuts, and the bytes the proxy carried over the bytes moved. The
// pauses between tries are the command's own.
//
//	go test -run '^$' -bench RetriesThroughResets -benchtime 1x .
func BenchmarkRetriesThroughResets(b *testing.B) {
	s, dir, size := faultBenchServer(b)

	big := filepath.Join(dir, "big.bin")
	writeRandom(b, big, size, 1)
	rng := rand.New(rand.NewPCG(7, 7))
	gaps := make([]int64, 8)
	for i := range gaps {
		gaps[i] = (50 + rng.Int64N(100)) << 20
	}
	for _, op := range []string{"put", "get"} {
		b.Run("big/"+op, func(b *testing.B) {
			from, to := big, remoteOn(s, filepath.Join(dir, "big-up.bin"))
			if op == "get" {
				from, to = remoteOn(s, filepath.Join(dir, "big-up.bin")), filepath.Join(dir, "big-back.bin")
			}
			calm := faultRun(b, s, newResetProxy(b, s.Addr, nil), op, from, to)
			for range b.N {
				p := newResetProxy(b, s.Addr, cutsAt(gaps...))
				took := faultRun(b, s, p, op, from, to)
				carried, cuts := p.stats()
				b.ReportMetric(took.Seconds(), "s")
				b.ReportMetric(calm.Seconds(), "s-undisturbed")
				b.ReportMetric(took.Seconds()/calm.Seconds(), "x-time")
				b.ReportMetric(float64(cuts), "cuts")
				b.ReportMetric(float64(carried)/float64(size), "x-bytes")
			}
			requireSameFile(b, big, filepath.Join(dir, map[string]string{"put": "big-up.bin", "get": "big-back.bin"}[op]))
		})
	}

	tree := filepath.Join(dir, "tree")
	treeSize := writeTree(b, tree, 2000, 2)
	for _, op := range []string{"put", "get"} {
		b.Run("tree/"+op, func(b *testing.B) {
			for range b.N {
				out := filepath.Join(dir, "tree-"+op+"-"+strconv.Itoa(b.N))
				from, to := tree, remoteOn(s, out)
				if op == "get" {
					from, to = remoteOn(s, filepath.Join(dir, "tree-put-"+strconv.Itoa(b.N), "tree")), out
				}
				p := newResetProxy(b, s.Addr, nil)
				stop := p.cutEvery(2*time.Second, 4*time.Second, 3)
				took := faultRun(b, s, p, op, "-r", from, to)
				stop()
				carried, cuts := p.stats()
				b.ReportMetric(took.Seconds(), "s")
				b.ReportMetric(float64(cuts), "cuts")
				b.ReportMetric(float64(carried)/float64(treeSize), "x-bytes")
			}
		})
	}
}

// faultBenchServer starts the private sshd the fault benchmarks use and a directory
// it writes in, and returns them with the size of the large file
// (SLUICE_FAULT_SIZE, default 1 GiB).
func faultBenchServer(b *testing.B) (*sshdtest.SSHD, string, int64) {
	b.Helper()
	if err := sshdtest.SSHDUsable(); err != nil {
		b.Skipf("skipping: %v", err)
	}
	size := int64(1 << 30)
	if v := os.Getenv("SLUICE_FAULT_SIZE"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("SLUICE_FAULT_SIZE: %v", err)
		}
		size = n
	}
	b.Setenv("HOME", b.TempDir())
	b.Setenv("SSH_AUTH_SOCK", "")
	// As a plain account when run as root, as the other benchmarks: root's shell
	// start-up would be paid at every reconnect (sshdtest.SSHDOptions.LoginUser). The
	// account writes in dir, on tmpfs where there is one, which keeps the disk out.
	var opts sshdtest.SSHDOptions
	if os.Geteuid() == 0 {
		opts.LoginUser = "sluicebench"
	}
	s := sshdtest.NewSSHD(b, opts)
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "sluice-faults-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		b.Fatal(err)
	}

	return s, dir, size
}

// faultRun runs one put or get through p (runThrough).
func faultRun(b *testing.B, s *sshdtest.SSHD, p *resetProxy, op string, args ...string) time.Duration {
	b.Helper()
	return runThrough(b, s, p.addr(), p.port(), op, args...)
}

// runThrough runs one put or get through the proxy at addr (port) with --retries 100
// and the command's defaults otherwise, and returns how long it took; it fails b if
// the command fails.
func runThrough(b *testing.B, s *sshdtest.SSHD, addr string, port int, op string, args ...string) time.Duration {
	b.Helper()
	kh := filepath.Join(b.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{addr}, s.HostKey)+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	all := append([]string{"-i", s.KeyFile, "-known-hosts", kh, "-P", strconv.Itoa(port), op, "-q", "--retries", "100"}, args...)
	var out bytes.Buffer
	var errb lockedBuffer
	a := newApp(&out, &errb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	if code := a.run(ctx, all); code != exitOK {
		b.Fatalf("sluice %q: exit %d: %s", all, code, errb.String())
	}
	return time.Since(start)
}

// writeRandom writes size seeded random bytes to name.
func writeRandom(b *testing.B, name string, size int64, seed uint64) {
	b.Helper()
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(size)))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8; j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// writeTree writes n files of 4 KiB to 1 MiB (seeded) in 20 directories under root and
// returns their total size.
func writeTree(b *testing.B, root string, n int, seed uint64) int64 {
	b.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	var total int64
	for i := range n {
		d := filepath.Join(root, fmt.Sprintf("d%02d", i%20))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		size := 4<<10 + rng.Int64N(1<<20-4<<10)
		writeRandom(b, filepath.Join(d, fmt.Sprintf("f%04d", i)), size, uint64(i))
		total += size
	}
	return total
}

func requireSameFile(b *testing.B, x, y string) {
	b.Helper()
	dx, err := os.ReadFile(x)
	if err != nil {
		b.Fatal(err)
	}
	dy, err := os.ReadFile(y)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(dx, dy) {
		b.Fatalf("%s and %s differ", x, y)
	}
}
