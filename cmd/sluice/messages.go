package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// One prefix per message, from the outermost caller. The library names a failed file
// as "put /tree/f: open ...", an *fs.PathError of the operation; the command's own
// prefix ("put: ", "put /tree: ") says the same less precisely, so where both would
// stand the library's is kept and the command's dropped.

// ownsOp reports whether err is itself an *fs.PathError of op: its message begins
// with "op PATH: ".
func ownsOp(err error, op string) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && err == error(pe) && pe.Op == op
}

// withOp is err under the prefix "op: ", unless err begins with op already.
func withOp(op string, err error) error {
	if err == nil || ownsOp(err, op) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// prefixed is the text "what: err", or err's alone when it begins with op already and
// names its path more precisely than what does; part names are replaced (userError).
func prefixed(op, what string, err error) string {
	if op != "" && ownsOp(err, op) {
		return userError(err)
	}
	return what + ": " + userError(err)
}

// dropOp is err's text without its leading "op ", for a line whose prefix says op
// already ("put: 1 of 3 files failed: f200.bin: write ...").
func dropOp(err error, op string) string {
	if ownsOp(err, op) {
		return strings.TrimPrefix(userError(err), op+" ")
	}
	return userError(err)
}
