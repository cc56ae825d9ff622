package sftp

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The Journal (journal.go): a Put whose connections die cannot cut its part; with a
// Journal the next call of the process continues from the prefix the server had
// acknowledged, not W before the part's end. An entry past the part's end is not
// used; a part made afresh drops its entry; a CLOSE the server fails leaves none.

const testPart = ".dst" + partSuffix

// killPut runs a Put on a fresh Client keeping j, and kills every session of the
// server once at bytes are acknowledged. It returns the last progress report's bytes.
func (m *markCase) killPut(t *testing.T, at int64, j *Journal) int64 {
	c := m.env.client(t, m.plan.clientOpts()...)
	var last int64
	var once bool
	var err error
	within(t, func() {
		err = c.Put(testCtx(t), m.src, "dst", KeepJournal(j), OnProgress(func(p Progress) {
			last = p.Bytes
			if p.Bytes >= at && !once {
				once = true
				m.env.srv.KillSessions()
			}
		}))
	})
	require.Error(t, err)
	c.Close()
	return last
}

func TestJournalResumesWhereTheConnectionDropped(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			m := newMarkCase(t, 20+seed, nil)
			m.plan.span = 8 << 20 // W larger than the file: without the Journal, Resume starts over
			j := NewJournal()
			acked := m.killPut(t, int64(1<<20+seed*300<<10), j)
			part, marked := m.part(t)
			require.False(t, marked, "a part whose connections died was marked")
			require.GreaterOrEqual(t, int64(len(part)), acked)
			require.Equal(t, acked, j.written(testPart))
			require.Positive(t, acked)
			require.Equal(t, acked, m.resumePut(t, KeepJournal(j)))
			require.Zero(t, j.written(testPart), "the entry outlived the finished upload")
		})
	}
}

// An entry past the part's end (another writer cut it, say) is not used.
func TestJournalEntryPastThePartIsIgnored(t *testing.T) {
	m := newMarkCase(t, 30, nil)
	j := NewJournal()
	acked := m.killPut(t, 2<<20, j)
	require.Equal(t, acked, j.written(testPart))
	part, err := m.env.read(testPart)
	require.NoError(t, err)
	short := acked - 256<<10
	m.env.write(t, testPart, part[:short])
	require.Equal(t, short-m.plan.span, m.resumePut(t, KeepJournal(j)))
}

// A part created afresh (here by a Put without Resume) drops what the Journal held.
func TestJournalForgetsAPartMadeAfresh(t *testing.T) {
	m := newMarkCase(t, 31, nil)
	j := NewJournal()
	require.Positive(t, m.killPut(t, 2<<20, j))
	c := m.env.client(t, m.plan.clientOpts()...)
	call, err := c.newCall(testCtx(t), []TransferOption{KeepJournal(j)})
	require.NoError(t, err)
	f, err := call.createRemotePart(testCtx(t), testPart, 0o644)
	require.NoError(t, err)
	require.Zero(t, j.written(testPart))
	require.NoError(t, f.Close())
}

// A CLOSE the server answers with a failure may report a write it lost: the Journal
// keeps nothing of that upload. (Without the refused CLOSE it keeps the prefix.)
func TestJournalNotAfterAFailedClose(t *testing.T) {
	const refuseAt = 1 << 20
	for _, closeFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("close fails=%v", closeFails), func(t *testing.T) {
			m := newMarkCase(t, 32, func(o *testserver.Options) {
				o.Fail = func(r testserver.Request) uint32 {
					switch {
					case r.Type == testserver.TypeWrite && r.Offset == refuseAt:
						return testserver.StatusFailure
					case r.Type == testserver.TypeClose && closeFails:
						return testserver.StatusFailure
					}
					return 0
				}
			})
			m.plan.lanes = 1
			c := m.env.client(t, m.plan.clientOpts()...)
			j := NewJournal()
			err := c.Put(testCtx(t), m.src, "dst", KeepJournal(j))
			require.Error(t, err)
			require.NotErrorIs(t, err, context.Canceled)
			if closeFails {
				require.Zero(t, j.written(testPart))
			} else {
				require.EqualValues(t, refuseAt, j.written(testPart))
			}
		})
	}
}

func TestJournalBounded(t *testing.T) {
	j := NewJournal()
	for i := range maxJournalEntries + 10 {
		j.record(fmt.Sprint(i), 1)
	}
	require.Len(t, j.parts, maxJournalEntries)
	j.record("x", 0)
	require.Zero(t, j.written("x"))
	var nilJournal *Journal
	require.Zero(t, nilJournal.written("x"))
	nilJournal.record("x", 1) // a call without KeepJournal
	_, err := newClientOptsCheck(KeepJournal(nil))
	require.Error(t, err)
}

// newClientOptsCheck applies transfer options as a call does.
func newClientOptsCheck(opts ...TransferOption) (*transferOptions, error) {
	var o transferOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &o, nil
}
