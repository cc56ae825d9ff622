//go:build linux

package testserver

import (
	"io/fs"
	"syscall"
)

// ownerAndAtime reads what fs.FileInfo does not carry.
func ownerAndAtime(fi fs.FileInfo) (uid, gid, atime uint32) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid, st.Gid, uint32(st.Atim.Sec)
	}
	return 0, 0, uint32(fi.ModTime().Unix())
}
