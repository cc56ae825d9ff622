package sshdtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Finding and stopping the processes sshd leaves behind reads /proc, so it is Linux's
// (proc_other.go stands in elsewhere, where the tests that need sshd skip anyway).

// setDeathSignal makes the kernel stop cmd if this process dies without cleaning up,
// rather than leave a server behind on the machine.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// procInfo is what /proc/PID/stat tells about one process.
type procInfo struct {
	pid, ppid int
	state     byte // 'Z' for a zombie
}

// readProc parses /proc/PID/stat. The command name sits in parentheses and may itself
// contain spaces and parentheses, so the fields are found after the last ')'.
func readProc(pid int) (procInfo, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, errors.New("sshdtest: malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procInfo{}, errors.New("sshdtest: malformed /proc stat")
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procInfo{}, err
	}
	return procInfo{pid: pid, ppid: ppid, state: f[0][0]}, nil
}

// descendants returns every live process below root. sshd's per-connection children call
// setsid, so they leave sshd's process group: walking parent links is the only way to find
// them (and the sftp-server processes under them) from outside.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil && p.state != 'Z' {
			children[p.ppid] = append(children[p.ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// processAlive reports whether pid names a process that has not exited. A zombie counts as
// gone: its parent may be an init that never reaps (as in some containers).
func processAlive(pid int) bool {
	p, err := readProc(pid)
	return err == nil && p.state != 'Z'
}

// waitGone polls until none of pids is alive or the deadline passes, and reports the ones
// still alive. Processes that are not our children cannot be waited for, hence polling.
func waitGone(pids []int, timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		var alive []int
		for _, p := range pids {
			if processAlive(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		pids = alive
		time.Sleep(10 * time.Millisecond)
	}
}

// signalAll sends sig to each pid, ignoring processes that have already gone.
func signalAll(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}
