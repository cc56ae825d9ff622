package main

import (
	"bytes"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestModeString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m    fs.FileMode
		want string
	}{
		{0o644, "-rw-r--r--"},
		{fs.ModeDir | 0o755, "drwxr-xr-x"},
		{fs.ModeSymlink | 0o777, "lrwxrwxrwx"},
		{fs.ModeNamedPipe | 0o600, "prw-------"},
		{fs.ModeSocket | 0o700, "srwx------"},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, "crw-rw-rw-"},
		{fs.ModeDevice | 0o660, "brw-rw----"},
		{fs.ModeSetuid | 0o755, "-rwsr-xr-x"},
		{fs.ModeSetuid | 0o644, "-rwSr--r--"},
		{fs.ModeSetgid | 0o2750, "-rwxr-s---"},
		{fs.ModeDir | fs.ModeSticky | 0o777, "drwxrwxrwt"},
		{fs.ModeDir | fs.ModeSticky | 0o776, "drwxrwxrwT"},
		{0, "----------"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, modeString(tt.m), "mode %v", tt.m)
	}
}

func TestLsTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 6, 15, 12, 0, 0, 0, time.Local)
	require.Equal(t, "Jun  1 09:30", lsTime(time.Date(2024, 6, 1, 9, 30, 0, 0, time.Local), now))
	require.Equal(t, "Jan  2  2023", lsTime(time.Date(2023, 1, 2, 9, 30, 0, 0, time.Local), now))
	require.Equal(t, "Jul  4  2024", lsTime(time.Date(2024, 7, 4, 0, 0, 0, 0, time.Local), now), "future: the year")
	require.Len(t, lsTime(time.Time{}, now), len("Jan  2  2023"))
}

func TestPrintLongAligns(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	mt := time.Date(2020, 3, 4, 5, 6, 0, 0, time.Local)
	err := printLong(&buf, []listEntry{
		{info: fakeInfo{size: 5, mode: 0o600, mtime: mt}, name: "a"},
		{info: fakeInfo{size: 123456, mode: fs.ModeDir | 0o755, mtime: mt}, name: "dir"},
		{info: fakeInfo{size: 1, mode: fs.ModeSymlink | 0o777, mtime: mt}, name: "ln", target: "a"},
	}, mt.AddDate(0, 1, 0))
	require.NoError(t, err)
	require.Equal(t, "-rw------- -      5 Mar  4 05:06 a\ndrwxr-xr-x - 123456 Mar  4 05:06 dir\nlrwxrwxrwx -      1 Mar  4 05:06 ln -> a\n", buf.String())
}

type fakeInfo struct {
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (f fakeInfo) Name() string       { return "fake" }
func (f fakeInfo) Size() int64        { return f.size }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return f.mtime }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }
