package sftp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSmallCalls times the everyday calls one at a time against OpenSSH's
// sftp-server over pipes (so a round trip is two pipe hops and the server's work),
// and counts their allocations: allocs/op is the client's own cost per call, which
// the two-round-trip paths must not raise. Files are on tmpfs where there is one.
func BenchmarkSmallCalls(b *testing.B) {
	data := make([]byte, 4<<10)
	for i := range data {
		data[i] = byte(i)
	}
	ctx := context.Background()
	setup := func(b *testing.B) (*Client, string) {
		dir := benchDir(b)
		if err := os.WriteFile(filepath.Join(dir, "f4k"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "d20"), 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(dir, "d20", fmt.Sprintf("e%02d", i)), data[:i], 0o644); err != nil {
				b.Fatal(err)
			}
		}
		return benchServerClient(b, dir), dir
	}
	for _, bc := range []struct {
		name string
		// prep runs untimed before call i; call is timed.
		prep func(b *testing.B, dir string, i int)
		call func(c *Client, dir string, i int) error
	}{
		{"Stat", nil, func(c *Client, dir string, _ int) error {
			_, err := c.Stat(ctx, filepath.Join(dir, "f4k"))
			return err
		}},
		{"OpenClose", nil, func(c *Client, dir string, _ int) error {
			f, err := c.Open(ctx, filepath.Join(dir, "f4k"))
			if err != nil {
				return err
			}
			return f.Close()
		}},
		{"ReadFile4KiB", nil, func(c *Client, dir string, _ int) error {
			got, err := c.ReadFile(ctx, filepath.Join(dir, "f4k"))
			if err == nil && len(got) != len(data) {
				err = fmt.Errorf("read %d bytes", len(got))
			}
			return err
		}},
		{"WriteFile4KiB", nil, func(c *Client, dir string, _ int) error {
			return c.WriteFile(ctx, filepath.Join(dir, "w"), data, 0o644)
		}},
		{"ReadDir20", nil, func(c *Client, dir string, _ int) error {
			es, err := c.ReadDir(ctx, filepath.Join(dir, "d20"))
			if err == nil && len(es) != 20 {
				err = fmt.Errorf("listed %d entries", len(es))
			}
			return err
		}},
		{"Remove", func(b *testing.B, dir string, i int) {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("rm%d", i)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}, func(c *Client, dir string, i int) error {
			return c.Remove(ctx, filepath.Join(dir, fmt.Sprintf("rm%d", i)))
		}},
		{"Rename", nil, func(c *Client, dir string, i int) error {
			names := [2]string{filepath.Join(dir, "f4k"), filepath.Join(dir, "f4k.moved")}
			return c.Rename(ctx, names[i%2], names[(i+1)%2])
		}},
		{"Mkdir", nil, func(c *Client, dir string, i int) error {
			return c.Mkdir(ctx, filepath.Join(dir, fmt.Sprintf("mk%d", i)), 0o755)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, dir := setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if bc.prep != nil {
					b.StopTimer()
					bc.prep(b, dir, i)
					b.StartTimer()
				}
				if err := bc.call(c, dir, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
