package sftp

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Harness: benchmarks (speed lives here, never in tests' thresholds).
//
// Benchmarks are hermetic: OpenSSH's sftp-server over pipes (files in /dev/shm when
// it exists, so the disk stays out of the numbers) and, in bench_server_test.go, the
// in-process test server. Compare runs with benchstat.

// benchDir returns a scratch directory on tmpfs when possible, readable by every user
// (a benchmark's sshd may log in as another account: benchSSHDOptions).
func benchDir(b *testing.B) string {
	b.Helper()
	d := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, _ = os.MkdirTemp("/dev/shm", "sluice-bench-")
	}
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("", "sluice-bench-"); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		b.Fatal(err)
	}
	return d
}

// benchServerClient is sftpServerClient (testenv_test.go): sftp-server on dir over pipes.
func benchServerClient(b *testing.B, dir string, opts ...Option) *Client {
	b.Helper()
	c, _ := sftpServerClient(b, dir, opts)
	return c
}

func writeBenchFile(b *testing.B, dir, name string, size int) {
	b.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		b.Fatal(err)
	}
}

var benchSizes = []int{1 << 20, 64 << 20}

func BenchmarkWriteTo(b *testing.B) {
	for _, size := range benchSizes {
		for _, inflight := range []int{16, 64} {
			b.Run(fmt.Sprintf("server=openssh/size=%dMiB/inflight=%d", size>>20, inflight), func(b *testing.B) {
				dir := benchDir(b)
				writeBenchFile(b, dir, "src", size)
				c := benchServerClient(b, dir, WithMaxInflight(inflight))
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					f, err := c.Open(ctx, "src")
					if err != nil {
						b.Fatal(err)
					}
					n, err := f.WriteTo(io.Discard)
					if err != nil || n != int64(size) {
						b.Fatalf("WriteTo: %d, %v", n, err)
					}
					f.Close()
				}
			})
		}
	}
}

// benchZeros is an endless source of zeros that does not implement WriterTo, so
// ReadFrom is what io.Copy uses.
type benchZeros struct{}

func (benchZeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func BenchmarkReadFrom(b *testing.B) {
	for _, size := range benchSizes {
		for _, inflight := range []int{16, 64} {
			b.Run(fmt.Sprintf("server=openssh/size=%dMiB/inflight=%d", size>>20, inflight), func(b *testing.B) {
				dir := benchDir(b)
				c := benchServerClient(b, dir, WithMaxInflight(inflight))
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					f, err := c.Create(ctx, "dst")
					if err != nil {
						b.Fatal(err)
					}
					n, err := f.ReadFrom(io.LimitReader(benchZeros{}, int64(size)))
					if err != nil || n != int64(size) {
						b.Fatalf("ReadFrom: %d, %v", n, err)
					}
					if err := f.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkReadAt(b *testing.B) {
	for _, chunk := range []int{1, 32 << 10, 1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("server=openssh/chunk=%dB", chunk), func(b *testing.B) {
			const size = 64 << 20
			dir := benchDir(b)
			writeBenchFile(b, dir, "src", size)
			c := benchServerClient(b, dir)
			f, err := c.Open(context.Background(), "src")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, chunk)
			var off int64
			b.SetBytes(int64(chunk))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(chunk)) % (size - int64(chunk))
			}
		})
	}
}

func BenchmarkWriteAt(b *testing.B) {
	for _, chunk := range []int{32 << 10, 1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("server=openssh/chunk=%dKiB", chunk>>10), func(b *testing.B) {
			dir := benchDir(b)
			c := benchServerClient(b, dir)
			f, err := c.Create(context.Background(), "dst")
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, chunk)
			var off int64
			b.SetBytes(int64(chunk))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(chunk)) % (64 << 20)
			}
		})
	}
}

// BenchmarkSequentialRead reads with small buffers, the way bufio and io.ReadAll do;
// read-ahead must make it run near WriteTo speed.
func BenchmarkSequentialRead(b *testing.B) {
	for _, bufSize := range []int{4 << 10, 32 << 10} {
		b.Run(fmt.Sprintf("server=openssh/buf=%dKiB", bufSize>>10), func(b *testing.B) {
			const size = 64 << 20
			dir := benchDir(b)
			writeBenchFile(b, dir, "src", size)
			c := benchServerClient(b, dir)
			buf := make([]byte, bufSize)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				f, err := c.Open(context.Background(), "src")
				if err != nil {
					b.Fatal(err)
				}
				var total int
				for {
					n, err := f.Read(buf)
					total += n
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if total != size {
					b.Fatalf("read %d of %d", total, size)
				}
				f.Close()
			}
		})
	}
}

func BenchmarkStat(b *testing.B) {
	dir := benchDir(b)
	writeBenchFile(b, dir, "src", 1)
	c := benchServerClient(b, dir)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Stat(ctx, "src"); err != nil {
			b.Fatal(err)
		}
	}
}
