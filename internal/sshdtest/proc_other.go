//go:build !linux

package sshdtest

import (
	"os/exec"
	"syscall"
	"time"
)

// Without /proc the processes sshd starts per connection cannot be found from outside:
// only sshd itself is stopped. The project runs sshd on Linux; elsewhere this keeps the
// package (and the tests and benchmarks that import it) building.

func setDeathSignal(*exec.Cmd) {}

func descendants(int) []int { return nil }

func signalAll([]int, syscall.Signal) {}

// waitGone cannot tell whether pids are alive, so it reports all of them.
func waitGone(pids []int, _ time.Duration) []int { return pids }
