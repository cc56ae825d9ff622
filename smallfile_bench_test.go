package sftp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSmallFiles times what goes by the two-round-trip path of small files
// (smallfile.go) against OpenSSH's sftp-server over pipes: ReadFile of a file that fits
// one READ, and trees of 200 files of 4 KiB and of 64 KiB each way.
func BenchmarkSmallFiles(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{4 << 10, 200 << 10} {
		b.Run(fmt.Sprintf("ReadFile%dKiB", size>>10), func(b *testing.B) {
			dir := benchDir(b)
			writeBenchFile(b, dir, "f", size)
			c := benchServerClient(b, dir)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if got, err := c.ReadFile(ctx, filepath.Join(dir, "f")); err != nil || len(got) != size {
					b.Fatal(len(got), err)
				}
			}
		})
	}
	for _, size := range []int{4 << 10, 64 << 10} {
		const files = 200
		b.Run(fmt.Sprintf("Tree%dx%dKiB", files, size>>10), func(b *testing.B) {
			dir := benchDir(b)
			src := filepath.Join(dir, "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				b.Fatal(err)
			}
			for i := range files {
				writeBenchFile(b, src, fmt.Sprintf("f%03d", i), size)
			}
			c := benchServerClient(b, dir)
			b.SetBytes(int64(files * size))
			b.ReportAllocs()
			back, up := filepath.Join(dir, "back"), filepath.Join(dir, "up")
			for b.Loop() {
				if err := c.Get(ctx, src, back, Recursive()); err != nil {
					b.Fatal(err)
				}
				if err := c.Put(ctx, back, up, Recursive()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(back); err != nil {
					b.Fatal(err)
				}
				if err := os.RemoveAll(up); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
