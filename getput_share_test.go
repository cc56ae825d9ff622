package sftp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// TestTreeSharesTheWindow checks that a tree copy bounds what all its files keep in
// flight together: each file takes a share of the window, so 16 files side by side hold
// about 4 windows, not 16. The server measures requests in flight exactly; its latency
// makes every file fill whatever window it has.
func TestTreeSharesTheWindow(t *testing.T) {
	const files, size = 16, 1 << 20
	c, srv := newTestServerClient(t, testserver.Options{Latency: 20 * time.Millisecond}, WithMaxPacket(4096))
	local := t.TempDir()
	for i := range files {
		require.NoError(t, os.WriteFile(filepath.Join(local, fmt.Sprintf("f%02d", i)), make([]byte, size), 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	require.NoError(t, c.Put(ctx, local, "/tree", Recursive(), Parallel(files)))

	perFile := max(8, 4*c.window()/files) // what File.window gives each of them
	require.Less(t, perFile, c.window(), "the share must be smaller than a whole window")
	got := srv.MaxInflight()
	require.LessOrEqual(t, got, files*perFile, "in flight across the tree")
	require.Greater(t, got, perFile, "files must still move side by side")
	for i := range files {
		b, err := srv.ReadFile(fmt.Sprintf("/tree/f%02d", i))
		require.NoError(t, err)
		require.Len(t, b, size)
	}
}

func TestFileWindowShare(t *testing.T) {
	c := &Client{opts: options{maxInflight: 64, channels: 1}}
	for _, tc := range []struct{ share, want int }{{0, 64}, {1, 64}, {4, 64}, {16, 16}, {64, 8}, {1000, 8}} {
		f := &File{c: c, share: tc.share}
		require.Equal(t, tc.want, f.window(), "share %d", tc.share)
	}
}
