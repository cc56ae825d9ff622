package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitRanges(t *testing.T) {
	for _, tc := range []struct {
		size int64
		n    int
	}{{1 << 30, 16}, {256<<20 + 7, 16}, {64<<20 - 1, 3}, {1000, 7}, {5, 16}, {1, 1}, {17, 17}} {
		rs := splitRanges(tc.size, tc.n)
		require.Len(t, rs, int(min(int64(tc.n), tc.size)), "%+v", tc)
		var off int64
		lo, hi := rs[0].n, rs[0].n
		for _, r := range rs {
			require.Equal(t, off, r.off, "ranges are consecutive: %+v", tc)
			require.Positive(t, r.n, "no empty range: %+v", tc)
			off += r.n
			lo, hi = min(lo, r.n), max(hi, r.n)
		}
		require.Equal(t, tc.size, off, "ranges cover the file to the byte: %+v", tc)
		require.LessOrEqual(t, hi-lo, int64(1), "lengths differ by at most one byte: %+v", tc)
	}
	require.Equal(t, []byteRange{{0, 4}, {4, 3}, {7, 3}}, splitRanges(10, 3), "the first size%n ranges get the extra byte")
	require.Nil(t, splitRanges(0, 4))
	require.Nil(t, splitRanges(10, 0))
}

// TestRangeCommandExact runs the remote commands of plain-par with the local sh and dd on
// a file whose size divides neither by the range count nor by dd's block size, and checks
// that the downloaded ranges put together, and the file the uploads write between them,
// are the source to the byte.
func TestRangeCommandExact(t *testing.T) {
	if _, err := exec.LookPath("dd"); err != nil {
		t.Skip("no dd")
	}
	dir := t.TempDir()
	const size = 3<<20 + 12345
	src := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	srcPath := filepath.Join(dir, "src 'quoted'.bin")
	require.NoError(t, os.WriteFile(srcPath, src, 0o644))
	dstPath := filepath.Join(dir, "dst.bin")
	var got []byte
	// Uploads in reverse order: the file grows from its end first, and no writer may
	// truncate what another wrote.
	ranges := splitRanges(size, 7)
	for _, r := range ranges {
		out, err := exec.Command("sh", "-c", rangeCommand(download, srcPath, r)).Output()
		require.NoError(t, err)
		require.Len(t, out, int(r.n))
		got = append(got, out...)
	}
	for i := len(ranges) - 1; i >= 0; i-- {
		r := ranges[i]
		cmd := exec.Command("sh", "-c", rangeCommand(upload, dstPath, r))
		cmd.Stdin = bytes.NewReader(src[r.off : r.off+r.n])
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.True(t, bytes.Equal(src, got), "downloaded ranges differ from the source")
	up, err := os.ReadFile(dstPath)
	require.NoError(t, err)
	require.Len(t, up, size)
	require.True(t, bytes.Equal(src, up), "uploaded ranges differ from the source")
	require.NoError(t, sameContent(srcPath, dstPath))
}

func TestSameContent(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB: a whole number of buffers
	a := write("a", big)
	require.NoError(t, sameContent(a, write("b", bytes.Clone(big))))
	require.NoError(t, sameContent(write("e1", nil), write("e2", nil)))
	require.ErrorContains(t, sameContent(a, write("short", big[:len(big)-1])), "offset 1048576")
	require.ErrorContains(t, sameContent(a, write("long", append(bytes.Clone(big), 'x'))), "offset 2097152")
	flipped := bytes.Clone(big)
	flipped[5] ^= 1
	require.ErrorContains(t, sameContent(a, write("flip", flipped)), "offset 0")
	require.Error(t, sameContent(a, filepath.Join(dir, "absent")))
}
