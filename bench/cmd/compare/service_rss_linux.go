package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// peakRSS is this process's high-water resident set (VmHWM), in bytes. It belongs to
// the process's own address space, so unlike wait4's ru_maxrss it does not inherit
// the harness's peak at exec; 0 if /proc cannot tell.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}
