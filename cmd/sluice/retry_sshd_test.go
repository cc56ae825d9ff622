package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
)

// --retries across a connection killed mid-transfer: the per-connection sshd and its
// sftp-server are SIGKILLed once a few MiB have moved; sluice reconnects and continues
// from the part file (from its start: a part of a few MiB holds no point the library
// can prove, its W being 64 MiB), and the copy is byte-identical. Both directions.
func TestSSHRetriesAfterKilledConnection(t *testing.T) {
	isolateEnv(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	dir := t.TempDir()
	const size = 32<<20 + 123
	src, data := randomFile(t, dir, "src.bin", size)
	args := sshArgs(s, s.KnownHostsFile)

	// killAt returns a hook that kills the server's sessions once, when at least n
	// bytes have moved, and counts its kills.
	killAt := func(n int64, kills *atomic.Int32) func(a *app) {
		return func(a *app) {
			var done atomic.Bool
			a.testProgress = func(p sftp.Progress) {
				if p.TotalBytes >= n && !done.Swap(true) {
					require.Positive(t, s.KillSessions())
					kills.Add(1)
				}
			}
			// The pause between tries is not what is tested.
			a.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
		}
	}

	remote := filepath.Join(dir, "up.bin")
	var kills atomic.Int32
	r := runApp(t, killAt(4<<20, &kills), append(args, "put", "--retries", "3", src, remoteOn(s, remote))...)
	requireOK(t, r)
	require.EqualValues(t, 1, kills.Load())
	require.Contains(t, r.stderr, "sluice: put "+src+": ")
	// The connection was moving data: the retry goes at once.
	require.Contains(t, r.stderr, "; retrying (retry 1 of 3)")
	require.Regexp(t, `put .* -> .*: `+strconv.Itoa(size)+` bytes( \(\d+ resumed\))? in `, r.stderr)
	got, err := os.ReadFile(remote)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the upload is not byte-identical")
	require.NoFileExists(t, filepath.Join(dir, ".up.bin.sluice-part"))

	back := filepath.Join(dir, "back.bin")
	kills.Store(0)
	r = runApp(t, killAt(4<<20, &kills), append(args, "get", "--retries", "2", remoteOn(s, remote), back)...)
	requireOK(t, r)
	require.EqualValues(t, 1, kills.Load())
	require.Contains(t, r.stderr, "; retrying (retry 1 of 2)")
	require.Regexp(t, `get .* -> .*: `+strconv.Itoa(size)+` bytes( \(\d+ resumed\))? in `, r.stderr)
	got, err = os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the download is not byte-identical")

	// Without --retries the drop is the command's failure, and the part file stays
	// for -a.
	lost := filepath.Join(dir, "lost.bin")
	kills.Store(0)
	r = runApp(t, killAt(4<<20, &kills), append(args, "get", remoteOn(s, remote), lost)...)
	require.Equal(t, exitFail, r.code)
	require.NotContains(t, r.stderr, "retrying")
	require.FileExists(t, lost+".sluice-part")
	r = runCLI(t, append(args, "get", "-a", remoteOn(s, remote), lost)...)
	requireOK(t, r)
	got, err = os.ReadFile(lost)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))

	// A failure on a live connection is final: not retried.
	r = runApp(t, killAt(1<<62, &kills), append(args, "put", "--retries", "3", src, remoteOn(s, "/proc/sluice-cannot-create"))...)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "sluice: put "+src+" -> /proc/sluice-cannot-create: open /proc/sluice-cannot-create: ")
	require.False(t, strings.Contains(r.stderr, "retrying"), "%s", r.stderr)
}
