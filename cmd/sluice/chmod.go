package main

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// chmod sets the permission bits of remote files, as chmod(1) takes them: octal
// (644, 0755) or symbolic (u+x, go-w, a=r, +x, u=rwx,g=rx,o=). A symbolic mode
// changes the bits the file has, which one STAT per file reads first. Unlike chmod(1)
// a symbolic mode without u, g, o or a means a (the local umask is nothing to the
// server).
func (a *app) chmod(ctx context.Context, args []string) (err error) {
	change, err := parseMode(args[0])
	if err != nil {
		return usagef("chmod: %v", err)
	}
	paths, s, closeFn, err := a.openPaths(ctx, "chmod", args[1:])
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	for _, p := range paths {
		octx, cancel := a.opCtx(ctx)
		err := a.chmodOne(octx, s, p, change)
		err = a.timeoutError(ctx, octx, "chmod "+p, err)
		cancel()
		if err != nil {
			return fmt.Errorf("chmod: %w", describe(err, p))
		}
	}
	return nil
}

func (a *app) chmodOne(ctx context.Context, s *session, p string, change modeChange) error {
	var old fs.FileMode
	if change.relative {
		fi, err := s.client.Stat(ctx, p)
		if err != nil {
			return err
		}
		old = fi.Mode()
	}
	return s.client.Chmod(ctx, p, change.apply(old))
}

// modeChange is a parsed MODE: an absolute mode, or clauses applied to the old one.
type modeChange struct {
	relative bool
	abs      fs.FileMode
	clauses  []modeClause
}

type modeClause struct {
	who  fs.FileMode // the rwx bits of u, g and o it acts on
	op   byte        // '+', '-' or '='
	bits fs.FileMode // r, w, x (for who), s and t
	bigX bool        // X: x where some x is set, or on a directory
}

const (
	whoU = fs.FileMode(0o700) | fs.ModeSetuid
	whoG = fs.FileMode(0o070) | fs.ModeSetgid
	whoO = fs.FileMode(0o007) | fs.ModeSticky
)

// parseMode reads chmod(1)'s MODE: octal, or comma-separated [ugoa]*[+-=][rwxXst]*.
func parseMode(s string) (modeChange, error) {
	if n, err := strconv.ParseUint(s, 8, 32); err == nil {
		if n > 0o7777 {
			return modeChange{}, fmt.Errorf("invalid mode %s: want at most 7777", s)
		}
		m := fs.FileMode(n & 0o777)
		for bit, fm := range map[uint64]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
			if n&bit != 0 {
				m |= fm
			}
		}
		return modeChange{abs: m}, nil
	}
	if s != "" && strings.Trim(s, "0123456789") == "" {
		// Digits, yet not octal: 8 or 9 somewhere.
		return modeChange{}, fmt.Errorf("invalid mode %s: an octal mode has only the digits 0 to 7", s)
	}
	c := modeChange{relative: true}
	for _, clause := range strings.Split(s, ",") {
		mc, err := parseClause(clause)
		if err != nil {
			return modeChange{}, fmt.Errorf("mode %q: %v (want octal such as 644, or symbolic such as u+x,go-w)", s, err)
		}
		c.clauses = append(c.clauses, mc)
	}
	return c, nil
}

func parseClause(s string) (modeClause, error) {
	var mc modeClause
	i := 0
	for ; i < len(s) && strings.IndexByte("ugoa", s[i]) >= 0; i++ {
		mc.who |= map[byte]fs.FileMode{'u': whoU, 'g': whoG, 'o': whoO, 'a': whoU | whoG | whoO}[s[i]]
	}
	if mc.who == 0 {
		mc.who = whoU | whoG | whoO
	}
	if i == len(s) || strings.IndexByte("+-=", s[i]) < 0 {
		return mc, fmt.Errorf("%q has no +, - or =", s)
	}
	mc.op = s[i]
	for _, p := range s[i+1:] {
		switch p {
		case 'r':
			mc.bits |= 0o444
		case 'w':
			mc.bits |= 0o222
		case 'x':
			mc.bits |= 0o111
		case 'X':
			mc.bigX = true
		case 's':
			mc.bits |= fs.ModeSetuid | fs.ModeSetgid
		case 't':
			mc.bits |= fs.ModeSticky
		default:
			return mc, fmt.Errorf("%q: unknown permission %q", s, p)
		}
	}
	return mc, nil
}

// permBits are the bits chmod changes.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// apply gives the mode to set on a file whose mode is old.
func (c modeChange) apply(old fs.FileMode) fs.FileMode {
	if !c.relative {
		return c.abs
	}
	m := old & permBits
	for _, cl := range c.clauses {
		bits := cl.bits
		if cl.bigX && (old.IsDir() || old&0o111 != 0) {
			bits |= 0o111
		}
		bits &= cl.who
		switch cl.op {
		case '+':
			m |= bits
		case '-':
			m &^= bits
		case '=':
			m = m&^cl.who | bits
		}
	}
	return m
}
