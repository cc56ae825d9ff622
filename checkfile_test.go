package sftp

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io/fs"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/sluicehq/sftp/internal/testserver"
)

// check-file against the in-process server, which does not know the extension: its
// Corrupt hook answers the first check-file-name request as each test says, so the
// client meets replies no honest server sends. What real servers do is in
// xs_hash_test.go (ProFTPD answers it; paramiko advertises its own request).

func TestAppendCheckFileNameGolden(t *testing.T) {
	got := appendCheckFileName(nil, 7, "a/b", SHA256, 5, -1)
	want := []byte{
		0, 0, 0, 61, 200, 0, 0, 0, 7,
		0, 0, 0, 15, 'c', 'h', 'e', 'c', 'k', '-', 'f', 'i', 'l', 'e', '-', 'n', 'a', 'm', 'e',
		0, 0, 0, 3, 'a', '/', 'b',
		0, 0, 0, 6, 's', 'h', 'a', '2', '5', '6',
		0, 0, 0, 0, 0, 0, 0, 5, // offset
		0, 0, 0, 0, 0, 0, 0, 0, // length 0: to the end
		0, 0, 0, 0, // block size 0: one digest
	}
	require.Equal(t, want, got)
	got = appendCheckFileName(nil, 7, "a/b", SHA256, 5, 9)
	require.Equal(t, byte(9), got[len(got)-5])
}

// extendedReply is a raw EXTENDED_REPLY to request id with body.
func extendedReply(id uint32, body []byte) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
	p = append(p, byte(sshfx.TypeExtendedReply))
	p = binary.BigEndian.AppendUint32(p, id)
	return append(p, body...)
}

func sftpString(s string) []byte { return sshfx.AppendString(nil, s) }

// answerCheckFile makes the first check-file-name request's reply the packet reply
// builds for its id; later ones keep the server's OP_UNSUPPORTED.
func answerCheckFile(reply func(id uint32) []byte) func(testserver.Request, []byte) [][]byte {
	var used atomic.Bool
	return func(req testserver.Request, _ []byte) [][]byte {
		if req.Type != testserver.TypeExtended || req.ExtName != extCheckFileName || !used.CompareAndSwap(false, true) {
			return nil
		}
		return [][]byte{reply(req.ID)}
	}
}

func TestCheckFileReplies(t *testing.T) {
	data := []byte("the file's bytes")
	d := sha256.Sum256(data)
	digest := func(alg string, sum []byte) func(uint32) []byte {
		return func(id uint32) []byte { return extendedReply(id, append(sftpString(alg), sum...)) }
	}
	for _, tc := range []struct {
		name     string
		reply    func(id uint32) []byte
		sum      []byte
		err      string
		closes   bool // the reply cannot be read: the channel fails
		notExist bool
	}{
		{name: "ProFTPD's form", reply: digest("sha256", d[:]), sum: d[:]},
		{name: "the draft's form", reply: func(id uint32) []byte {
			return extendedReply(id, append(append(sftpString("check-file"), sftpString("sha256")...), d[:]...))
		}, sum: d[:]},
		{name: "a wrong digest is the server's word", reply: digest("sha256", make([]byte, 32)), sum: make([]byte, 32)},
		{name: "another algorithm", reply: digest("md5", d[:16]), err: `asked for sha256, the server answered with "md5"`},
		{name: "short digest", reply: digest("sha256", d[:31]), err: "has 31 bytes, not 32"},
		{name: "long digest", reply: digest("sha256", make([]byte, 200<<10)), err: "has 204800 bytes, not 32"},
		{name: "no algorithm", reply: func(id uint32) []byte { return extendedReply(id, []byte{0, 0, 0, 9, 's'}) }, closes: true},
		{name: "oversize", reply: func(id uint32) []byte {
			p := extendedReply(id, d[:])
			binary.BigEndian.PutUint32(p, 0x7fffffff)
			return p
		}, closes: true},
		{name: "no such file", reply: func(id uint32) []byte {
			return sshfx.Finish(append(sshfx.AppendUint32(sshfx.Begin(nil, sshfx.TypeStatus, id), 2), 0, 0, 0, 0, 0, 0, 0, 0), 0)
		}, notExist: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, srv := newTestServerClient(t, testserver.Options{Corrupt: answerCheckFile(tc.reply)})
			require.NoError(t, srv.WriteFile("f", data, 0o644))
			sum, by, err := c.remoteSum(testCtx(t), "f", SHA256, 0, -1)
			switch {
			case tc.closes:
				requireClosedConn(t, err)
				return
			case tc.notExist:
				require.ErrorIs(t, err, fs.ErrNotExist)
			case tc.err != "":
				require.ErrorContains(t, err, tc.err)
			default:
				require.NoError(t, err)
				require.Equal(t, tc.sum, sum)
				require.Equal(t, hashByCheckFile, by)
				require.Zero(t, srv.Requests(testserver.TypeRead), "a hash by check-file reads nothing")
			}
			requireWorks(t, c)
		})
	}
}

