//go:build linux

package sftp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sftp/internal/realserver"
)

// BenchmarkVerifyProFTPD: Get and Put of 256 MiB with and without Verify against
// ProFTPD, whose check-file hashes with OpenSSL (SHA extensions where the CPU has
// them): what Verify costs where the server's hash is cheap. Compare the /verify
// sub-benchmarks with the plain ones (benchstat).
func BenchmarkVerifyProFTPD(b *testing.B) {
	const size = 256 << 20
	c := proftpdBenchClient(b, benchDir(b))
	local := filepath.Join(benchDir(b), "src")
	if err := os.WriteFile(local, randBytes(size, 1), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, verify := range []bool{false, true} {
		var opts []TransferOption
		name := "plain"
		if verify {
			opts, name = []TransferOption{Verify()}, "verify"
		}
		b.Run("put/"+name, func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				if err := c.Put(testCtx(b), local, "up", opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get/"+name, func(b *testing.B) {
			b.SetBytes(size)
			dst := filepath.Join(filepath.Dir(local), "down")
			for range b.N {
				if err := c.Get(testCtx(b), "up", dst, opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHashProFTPD: Hash of 256 MiB by check-file on ProFTPD (nothing is read).
func BenchmarkHashProFTPD(b *testing.B) {
	const size = 256 << 20
	dir := benchDir(b)
	if err := os.WriteFile(filepath.Join(dir, "f"), randBytes(size, 1), 0o644); err != nil {
		b.Fatal(err)
	}
	c := proftpdBenchClient(b, dir)
	for _, alg := range HashAlgorithms() {
		b.Run(string(alg), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				if _, by, err := c.remoteSum(testCtx(b), "f", alg, 0, -1); err != nil || by != hashByCheckFile {
					b.Fatal(by, err)
				}
			}
		})
	}
}

// proftpdBenchClient is a Client on ProFTPD serving dir; cleanup closes both.
func proftpdBenchClient(b *testing.B, dir string) *Client {
	b.Helper()
	srv := realserver.StartProFTPD(b, dir)
	sc, err := srv.Dial()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sc.Close() })
	c, err := NewClient(testCtx(b), sc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
