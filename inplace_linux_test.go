package sftp

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Destinations that are not regular files are written in place (inplace.go): a device
// stays a device, a FIFO a FIFO, and no part file is made beside them.

// nullDevice makes a character device with /dev/null's numbers at name (root only),
// so that the tests never touch the real /dev/null.
func nullDevice(t *testing.T, name string) uint64 {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a device node needs root")
	}
	dev := unix.Mkdev(1, 3)
	require.NoError(t, syscall.Mknod(name, syscall.S_IFCHR|0o666, int(dev)))
	return dev
}

// requireNode checks that name is still a node of type typ (and device dev, for a
// device), and that nothing else is in its directory.
func requireNode(t *testing.T, name string, typ fs.FileMode, dev uint64) {
	t.Helper()
	fi, err := os.Lstat(name)
	require.NoError(t, err)
	require.Equal(t, typ, fi.Mode().Type(), "%s is no longer what it was", name)
	if dev != 0 {
		require.Equal(t, dev, uint64(fi.Sys().(*syscall.Stat_t).Rdev))
	}
	require.Equal(t, []string{filepath.Base(name)}, dirNames(t, filepath.Dir(name)), "something was left beside it")
}

func TestGetOntoADevice(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	_, remote := gpDirs(t)
	gpWrite(t, filepath.Join(remote, "big"), gpData(3<<20, 1))
	null := filepath.Join(t.TempDir(), "null")
	dev := nullDevice(t, null)
	for _, opts := range [][]TransferOption{nil, {Resume(), Preserve(), SkipUnchanged(), Fsync()}} {
		var ev events
		require.NoError(t, c.Get(ctx, filepath.Join(remote, "big"), null, append(opts, ev.opt())...))
		ev.check(t, 1, 3<<20)
		requireNode(t, null, fs.ModeDevice|fs.ModeCharDevice, dev)
	}
}

func TestGetOntoAFIFO(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	_, remote := gpDirs(t)
	data := gpData(1<<20, 2) // more than a pipe holds: the writes wait for the reader
	gpWrite(t, filepath.Join(remote, "f"), data)
	fifo := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, fifo, 0o644)

	t.Run("reader", func(t *testing.T) {
		// The reader's end is open before the Get (without waiting for a writer), and
		// it reads once the Get has opened its end, until the Get closes it.
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		require.NoError(t, err)
		defer r.Close()
		opened := make(chan struct{})
		got := tsGo(func() []byte {
			<-opened
			b, _ := io.ReadAll(r)
			return b
		})
		first := true
		err = c.Get(ctx, filepath.Join(remote, "f"), fifo, OnProgress(func(Progress) {
			if first {
				first = false
				close(opened)
			}
		}))
		require.NoError(t, err)
		require.Equal(t, data, tsRecv(t, got, "reading the FIFO"))
		requireNode(t, fifo, fs.ModeNamedPipe, 0)
	})
	t.Run("no reader", func(t *testing.T) {
		err := c.Get(ctx, filepath.Join(remote, "f"), fifo)
		require.ErrorIs(t, err, syscall.ENXIO)
		require.ErrorContains(t, err, "open for reading")
		requireNode(t, fifo, fs.ModeNamedPipe, 0)
	})
	t.Run("reader that never reads", func(t *testing.T) {
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		require.NoError(t, err)
		defer r.Close()
		// Room for the first piece of data and not for all: once the first is in,
		// ctx ends, and the writes waiting for room end with it.
		_, err = unix.FcntlInt(r.Fd(), unix.F_SETPIPE_SZ, 512<<10)
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err = c.Get(cctx, filepath.Join(remote, "f"), fifo, OnProgress(func(p Progress) {
			if p.Bytes > 0 {
				cancel()
			}
		}))
		require.ErrorIs(t, err, context.Canceled)
		requireNode(t, fifo, fs.ModeNamedPipe, 0)
	})
}

func TestPutOntoARemoteDeviceOrFIFO(t *testing.T) {
	c, _ := getPutClient(t, t.TempDir())
	ctx := testCtx(t)
	local, remote := gpDirs(t)
	gpWrite(t, filepath.Join(local, "big"), gpData(20<<20, 3)) // large enough to stripe, were it allowed
	null := filepath.Join(remote, "null")
	dev := nullDevice(t, null)
	var ev events
	require.NoError(t, c.Put(ctx, filepath.Join(local, "big"), null, Preserve(), ev.opt()))
	ev.check(t, 1, 20<<20)
	requireNode(t, null, fs.ModeDevice|fs.ModeCharDevice, dev)
	require.NoError(t, os.Remove(null))

	fifo := filepath.Join(remote, "fifo")
	mkfifo(t, fifo, 0o644)
	require.ErrorIs(t, c.Put(ctx, filepath.Join(local, "big"), fifo), errRemoteFIFO)
	requireNode(t, fifo, fs.ModeNamedPipe, 0)
}
