package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func at(seconds float64) measurement {
	return measurement{ran: true, wall: time.Duration(seconds * float64(time.Second))}
}

func TestSummaryTable(t *testing.T) {
	sftp1 := &row{id: "openssh", title: "OpenSSH sftp(1)"}
	base := &row{id: sluiceDefaultID, title: "sluice default"}
	par := &row{id: "plain-par", title: "parallel"}
	const size = 100 << 20
	res := newResults([]*row{par, sftp1, base}, 2, size, 10*time.Second)
	// MiB/s: sftp(1) 10, 20; sluice 50, 50; plain-par 100, 50 ->
	// sluice/sftp(1) 5, 2.5 -> 3.75; sluice/plain 0.5, 1 -> 0.75.
	res.set(sftp1, 0, at(10))
	res.set(sftp1, 1, at(5))
	res.set(base, 0, at(2))
	res.set(base, 1, at(2))
	res.set(par, 0, at(1))
	res.set(par, 1, at(2))
	s := &summaryTable{plainPar: 16}
	s.add(res, 50*time.Millisecond, download, 2)

	// A tree table: no plain-par figure even though the row is listed; sftp(1) timed out.
	tree := &treeSource{files: make([]string, 200), fileSize: 4096}
	tres := newTreeResults([]*row{sftp1, base}, 1, tree, 100*time.Second)
	tres.set(sftp1, 0, measurement{ran: true, timedOut: true})
	tres.set(base, 0, at(4))
	s.add(tres, 100*time.Millisecond, upload, 1)

	// sluice default not in the run: its cells stay empty.
	res2 := newResults([]*row{sftp1}, 1, 1<<30, time.Minute)
	res2.set(sftp1, 0, at(64))
	s.add(res2, 0, upload, 1)

	var b strings.Builder
	s.write(&b)
	out := b.String()
	require.Contains(t, out, "| RTT | size | dir | sftp(1) | sluice | sluice/sftp(1) | 16 × plain `dd` | sluice/plain | rounds |")
	require.Contains(t, out, "| 50ms | 100 MiB | down | 15.0 | 50.0 | 3.75 | 75.0 | 0.75 | 2 |")
	require.Contains(t, out, "| 100ms | tree 200 files | up | 2.0\\* | 50.0 | 25.00\\* | – | – | 1 |")
	require.Contains(t, out, "| 0 | 1 GiB | up | 16.0 | – | – | – | – | 1 |")
	require.Equal(t, 3, strings.Count(out, "\n| ")-1, "a heading and one line per table")

	var empty strings.Builder
	(&summaryTable{}).write(&empty)
	require.Empty(t, empty.String(), "no table finished: no summary")
}

// TestResultsBase checks the pipe case's ratio base and the timed-out bookkeeping the
// round loop uses to skip a row that already ran into the timeout.
func TestResultsBase(t *testing.T) {
	sftp1 := &row{id: "openssh", title: "OpenSSH sftp(1)"}
	one := &row{id: pipeRowID, title: "one pipe"}
	opener := &row{id: pipeOpenerRowID, title: "opener"}
	res := newResults([]*row{sftp1, one, opener}, 2, 64<<20, 10*time.Second)
	require.Nil(t, res.base, "no sluice default row: no base until set")
	res.setBase(pipeBaseRow(res.rows))
	res.set(sftp1, 0, at(4))
	res.set(one, 0, at(2))
	res.set(opener, 0, at(0.5))
	require.False(t, res.timedOut(one))
	res.set(one, 1, measurement{ran: true, timedOut: true})
	require.True(t, res.timedOut(one))
	require.False(t, res.timedOut(opener))

	var b strings.Builder
	res.write(&b, &config{}, "pipe")
	out := b.String()
	require.Contains(t, out, "| row | MiB/s (median) | sluice-pipe-opener/row |")
	require.Contains(t, out, "| OpenSSH sftp(1) | 16.0 | 8.00 |")
	require.Contains(t, out, "| opener | 128.0 | 1.00 |")

	plain := newResults([]*row{sftp1}, 1, 1<<20, time.Second)
	plain.set(sftp1, 0, at(1))
	var p strings.Builder
	plain.write(&p, &config{}, "no base")
	require.Contains(t, p.String(), "| OpenSSH sftp(1) | 1.0 | – |", "no ratio without a base row")
}
