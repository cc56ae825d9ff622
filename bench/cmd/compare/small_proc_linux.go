package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// serverCPU returns the CPU time (user + system) each process below the process root
// (sshd) has used so far, by pid: sshd's per-connection processes, which run the
// cipher, and the sftp-server processes below them. sshd's per-connection children
// call setsid, so only parent links lead from sshd to them.
func serverCPU(root int) map[int]procCPU {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type proc struct {
		ppid   int
		server bool
		cpu    time.Duration
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The name sits in parentheses and may hold anything: the fields follow the
		// last ')'. After it: state ppid pgrp session tty tpgid flags minflt cminflt
		// majflt cmajflt utime stime.
		i := bytes.LastIndexByte(b, ')')
		open := bytes.IndexByte(b, '(')
		if i < 0 || open < 0 || open > i {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		ut, _ := strconv.ParseInt(string(f[11]), 10, 64)
		st, _ := strconv.ParseInt(string(f[12]), 10, 64)
		procs[pid] = proc{ppid: ppid, server: string(b[open+1:i]) == "sftp-server", cpu: time.Duration(ut+st) * clockTick}
	}
	below := func(pid int) bool {
		for range 64 { // parent links end at 1; the bound only guards a cycle
			p, ok := procs[pid]
			if !ok || p.ppid == 0 {
				return false
			}
			if p.ppid == root {
				return true
			}
			pid = p.ppid
		}
		return false
	}
	out := map[int]procCPU{}
	for pid, p := range procs {
		if below(pid) {
			out[pid] = procCPU{cpu: p.cpu, sftpServer: p.server}
		}
	}
	return out
}

// clockTick is the unit of /proc's CPU times, USER_HZ: 100 on every Linux build.
const clockTick = 10 * time.Millisecond

// processCPU is the CPU time (user + system) this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
