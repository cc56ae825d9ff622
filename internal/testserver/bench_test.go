package testserver

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	benchSize  = 64 << 20
	benchChunk = 261120
)

// drain reads n replies into one reused buffer and returns the DATA bytes.
func drain(tb testing.TB, r io.Reader, n int, buf []byte) int {
	var hdr [4]byte
	total := 0
	for range n {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			tb.Fatal(err)
		}
		l := binary.BigEndian.Uint32(hdr[:])
		if _, err := io.ReadFull(r, buf[:l]); err != nil {
			tb.Fatal(err)
		}
		if buf[0] == TypeData {
			total += int(binary.BigEndian.Uint32(buf[5:]))
		} else if buf[0] != TypeStatus || binary.BigEndian.Uint32(buf[5:]) != StatusOK {
			tb.Fatalf("unexpected reply type %d", buf[0])
		}
	}
	return total
}

// BenchmarkRead pulls a 64 MiB file through the server with every READ of
// the file pipelined, reporting throughput and allocations per pass (both
// sides of the pipe run in this process, so allocs/op covers the server).
func BenchmarkRead(b *testing.B) {
	s := New(Options{})
	defer s.Close()
	require.NoError(b, s.WriteFile("/f", make([]byte, benchSize), 0o644))
	c := dial(b, s)
	h := c.mustOpen("/f", OpenRead)
	var reqs bytes.Buffer
	n := 0
	for off := 0; off < benchSize; off += benchChunk {
		reqs.Write(newPkt(TypeRead, uint32(n)).str(h).u64(uint64(off)).u32(benchChunk).bytes())
		n++
	}
	buf := make([]byte, 300<<10)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		c.write(reqs.Bytes())
		if got := drain(b, c.r, n, buf); got != benchSize {
			b.Fatalf("read %d bytes", got)
		}
	}
}

// BenchmarkWrite pushes 64 MiB into one file per pass with pipelined WRITEs.
func BenchmarkWrite(b *testing.B) {
	s := New(Options{})
	defer s.Close()
	c := dial(b, s)
	h := c.mustOpen("/f", OpenWrite|OpenCreat|OpenTrunc)
	data := string(make([]byte, benchChunk))
	var reqs bytes.Buffer
	n := 0
	for off := 0; off < benchSize; off += benchChunk {
		reqs.Write(newPkt(TypeWrite, uint32(n)).str(h).u64(uint64(off)).str(data).bytes())
		n++
	}
	buf := make([]byte, 4<<10)
	b.SetBytes(int64(n) * benchChunk)
	b.ReportAllocs()
	for b.Loop() {
		errc := make(chan error, 1)
		go func() {
			_, err := c.w.Write(reqs.Bytes())
			errc <- err
		}()
		drain(b, c.r, n, buf)
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}
