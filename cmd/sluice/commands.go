package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"time"
)

func (a *app) ls(ctx context.Context, remoteArg string) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	s, closeFn, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	fi, err := s.client.Stat(ctx, r.Path)
	if err != nil {
		return fmt.Errorf("ls: %w", err)
	}
	if !fi.IsDir() {
		// Like ls(1): a file operand is shown under the name it was given.
		return printLong(a.stdout, []listEntry{{fi, r.Path}}, time.Now())
	}
	des, err := s.client.ReadDir(ctx, r.Path)
	if err != nil {
		return fmt.Errorf("ls: %w", err)
	}
	entries := make([]listEntry, 0, len(des))
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			return fmt.Errorf("ls: %w", err)
		}
		entries = append(entries, listEntry{info, de.Name()})
	}
	return printLong(a.stdout, entries, time.Now())
}

func (a *app) rm(ctx context.Context, remoteArg string) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	s, closeFn, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	if err := s.client.Remove(ctx, r.Path); err != nil {
		return fmt.Errorf("rm: %w", err)
	}
	return nil
}

func (a *app) mkdir(ctx context.Context, remoteArg string, parents bool) (err error) {
	r, err := a.target(remoteArg)
	if err != nil {
		return err
	}
	s, closeFn, err := a.open(ctx, r)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	mk := s.client.Mkdir
	if parents {
		mk = s.client.MkdirAll
	}
	if err := mk(ctx, r.Path, 0o755); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	return nil
}

type listEntry struct {
	info fs.FileInfo
	name string
}

// printLong writes entries like "ls -l" without links, owner and group:
// mode, size, modification time, name. now decides between a time and a year.
func printLong(w io.Writer, entries []listEntry, now time.Time) error {
	width := 1
	for _, e := range entries {
		width = max(width, len(strconv.FormatInt(e.info.Size(), 10)))
	}
	for _, e := range entries {
		_, err := fmt.Fprintf(w, "%s %*d %s %s\n", modeString(e.info.Mode()), width, e.info.Size(), lsTime(e.info.ModTime(), now), e.name)
		if err != nil {
			return err
		}
	}
	return nil
}

// lsTime formats t as ls(1) does: the time of day for the last six months, else the
// year. A server that sent no times gets a placeholder of the same width.
func lsTime(t, now time.Time) string {
	if t.IsZero() {
		return "           -"
	}
	t = t.Local()
	if d := now.Sub(t); d < 0 || d > 182*24*time.Hour {
		return t.Format("Jan _2  2006")
	}
	return t.Format("Jan _2 15:04")
}

// modeString renders m in ls(1)'s notation (Go's FileMode.String differs: "L" for
// links, type letters before the permissions).
func modeString(m fs.FileMode) string {
	b := []byte("----------")
	switch {
	case m&fs.ModeDir != 0:
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<uint(8-i)) != 0 {
			b[1+i] = rwx[i]
		}
	}
	special := func(pos int, set bool, lower, upper byte) {
		if !set {
			return
		}
		if b[pos] == '-' {
			b[pos] = upper
		} else {
			b[pos] = lower
		}
	}
	special(3, m&fs.ModeSetuid != 0, 's', 'S')
	special(6, m&fs.ModeSetgid != 0, 's', 'S')
	special(9, m&fs.ModeSticky != 0, 't', 'T')
	return string(b)
}
