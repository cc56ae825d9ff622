//go:build !linux

package main

import (
	"os/exec"
	"time"
)

// The harness measures on Linux (tmpfs, GNU time, a private sshd). Elsewhere it builds,
// and these fall back to what every OS has.

// isTmpfs cannot tell here; the report then says the files may be on a real disk.
func isTmpfs(string) bool { return false }

// killTreeOnCancel leaves exec's default: only cmd itself is killed on cancel.
func killTreeOnCancel(*exec.Cmd) {}

// serverCPU cannot read /proc here: the small-call tables leave the server's CPU out.
func serverCPU(int) map[int]procCPU { return nil }

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
