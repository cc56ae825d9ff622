package sftp

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkPutGet times Put and Get of one file against OpenSSH's sftp-server over
// pipes, by the default delivery (a part file renamed over an existing destination):
// the path every option of delivery.go must leave as fast as it was.
func BenchmarkPutGet(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{64 << 10, 4 << 20, 64 << 20} {
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("Put"+name, func(b *testing.B) {
			dir := benchDir(b)
			writeBenchFile(b, dir, "src", size)
			c := benchServerClient(b, dir)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Put(ctx, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Get"+name, func(b *testing.B) {
			dir := benchDir(b)
			writeBenchFile(b, dir, "src", size)
			c := benchServerClient(b, dir)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "back")
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Get(ctx, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
