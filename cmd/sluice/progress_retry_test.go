package main

import (
	"errors"
	"testing"

	"github.com/sluicehq/sftp"
	"github.com/stretchr/testify/require"
)

// One display across a transfer's tries (--retries): the library's counts start again
// at each try, and the display adds what the earlier tries completed and moved. A file
// an earlier try cut short continues from bytes this run moved, not resumed ones; a
// file whose part was there before the run is resumed; a canceled file is no failure;
// a skipped one counts no bytes.
func TestDisplayAcrossRetries(t *testing.T) {
	t.Parallel()
	s := newScript(t, true, 80, "get", "d", "local/d")
	s.d.retrying = true
	tot := func(p sftp.Progress, size int64, total int) *sftp.Progress {
		p.TotalSize, p.FilesTotal = size, total
		return &p
	}
	// Try 1 (a: 4 MiB, b: 4 MiB, c: 4 MiB with 1 MiB in a part from an earlier run,
	// s: up to date): a moves, c resumes and is cut at 2 MiB, b is canceled at 1 MiB.
	s.at(0, tot(sftp.Progress{Path: "d/s", Bytes: 4 * mib, Size: 4 * mib, Done: true, Skipped: true, Files: 1}, 12*mib, 4))
	s.at(0, tot(sftp.Progress{Path: "d/a", Size: 4 * mib, Files: 1, InProgress: 1}, 12*mib, 4))
	s.at(0, tot(sftp.Progress{Path: "d/c", Bytes: mib, Size: 4 * mib, TotalBytes: mib, Files: 1, InProgress: 2}, 12*mib, 4))
	s.at(0, tot(sftp.Progress{Path: "d/b", Size: 4 * mib, TotalBytes: mib, Files: 1, InProgress: 3}, 12*mib, 4))
	s.at(100, tot(sftp.Progress{Path: "d/a", Bytes: 4 * mib, Size: 4 * mib, Done: true, TotalBytes: 5 * mib, Files: 2, InProgress: 2}, 12*mib, 4))
	s.at(150, tot(sftp.Progress{Path: "d/c", Bytes: 2 * mib, Size: 4 * mib, TotalBytes: 6 * mib, Files: 2, InProgress: 2}, 12*mib, 4))
	s.at(160, tot(sftp.Progress{Path: "d/c", Bytes: 2 * mib, Size: 4 * mib, Err: errors.New("lost"), TotalBytes: 7 * mib, Files: 2, FilesFailed: 1, InProgress: 1}, 12*mib, 4))
	s.at(160, tot(sftp.Progress{Path: "d/b", Bytes: mib, Size: 4 * mib, Err: errors.New("lost"), Canceled: true, TotalBytes: 7 * mib, Files: 2, FilesFailed: 1, FilesCanceled: 1}, 12*mib, 4))
	s.take()

	// Try 2 leaves out s and a (SkipFiles): c continues from 2 MiB, b from 1 MiB.
	s.d.retry()
	s.at(300, tot(sftp.Progress{Path: "d/c", Bytes: 2 * mib, Size: 4 * mib, TotalBytes: 2 * mib, InProgress: 1}, 8*mib, 2))
	// a's 4 MiB and c's 2: 6 MiB moved (try 1: 7 less c's 1 MiB from before) in 0.3 s.
	require.Equal(t, "\r2/4 files  6.0 MiB / 12.0 MiB   50%  20.0 MiB/s  ETA 0:00\x1b[K", s.take())
	s.at(300, tot(sftp.Progress{Path: "d/b", Bytes: mib, Size: 4 * mib, TotalBytes: 3 * mib, InProgress: 2}, 8*mib, 2))
	s.at(400, tot(sftp.Progress{Path: "d/c", Bytes: 4 * mib, Size: 4 * mib, Done: true, TotalBytes: 5 * mib, Files: 1, InProgress: 1}, 8*mib, 2))
	// a and c done, b at 1 MiB: 9 of the 12 MiB to do without s; 6+2 = 8 MiB moved
	// in 0.4 s.
	require.Equal(t, "\r3/4 files  9.0 MiB / 12.0 MiB   75%  20.0 MiB/s  ETA 0:00\x1b[K", s.take())
	s.at(500, tot(sftp.Progress{Path: "d/b", Bytes: 4 * mib, Size: 4 * mib, Done: true, TotalBytes: 8 * mib, Files: 2}, 8*mib, 2))
	require.Equal(t, "\r4/4 files  12.0 MiB / 12.0 MiB  100%  22.0 MiB/s  ETA 0:00\x1b[K", s.take())
	s.d.finish(nil)
	// 12 MiB in all, 1 MiB of it resumed (c's part from before the run); moved: 6 in
	// try 1, 8-3 in try 2: 11 MiB in 0.5 s.
	require.Equal(t, "\r\x1b[K"+"get d -> local/d: 4 files, 12582912 bytes (1048576 resumed), 1 unchanged skipped in 0.50 s, 22.0 MiB/s\n", s.take())
}
