package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/crypto/ssh"
)

// The plain-par row: N SSH connections, each with one session channel moving 1/N of the
// file through dd, and no SFTP at all. It is what the link and the two cores can carry
// when nothing but N separate windows and N separate cipher streams are in the way: the
// ceiling a striping SFTP client aims for behind a long RTT.

// defaultPlainPar is -plain-par's default: the 16 connections issue 11's target names.
const defaultPlainPar = 16

// maxDialsAtOnce keeps the handshakes in flight below the MaxStartups of the harness's
// sshd (100; a stock server starts dropping above 10 unauthenticated connections).
const maxDialsAtOnce = 64

func init() {
	register(&row{id: "plain-par", title: "parallel plain channels (`dd`)", order: 15,
		detail: func(c *config, _ benchCase) string {
			return fmt.Sprintf("%d connections", c.plainPar)
		},
		remoteFile: true, transfer: plainParTransfer})
}

// byteRange is one connection's share of the file.
type byteRange struct{ off, n int64 }

// splitRanges cuts size bytes into n consecutive ranges whose lengths differ by at most
// one byte (the first size%n get the extra byte) and add up to size exactly. It never
// returns an empty range: with fewer bytes than n, it returns size ranges of one byte.
func splitRanges(size int64, n int) []byteRange {
	if size <= 0 || n <= 0 {
		return nil
	}
	if int64(n) > size {
		n = int(size)
	}
	base, extra := size/int64(n), size%int64(n)
	out := make([]byteRange, n)
	var off int64
	for i := range out {
		l := base
		if int64(i) < extra {
			l++
		}
		out[i] = byteRange{off: off, n: l}
		off += l
	}
	return out
}

// rangeCommand is the remote command moving r of path: dd with byte offsets and counts
// (GNU dd's skip_bytes, count_bytes, seek_bytes), so block size only sets the syscall
// size, never the amount. An upload writes into the file without truncating it, so the
// N writers fill one file between them; iflag=fullblock is not needed because without a
// count dd writes each read's bytes as they come.
func rangeCommand(dir direction, path string, r byteRange) string {
	if dir == download {
		return fmt.Sprintf("dd if=%s bs=1M skip=%d count=%d iflag=skip_bytes,count_bytes status=none",
			shellQuote(path), r.off, r.n)
	}
	return fmt.Sprintf("dd of=%s bs=1M seek=%d oflag=seek_bytes conv=notrunc status=none",
		shellQuote(path), r.off)
}

// plainParTransfer dials j.Parallel-1 more connections next to conn and moves one range
// over each at once. Dialing is part of the row's cost, as it is of every row's wall time.
func plainParTransfer(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
	ranges := splitRanges(j.Size, max(j.Parallel, 1))
	conns := make([]*ssh.Client, len(ranges))
	conns[0] = conn
	if err := dialMore(ctx, j, conns[1:]); err != nil {
		return 0, err
	}
	defer func() {
		for _, c := range conns[1:] {
			_ = c.Close()
		}
	}()
	var src *os.File
	if j.Dir == upload {
		var err error
		if src, err = os.Open(j.Local); err != nil {
			return 0, err
		}
		defer src.Close()
	}
	moved := make([]int64, len(ranges))
	errs := make([]error, len(ranges))
	var wg sync.WaitGroup
	for i, r := range ranges {
		wg.Go(func() {
			moved[i], errs[i] = moveRange(conns[i], j, src, r)
			if errs[i] == nil && moved[i] != r.n {
				errs[i] = fmt.Errorf("range %d+%d moved %d bytes", r.off, r.n, moved[i])
			}
		})
	}
	wg.Wait()
	var total int64
	for _, n := range moved {
		total += n
	}
	return total, errors.Join(errs...)
}

// dialMore fills conns with new connections, at most maxDialsAtOnce handshakes at a time;
// on failure it closes the ones it opened.
func dialMore(ctx context.Context, j *job, conns []*ssh.Client) error {
	errs := make([]error, len(conns))
	sem := make(chan struct{}, maxDialsAtOnce)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			conns[i], errs[i] = dial(ctx, j)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
		return fmt.Errorf("dialing %d more connections: %w", len(conns), err)
	}
	return nil
}

// moveRange runs r's dd on one connection: a download counts what arrives, an upload
// sends r's bytes of src (read with ReadAt, so the ranges share one file).
func moveRange(conn *ssh.Client, j *job, src *os.File, r byteRange) (int64, error) {
	cmd := rangeCommand(j.Dir, j.Remote, r)
	if j.Dir == download {
		return sessionCopy(conn, cmd, nil)
	}
	return sessionCopy(conn, cmd, io.NewSectionReader(src, r.off, r.n))
}