// TestCheckFileLearned: a server that answers OP_UNSUPPORTED is asked once more, for a
// name that cannot exist, to tell "no such extension" (OpenSSH) from "no such
// request" (ProFTPD refusing an empty file): the first is never asked again, the
// second is, and meanwhile the file is read.
func TestCheckFileLearned(t *testing.T) {
	data := randBytes(100<<10, 4)
	d := sha256.Sum256(data)
	t.Run("no extension", func(t *testing.T) {
		c, srv := newTestServerClient(t, testserver.Options{})
		require.NoError(t, srv.WriteFile("f", data, 0o644))
		before := srv.Requests(testserver.TypeExtended)
		for range 3 {
			sum, by, err := c.remoteSum(testCtx(t), "f", SHA256, 0, -1)
			require.NoError(t, err)
			require.Equal(t, d[:], sum)
			require.Equal(t, hashByReading, by)
		}
		require.Equal(t, 2, srv.Requests(testserver.TypeExtended)-before, "the request and the probe, once")
		require.Equal(t, refused, learned(c.hashes.checkFile.Load()))
	})
	t.Run("a request refused", func(t *testing.T) {
		var n atomic.Int32
		answer := func(req testserver.Request, _ []byte) [][]byte {
			if req.Type != testserver.TypeExtended || req.ExtName != extCheckFileName {
				return nil
			}
			switch n.Add(1) {
			case 1: // the file: refused, as ProFTPD refuses an empty one
				return nil
			case 2: // the probe: the server looked the name up
				return [][]byte{sshfx.Finish(append(sshfx.AppendUint32(sshfx.Begin(nil, sshfx.TypeStatus, req.ID), 2), 0, 0, 0, 0, 0, 0, 0, 0), 0)}
			}
			return [][]byte{extendedReply(req.ID, append(sftpString("sha256"), d[:]...))}
		}
		c, srv := newTestServerClient(t, testserver.Options{Corrupt: answer})
		require.NoError(t, srv.WriteFile("f", data, 0o644))
		_, by, err := c.remoteSum(testCtx(t), "f", SHA256, 0, -1)
		require.NoError(t, err)
		require.Equal(t, hashByReading, by)
		require.Equal(t, offered, learned(c.hashes.checkFile.Load()))
		sum, by, err := c.remoteSum(testCtx(t), "f", SHA256, 0, -1)
		require.NoError(t, err)
		require.Equal(t, hashByCheckFile, by)
		require.Equal(t, d[:], sum)
	})
}

// TestCheckFileCtx: a server that takes its time hashing holds the Hash only while ctx
// lasts; the late reply is dropped and the channel goes on.
func TestCheckFileCtx(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: stallFirst(func(r testserver.Request) bool {
		return r.Type == testserver.TypeExtended && r.ExtName == extCheckFileName
	})})
	require.NoError(t, srv.WriteFile("f", []byte("x"), 0o644))
	ctx, cancel := context.WithCancel(testCtx(t))
	res := tsGo(func() error { _, err := c.Hash(ctx, "f", SHA256); return err })
	tsWaitStalled(t, srv, 1)
	cancel()
	err := tsRecv(t, res, "Hash to return")
	require.ErrorIs(t, err, context.Canceled)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "hash", pe.Op)
	srv.ReleaseStalled()
	requireWorks(t, c)
}

func TestDecodeCheckFileTruncated(t *testing.T) {
	d := sha256.Sum256(nil)
	body := append(sftpString("sha256"), d[:]...)
	for i := range len(body) {
		r := response{typ: sshfx.TypeExtendedReply, body: body[:i]}
		_, err := decodeCheckFile(&r, SHA256)
		require.Error(t, err, "cut at %d", i)
	}
	r := response{typ: sshfx.TypeExtendedReply, body: body}
	sum, err := decodeCheckFile(&r, SHA256)
	require.NoError(t, err)
	require.Equal(t, d[:], sum)
}
