package sftptest

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	sftp "github.com/sluicehq/sftp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newServer(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := NewServer(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// Every personality serves the calls all of them allow: a listing, a stat, a
// whole-file write and read, a directory made and removed.
func TestEveryPersonalityServesTheCommonCalls(t *testing.T) {
	for _, p := range Personalities() {
		t.Run(p.Name(), func(t *testing.T) {
			s := newServer(t, Options{Personality: p})
			require.NoError(t, s.WriteFile("/a", []byte("hello"), 0o644))
			ctx := testCtx(t)
			c, err := s.Client(ctx)
			require.NoError(t, err)
			if p.Name() == "drop-folder" {
				require.NoError(t, c.WriteFile(ctx, "b", []byte("hi"), 0o644))
				_, err := c.Stat(ctx, "b")
				require.ErrorIs(t, err, fs.ErrPermission)
				got, err := s.ReadFile("/b")
				require.NoError(t, err)
				require.Equal(t, "hi", string(got))
				return
			}
			ents, err := c.ReadDir(ctx, ".")
			require.NoError(t, err)
			require.Len(t, ents, 1)
			require.Equal(t, "a", ents[0].Name())
			fi, err := c.Stat(ctx, "a")
			require.NoError(t, err)
			require.EqualValues(t, 5, fi.Size())
			require.NoError(t, c.WriteFile(ctx, "b", []byte("hi"), 0o644))
			got, err := c.ReadFile(ctx, "b")
			require.NoError(t, err)
			require.Equal(t, "hi", string(got))
			require.NoError(t, c.Mkdir(ctx, "d", 0o755))
			require.NoError(t, c.Remove(ctx, "d"))
		})
	}
	require.Equal(t, "openssh", Personality{}.Name())
}

func TestCloseClosesClients(t *testing.T) {
	s, err := NewServer(Options{})
	require.NoError(t, err)
	ctx := testCtx(t)
	c, err := s.Client(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err = c.Stat(ctx, ".")
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = s.Client(ctx)
	require.Error(t, err)
}

func TestDirServesTheDisk(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in"), []byte("disk"), 0o644))
	s := newServer(t, Options{Dir: dir, Personality: AzureBlob()})
	ctx := testCtx(t)
	c, err := s.Client(ctx)
	require.NoError(t, err)
	got, err := c.ReadFile(ctx, "in")
	require.NoError(t, err)
	require.Equal(t, "disk", string(got))
	require.ErrorIs(t, c.Chmod(ctx, "in", 0o600), errors.ErrUnsupported, "Azure's chmod, on a disk")
	_, err = NewServer(Options{Dir: filepath.Join(dir, "missing")})
	require.Error(t, err)
}

// Serve takes any byte stream: here one end of a net.Pipe.
func TestServeOverAStream(t *testing.T) {
	s := newServer(t, Options{})
	require.NoError(t, s.WriteFile("/f", []byte("x"), 0o644))
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Serve(a) }()
	ctx := testCtx(t)
	c, err := sftp.NewClientPipe(ctx, b, b)
	require.NoError(t, err)
	fi, err := c.Stat(ctx, "f")
	require.NoError(t, err)
	require.EqualValues(t, 1, fi.Size())
	require.NoError(t, c.Close())
	require.NoError(t, <-done)
}

// The fault hooks reach the server: a withheld reply, released; a synthetic
// listing; a counter.
func TestHooks(t *testing.T) {
	s := newServer(t, Options{
		Stall: func(r Request) bool { return r.Type == TypeStat && r.Path == "slow" },
		Listing: func(p string) Lister {
			if p != "big" {
				return nil
			}
			return func(page int) []ListEntry {
				if page > 0 {
					return nil
				}
				return []ListEntry{{Name: "x", Mode: 0o100644, Size: 7}}
			}
		},
	})
	require.NoError(t, s.WriteFile("/slow", nil, 0o644))
	ctx := testCtx(t)
	c, err := s.Client(ctx)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.Stat(ctx, "slow")
		done <- err
	}()
	require.NoError(t, s.WaitStalled(ctx, 1))
	require.Equal(t, 1, s.ReleaseStalledWhere(func(r Request) bool { return r.Path == "slow" }))
	require.NoError(t, <-done)
	ents, err := c.ReadDir(ctx, "big")
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.Equal(t, "x", ents[0].Name())
	require.GreaterOrEqual(t, s.Requests(TypeStat), 1)
}

func TestCorruptHelper(t *testing.T) {
	s := newServer(t, Options{Corrupt: StatusInstead(TypeAttrs, StatusOK)})
	ctx := testCtx(t)
	c, err := s.Client(ctx)
	require.NoError(t, err)
	_, err = c.Stat(ctx, ".")
	var se *sftp.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, sftp.StatusOK, se.Code)
	_, err = c.Stat(ctx, ".")
	require.NoError(t, err, "one reply spoilt, the channel lives")
}

// What sluice's Put does today on the personalities whose rows in docs/servers.md
// say "none yet": the failures their documented behaviour causes (issue 28, part 3,
// is to turn these into successes).
func TestPutToday(t *testing.T) {
	local := filepath.Join(t.TempDir(), "src")
	require.NoError(t, os.WriteFile(local, []byte("new"), 0o644))
	put := func(p Personality, existing bool) error {
		s := newServer(t, Options{Personality: p})
		if existing {
			require.NoError(t, s.WriteFile("/dst", []byte("old"), 0o644))
		}
		ctx := testCtx(t)
		c, err := s.Client(ctx)
		require.NoError(t, err)
		return c.Put(ctx, local, "dst")
	}
	require.NoError(t, put(AWSTransferS3(), true), "plain RENAME replaces")
	require.NoError(t, put(AzureBlob(), false))
	require.Error(t, put(AzureBlob(), true), "RENAME onto an existing name fails")
	var se *sftp.StatusError
	require.ErrorAs(t, put(HetznerStorageBox(), true), &se)
	require.EqualValues(t, 11, se.Code)
	require.ErrorIs(t, put(DropFolder(), false), fs.ErrPermission, "the first LSTAT is denied")
	require.ErrorContains(t, put(MinIO(), false), "directory", "the missing target stats as a directory")
}
