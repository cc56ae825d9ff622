package main

import (
	"os/exec"
	"syscall"
)

// isTmpfs reports whether dir is on tmpfs, where file I/O stays out of the figures.
func isTmpfs(dir string) bool {
	var st syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	return syscall.Statfs(dir, &st) == nil && st.Type == tmpfsMagic
}

// killTreeOnCancel puts cmd in its own process group, killed whole when the run is
// cancelled (ssh under sftp(1) included) or when this process dies.
func killTreeOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
