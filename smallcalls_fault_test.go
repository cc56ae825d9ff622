package sftp

import (
	"context"
	"fmt"
	"io/fs"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// Faults on the pipelined small-call paths that smallcalls_test.go leaves out: ctx and
// Client.Close in every round a call waits in (not only the READs, WRITEs and READDIRs),
// a WRITE answered with a reply that breaks the protocol, and a directory that grows or
// shrinks between its OPENDIR and its READDIRs.

// TestSmallCallsCancelAndCloseEachRound: ReadFile waiting for its first round (the STAT
// and the OPEN sent together; the STAT alone held, or both) and WriteFile waiting for
// the CLOSE behind its WRITEs end when ctx does, naming the file, and leave no handle
// open at the server once it answers; or end with the channel's error when the Client
// is closed. TestSmallCallsCancelAndClose holds the other rounds.
func TestSmallCallsCancelAndCloseEachRound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stall []uint8
		held  int // replies held while the call waits
		call  func(ctx context.Context, c *Client) error
	}{
		{"ReadFile/STAT held", []uint8{tStat}, 1, func(ctx context.Context, c *Client) error {
			_, err := c.ReadFile(ctx, "/f")
			return err
		}},
		{"ReadFile/STAT and OPEN held", []uint8{tStat, tOpen}, 2, func(ctx context.Context, c *Client) error {
			_, err := c.ReadFile(ctx, "/f")
			return err
		}},
		{"WriteFile/CLOSE held", []uint8{tClose}, 1, func(ctx context.Context, c *Client) error {
			return c.WriteFile(ctx, "/f", gpData(3*c.Limits().MaxWrite, 9), 0o644)
		}},
	} {
		for _, closeClient := range []bool{false, true} {
			how := map[bool]string{false: "ctx", true: "Client.Close"}[closeClient]
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				var on atomic.Bool
				w := newCloseWatch()
				stall := stallTypes(&on, tc.stall...)
				c, srv := newTestServerClient(t, testserver.Options{Stall: func(r testserver.Request) bool {
					w.observe(r)
					return stall(r)
				}})
				require.NoError(t, srv.WriteFile("/f", gpData(4096, 7), 0o644))
				ctx, cancel := context.WithCancel(testCtx(t))
				defer cancel()
				on.Store(true)
				done := tsGo(func() error { return tc.call(ctx, c) })
				tsWaitStalled(t, srv, tc.held)
				if closeClient {
					require.NoError(t, c.Close())
					requireClosedConn(t, tsRecv(t, done, tc.name))
					return // the session is gone, and with it every handle
				}
				cancel()
				err := tsRecv(t, done, tc.name)
				require.ErrorIs(t, err, context.Canceled)
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, "/f", pe.Path)
				on.Store(false)
				require.Equal(t, tc.held, srv.ReleaseStalled())
				// The handle is closed once the server answers. Released replies may
				// come after a later request's (the server queues them apart), so
				// settle's round trip proves nothing here: wait for the CLOSE itself.
				w.waitHandles(t, srv)
				requireWorks(t, c)
			})
		}
	}
}

// TestWriteFileMalformedWriteReply: a WRITE of the pipelined burst answered with a
// reply that breaks the protocol (a STATUS cut short, a reply of an unknown type)
// fails the channel, and WriteFile returns that error, naming the file, rather than
// waiting for the rest of the burst or the CLOSE.
func TestWriteFileMalformedWriteReply(t *testing.T) {
	for name, corrupt := range map[string]func(testserver.Request, []byte) [][]byte{
		"STATUS cut short": testserver.CorruptTruncate(testserver.TypeStatus),
		"unknown type":     testserver.CorruptUnknownType(testserver.TypeStatus),
	} {
		t.Run(name, func(t *testing.T) {
			var armed atomic.Bool
			c, _ := newTestServerClient(t, testserver.Options{Corrupt: func(r testserver.Request, reply []byte) [][]byte {
				// The OPEN's reply is a HANDLE: the first STATUS is the first WRITE's.
				if !armed.Load() || r.Type != tWrite {
					return nil
				}
				return corrupt(r, reply)
			}})
			data := gpData(3*c.Limits().MaxWrite, 10)
			require.True(t, len(data) <= pipelinedWriteMax, "the data goes in one burst")
			armed.Store(true)
			err := c.WriteFile(testCtx(t), "/w", data, 0o644)
			requireChannelFailed(t, err)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "/w", pe.Path)
		})
	}
}

// TestReadDirChangedAfterOpendir: a directory that grows or shrinks between its
// OPENDIR and its READDIRs (the OPENDIR's reply held while it changes) is listed as
// the READDIRs give it, to their EOF, whatever it held when opened: grown past the
// first batch of READDIRs, cut to nothing, cut short, and served one entry a page
// (short READDIRs). The handle is closed in every case.
func TestReadDirChangedAfterOpendir(t *testing.T) {
	for _, tc := range []struct {
		name                string
		before, after, page int
	}{
		{"grew past the first batch", 5, 250, 10},
		{"grew within a page", 5, 9, 10},
		{"shrank to nothing", 30, 0, 10},
		{"shrank", 30, 3, 10},
		{"one entry a page", 5, 7, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var total atomic.Int64
			total.Store(int64(tc.before))
			var on atomic.Bool
			c, srv := newTestServerClient(t, testserver.Options{
				Listing: synthetic("/d", func(page int) []testserver.ListEntry {
					return numbered(int(total.Load()), tc.page)(page)
				}),
				Stall: stallTypes(&on, tOpendir),
			})
			on.Store(true)
			done := tsGo(func() tsEntries { es, err := c.ReadDir(testCtx(t), "/d"); return tsEntries{es, err} })
			tsWaitStalled(t, srv, 1) // the OPENDIR is done, its handle not yet sent
			on.Store(false)
			total.Store(int64(tc.after))
			require.Equal(t, 1, srv.ReleaseStalled())
			got := tsRecv(t, done, "ReadDir")
			require.NoError(t, got.err)
			require.Len(t, got.es, tc.after)
			for i, e := range got.es {
				require.Equal(t, numberedName(i), e.Name())
			}
			pages := tc.after/tc.page + 1 // and the EOF
			if tc.after%tc.page != 0 {
				pages++
			}
			require.GreaterOrEqual(t, srv.Requests(tReaddir), pages, "READDIRs up to the EOF")
			settle(t, c)
			require.Zero(t, srv.OpenHandles())
			require.Equal(t, 1, srv.Requests(tClose), fmt.Sprintf("one CLOSE, after %d READDIRs", srv.Requests(tReaddir)))
		})
	}
}

type tsEntries struct {
	es  []fs.DirEntry
	err error
}
