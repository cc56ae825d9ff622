//go:build !linux

package main

import "os/exec"

// The harness measures on Linux (tmpfs, GNU time, a private sshd). Elsewhere it builds,
// and these fall back to what every OS has.

// isTmpfs cannot tell here; the report then says the files may be on a real disk.
func isTmpfs(string) bool { return false }

// killTreeOnCancel leaves exec's default: only cmd itself is killed on cancel.
func killTreeOnCancel(*exec.Cmd) {}
