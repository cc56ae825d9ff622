package testserver

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzRequests feeds arbitrary bytes after a valid INIT: the server must
// neither panic nor hang, and must shut down cleanly afterwards.
func FuzzRequests(f *testing.F) {
	f.Add(statPkt(1, "/"))
	f.Add(newPkt(TypeOpen, 1).str("/f").u32(OpenWrite | OpenCreat).u32(AttrPermissions | AttrExtended).u32(0o644).u32(1).str("a").str("b").bytes())
	f.Add(append(newPkt(TypeOpen, 1).str("/f").u32(OpenRead|OpenWrite|OpenCreat).u32(0).bytes(),
		newPkt(TypeWrite, 2).str("h1").u64(3).str("data").bytes()...))
	f.Add(newPkt(TypeSetstat, 1).str("/").u32(0xffffffff).bytes())
	f.Add(newPkt(TypeExtended, 1).str(extPosixRename).str("/a").bytes())
	f.Add(newPkt(TypeSymlink, 1).str("../../..").str("/l").bytes())
	f.Add([]byte{0, 0, 0, 5, TypeReaddir, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New(Options{Window: 1 << 16, MaxFileSize: 1 << 20, Reorder: 3})
		require.NoError(t, s.WriteFile("/f", []byte("contents"), 0o644))
		r, w := s.Conn()
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, r)
			close(done)
		}()
		_, _ = w.Write(newInit(3).bytes())
		_, _ = w.Write(data)
		_ = w.Close()
		<-done
		require.NoError(t, s.Close())
		require.Zero(t, s.OpenHandles())
	})
}
