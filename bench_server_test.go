package sftp

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Benchmarks against the in-process test server: no process, no pipe syscalls, so
// they show the client's own cost per byte. The rtt variants delay every reply (the
// server's Latency) behind a 2 MiB window, the shape of one SSH channel on a long link.

func benchTestServerClient(b *testing.B, opts testserver.Options, copts ...Option) (*Client, *testserver.Server) {
	b.Helper()
	srv := testserver.New(opts)
	r, w := srv.Conn()
	c, err := NewClientPipe(context.Background(), r, w, copts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, srv
}

// benchDownload times WriteTo of a size-byte file written on srv, opened each time.
func benchDownload(b *testing.B, c *Client, srv *testserver.Server, size int64) {
	b.Helper()
	if err := srv.WriteFile("src", make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		f, err := c.Open(context.Background(), "src")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := f.WriteTo(io.Discard); err != nil || n != size {
			b.Fatalf("WriteTo: %d, %v", n, err)
		}
		f.Close()
	}
}

var benchRTTs = []time.Duration{0, 10 * time.Millisecond}

func BenchmarkTestServerWriteTo(b *testing.B) {
	for _, rtt := range benchRTTs {
		for _, inflight := range []int{16, 64} {
			b.Run(fmt.Sprintf("rtt=%v/size=64MiB/inflight=%d", rtt, inflight), func(b *testing.B) {
				const size = 64 << 20
				c, srv := benchTestServerClient(b, testserver.Options{Latency: rtt}, WithMaxInflight(inflight))
				benchDownload(b, c, srv, size)
			})
		}
	}
}

func BenchmarkTestServerReadFrom(b *testing.B) {
	for _, rtt := range benchRTTs {
		for _, inflight := range []int{16, 64} {
			b.Run(fmt.Sprintf("rtt=%v/size=64MiB/inflight=%d", rtt, inflight), func(b *testing.B) {
				const size = 64 << 20
				c, _ := benchTestServerClient(b, testserver.Options{Latency: rtt}, WithMaxInflight(inflight))
				b.SetBytes(size)
				b.ReportAllocs()
				for b.Loop() {
					f, err := c.Create(context.Background(), "dst")
					if err != nil {
						b.Fatal(err)
					}
					if n, err := f.ReadFrom(io.LimitReader(benchZeros{}, size)); err != nil || n != size {
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

// BenchmarkTestServerShortReads downloads from a server capped at 32 KiB per DATA
// (rclone's cap): the client must learn the cap instead of paying a second READ for
// every chunk.
func BenchmarkTestServerShortReads(b *testing.B) {
	const size = 64 << 20
	c, srv := benchTestServerClient(b, testserver.Options{ReadCap: 32768})
	benchDownload(b, c, srv, size)
	b.ReportMetric(float64(srv.Requests(testserver.TypeRead))/float64(b.N), "READs/op")
}

func BenchmarkTestServerStat(b *testing.B) {
	c, srv := benchTestServerClient(b, testserver.Options{})
	if err := srv.WriteFile("src", []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Stat(context.Background(), "src"); err != nil {
			b.Fatal(err)
		}
	}
}
