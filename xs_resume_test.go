//go:build linux

package sftp

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Stop, then resume, on every server of the cross-server suite: a Put and a Get with
// Resume are stopped by their ctx part-way, and the same call is made again. The
// second call must end with the source's bytes in place, continued from no further
// than the part the first left (the part's end when that part was cut and marked,
// which a server that keeps times allows, else W before it; a server that truncates
// on open, as rclone does, starts over). A service emulated from its documentation
// may refuse the upload instead, but then leaves nothing under the name: never a
// wrong file with a nil error.

// xsStop is what one stop-then-resume saw.
type xsStop struct {
	stopErr error // the first call's
	part    int64 // the part it left, -1 for none
	from    int64 // where the second call started the file, -1 with no report
	err     error // the second call's
}

// xsStopThenResume runs call until a report shows at least a quarter of size done,
// stops it there, and runs it again; part is the size of the part file it left.
func xsStopThenResume(e *xsEnv, size int64, call func(context.Context, TransferOption) error, part func() int64) xsStop {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var s xsStop
	s.stopErr = call(ctx, OnProgress(func(p Progress) {
		if p.Bytes >= size/4 {
			cancel()
		}
	}))
	// A stopped upload's part is cut and marked in the background (partcut.go): its
	// size is known once that has ended.
	e.c.partEnds.wait(testTimeout)
	s.part = part()
	s.from = -1
	s.err = call(e.ctx, OnProgress(func(p Progress) {
		if s.from < 0 {
			s.from = p.Bytes
		}
	}))
	return s
}

func xsSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return -1
	}
	return fi.Size()
}

func xsResumeScenarios() []xsScenario {
	const size = 24<<20 + 77
	data := randBytes(size, 31)
	setup := func(t *testing.T, dir string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "down-src"), data, 0o644))
	}
	type stops struct {
		put, get xsStop
		down     string // the Get's destination
	}
	do := func(e *xsEnv) stops {
		tmp := e.TempDir()
		src := filepath.Join(tmp, "src")
		require.NoError(e, os.WriteFile(src, data, 0o644))
		s := stops{down: filepath.Join(tmp, "down")}
		s.put = xsStopThenResume(e, size, func(ctx context.Context, o TransferOption) error {
			return e.c.Put(ctx, src, "up", Resume(), o)
		}, func() int64 { return xsSize(e.local(".up" + partSuffix)) })
		s.get = xsStopThenResume(e, size, func(ctx context.Context, o TransferOption) error {
			return e.c.Get(ctx, "down-src", s.down, Resume(), o)
		}, func() int64 { return xsSize(s.down + partSuffix) })
		return s
	}
	// resumed: the file is whole, continued from no further than the part.
	resumed := func(e *xsEnv, s xsStop, what, name string) {
		require.ErrorIs(e, s.stopErr, context.Canceled, "%s: the first call was not stopped", what)
		require.NoError(e, s.err, what)
		got, err := os.ReadFile(name)
		require.NoError(e, err, what)
		require.True(e, bytes.Equal(data, got), "%s: the resumed file differs from its source", what)
		require.GreaterOrEqual(e, s.part, s.from, "%s: continued past the part left", what)
		e.Logf("%s: stopped with a part of %d bytes, continued from %d", what, s.part, s.from)
	}
	// resumedOrRefused: as resumed, or refused with nothing left under the name.
	resumedOrRefused := func(e *xsEnv, s xsStop, what, name string) {
		if s.err == nil {
			resumed(e, s, what, name)
			return
		}
		e.Logf("%s: refused: %v", what, s.err)
		require.NoFileExists(e, name, "%s: refused, yet a file is under the name", what)
	}
	everywhere := func(e *xsEnv, s stops) {
		resumed(e, s.put, "put", e.local("up"))
		resumed(e, s.get, "get", s.down)
	}
	want := xsAll(everywhere)
	for _, p := range xsPersonalityServers {
		want[p.name] = func(e *xsEnv, s stops) {
			resumedOrRefused(e, s.put, "put", e.local("up"))
			resumedOrRefused(e, s.get, "get", s.down)
		}
	}
	return []xsScenario{xsCase("stop-then-resume", setup, do, want)}
}
