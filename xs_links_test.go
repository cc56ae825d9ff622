//go:build linux

package sftp

import (
	"errors"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/stretchr/testify/require"
)

// The cross-server scenarios (see xs_test.go) of links, renames, opening for writing
// and tree transfers.

// Links, renames and file system information.

func xsLinkScenarios() []xsScenario {
	type renamed struct {
		err  error
		sent []sshfx.PacketType
		a, b []byte // what the names hold afterwards; nil when missing
	}
	twoFiles := xsFiles(map[string]string{"a": "new", "b": "old"})
	rename := func(e *xsEnv) renamed {
		e.tap.reset()
		r := renamed{err: e.c.Rename(e.ctx, "a", "b"), sent: e.tap.requests()}
		r.a, _ = os.ReadFile(e.local("a"))
		r.b, _ = os.ReadFile(e.local("b"))
		return r
	}
	replaced := func(via sshfx.PacketType) xsOutcome[renamed] {
		return func(e *xsEnv, r renamed) {
			require.Equal(e, []sshfx.PacketType{via}, r.sent)
			require.NoError(e, r.err)
			require.Nil(e, r.a)
			require.Equal(e, []byte("new"), r.b)
		}
	}
	unsupported := func(e *xsEnv, err error) {
		require.ErrorIs(e, err, errors.ErrUnsupported)
		requireStatus(e, err, StatusOpUnsupported)
	}
	type linked struct{ err, errMissing error }
	// noExtension: the client refuses on its own, sending nothing.
	noExtension := func(e *xsEnv, err error) {
		require.ErrorIs(e, err, errors.ErrUnsupported)
		var se *StatusError
		require.False(e, errors.As(err, &se), "no request was sent: %v", err)
	}
	// rejectedPlain: plain RENAME onto an existing name fails with code, nothing moved.
	noSymlink := func(e *xsEnv, err error) {
		unsupported(e, err)
		requireLinkErr(e, err, "symlink", "f", "l")
		_, lerr := os.Lstat(e.local("l"))
		require.ErrorIs(e, lerr, fs.ErrNotExist)
	}
	noReadlink := func(e *xsEnv, r xsRes[string]) {
		unsupported(e, r.err)
		requirePathErr(e, r.err, "readlink", "l")
	}
	noLinkExt := func(e *xsEnv, l linked) {
		noExtension(e, l.err)
		noExtension(e, l.errMissing)
		require.NoFileExists(e, e.local("h"))
	}
	renameRefused := func(via sshfx.PacketType) xsOutcome[renamed] {
		return func(e *xsEnv, r renamed) {
			require.Equal(e, []sshfx.PacketType{via}, r.sent)
			unsupported(e, r.err)
			require.Equal(e, []byte("new"), r.a)
			require.Equal(e, []byte("old"), r.b)
		}
	}
	rejectedPlain := func(code StatusCode) xsOutcome[renamed] {
		return func(e *xsEnv, r renamed) {
			require.Equal(e, []sshfx.PacketType{sshfx.TypeRename}, r.sent)
			requireLinkErr(e, r.err, "rename", "a", "b")
			requireStatus(e, r.err, code)
			require.Equal(e, []byte("new"), r.a)
			require.Equal(e, []byte("old"), r.b)
		}
	}

	return []xsScenario{
		// All but paramiko offer posix-rename@openssh.com, which replaces the
		// target; paramiko's plain RENAME (os.rename in the backend) does too.
		xsCase("rename/onto-existing", twoFiles, rename, xsExpect[renamed]{
			xsOnDisk: replaced(sshfx.TypeExtended), xsOnVFS: replaced(sshfx.TypeExtended),
			xsParamiko: replaced(sshfx.TypeRename),
			// Without posix-rename, Rename sends a plain RENAME.
			xsHetzner: rejectedPlain(11),
			xsMinIO:   renameRefused(sshfx.TypeExtended),
		}.with(rejectedPlain(StatusFailure), xsSterling, xsFilesCom, xsAzure).
			with(replaced(sshfx.TypeRename), xsAWS, xsSFTPGo)),

		// Plain RENAME, as to a server without posix-rename: the servers part ways.
		xsCase("rename/plain-onto-existing", twoFiles, func(e *xsEnv) renamed {
			delete(e.c.exts, extPosixRename)
			return rename(e)
		}, xsExpect[renamed]{
			xsOnDisk: rejectedPlain(StatusFailure),
			// FILE_ALREADY_EXISTS, a code of version 5, in a version 3 session.
			xsProFTPD:  rejectedPlain(11),
			xsHetzner:  rejectedPlain(11),
			xsAzure:    rejectedPlain(StatusFailure),
			xsMinIO:    renameRefused(sshfx.TypeRename),
			xsOnVFS:    replaced(sshfx.TypeRename),
			xsParamiko: replaced(sshfx.TypeRename),
		}.with(replaced(sshfx.TypeRename), xsAWS, xsSFTPGo)),

		xsCase("symlink", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) error {
			return e.c.Symlink(e.ctx, "f", "l")
		}, xsExpect[error]{
			xsOnDisk: func(e *xsEnv, err error) {
				require.NoError(e, err)
				target, err := os.Readlink(e.local("l"))
				require.NoError(e, err)
				require.Equal(e, "f", target)
			},
			xsOnVFS: noSymlink,
		}.with(noSymlink, xsFilesCom, xsAWS, xsAzure, xsSFTPGo, xsMinIO)),

		xsCase("readlink", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("somewhere", filepath.Join(dir, "l")))
		}, func(e *xsEnv) xsRes[string] { return xsR(e.c.Readlink(e.ctx, "l")) }, xsExpect[xsRes[string]]{
			xsOnDisk: func(e *xsEnv, r xsRes[string]) {
				require.NoError(e, r.err)
				require.Equal(e, "somewhere", r.v)
			},
			xsOnVFS:    noReadlink,
			xsFilesCom: noReadlink, xsAWS: noReadlink, xsAzure: noReadlink, xsSFTPGo: noReadlink, xsMinIO: noReadlink,
			// Chrooted, it makes a relative target absolute, from its "/".
			xsProFTPD: func(e *xsEnv, r xsRes[string]) {
				require.NoError(e, r.err)
				require.Equal(e, "/somewhere", r.v)
			},
			// Chrooted, it cannot map a relative target back, and says the link
			// does not exist.
			xsAsyncSSH: func(e *xsEnv, r xsRes[string]) {
				require.ErrorIs(e, r.err, fs.ErrNotExist)
				requirePathErr(e, r.err, "readlink", "l")
			},
		}),

		xsCase("link", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) linked {
			return linked{e.c.Link(e.ctx, "f", "h"), e.c.Link(e.ctx, "missing", "h2")}
		}, xsExpect[linked]{
			xsOnDisk: func(e *xsEnv, l linked) {
				require.NoError(e, l.err)
				fa, err := os.Stat(e.local("f"))
				require.NoError(e, err)
				fh, err := os.Stat(e.local("h"))
				require.NoError(e, err)
				require.True(e, os.SameFile(fa, fh))
				require.ErrorIs(e, l.errMissing, fs.ErrNotExist)
			},
			xsOnVFS: func(e *xsEnv, l linked) {
				// OK, and nothing done, even with no source: the client cannot tell.
				require.NoError(e, l.err)
				require.NoError(e, l.errMissing)
				require.NoFileExists(e, e.local("h"))
				require.NoFileExists(e, e.local("h2"))
				_, err := e.c.Stat(e.ctx, "h")
				require.ErrorIs(e, err, fs.ErrNotExist)
			},
			xsParamiko: noLinkExt,
			// Advertised, refused.
			xsMinIO: func(e *xsEnv, l linked) {
				unsupported(e, l.err)
				unsupported(e, l.errMissing)
				require.NoFileExists(e, e.local("h"))
			},
		}.with(noLinkExt, xsHetzner, xsSterling, xsFilesCom, xsAWS, xsAzure, xsSFTPGo)),

		xsCase("statvfs", nil, func(e *xsEnv) xsRes[*StatVFS] {
			return xsR(e.c.StatVFS(e.ctx, "."))
		}, xsExpect[xsRes[*StatVFS]]{
			xsOnDisk: func(e *xsEnv, r xsRes[*StatVFS]) {
				require.NoError(e, r.err)
				var st syscall.Statfs_t
				require.NoError(e, syscall.Statfs(e.dir, &st))
				require.Equal(e, st.Blocks, r.v.Blocks)
				require.Equal(e, uint64(st.Namelen), r.v.NameMax)
			},
			xsOnVFS: func(e *xsEnv, r xsRes[*StatVFS]) {
				// Advertised, yet refused.
				unsupported(e, r.err)
				requirePathErr(e, r.err, "statvfs", ".")
			},
			xsParamiko: func(e *xsEnv, r xsRes[*StatVFS]) { noExtension(e, r.err) },
			// Served from a directory, a personality reports the in-memory tree's
			// made-up figures.
			xsWindows: xsMadeUpStatVFS, xsSFTPGo: xsMadeUpStatVFS, xsDrop: xsMadeUpStatVFS,
			xsMinIO: func(e *xsEnv, r xsRes[*StatVFS]) {
				unsupported(e, r.err)
				requirePathErr(e, r.err, "statvfs", ".")
			},
		}.with(func(e *xsEnv, r xsRes[*StatVFS]) { noExtension(e, r.err) }, xsHetzner, xsSterling, xsFilesCom, xsAWS, xsAzure)),
	}
}

// Opening for writing. Without its cache, rclone truncates a file whenever it is
// opened for writing and cannot seek while writing.

func xsOpenScenarios() []xsScenario {
	type written struct {
		open, write, close error
		content            []byte
	}
	rewrite := func(flag int, write func(f *File) error) func(e *xsEnv) written {
		return func(e *xsEnv) written {
			f, err := e.c.OpenFile(e.ctx, "f", flag, 0o644)
			w := written{open: err}
			if err == nil {
				within(e, func() { w.write = write(f) })
				w.close = f.Close()
			}
			w.content = readLocal(e, e.local("f"))
			return w
		}
	}
	holds := func(want string) xsOutcome[written] {
		return func(e *xsEnv, w written) {
			require.NoError(e, w.open)
			require.NoError(e, w.write)
			require.NoError(e, w.close)
			require.Equal(e, want, string(w.content))
		}
	}
	readRefused := func(code StatusCode) xsOutcome[readWrite] {
		return func(e *xsEnv, rw readWrite) {
			require.NoError(e, rw.write)
			requireStatus(e, rw.read, code)
			require.NoError(e, errors.Join(rw.stat, rw.close))
			require.Equal(e, "hello world", rw.content)
		}
	}
	refusedOpen := func(want string) xsOutcome[written] {
		return func(e *xsEnv, w written) {
			require.ErrorIs(e, w.open, errors.ErrUnsupported)
			require.Equal(e, want, string(w.content))
		}
	}
	digits := xsFiles(map[string]string{"f": "0123456789"})
	data := xsData(100)
	type outOfOrder struct {
		second, first, close error
		content              []byte
	}

	return []xsScenario{
		xsCase("open/overwrite-in-place", digits, rewrite(os.O_WRONLY, func(f *File) error {
			_, err := f.WriteAt([]byte("XY"), 0)
			return err
		}), xsExpect[written]{xsOnDisk: holds("XY23456789"), xsOnVFS: holds("XY"), xsMinIO: holds("XY"),
			// No resume: an existing file opened for writing without TRUNC.
			xsSFTPGo: refusedOpen("0123456789")}),

		xsCase("open/append", digits, rewrite(os.O_WRONLY|os.O_APPEND, func(f *File) error {
			_, err := f.Write([]byte("++"))
			return err
		}), xsExpect[written]{xsOnDisk: holds("0123456789++"), xsOnVFS: holds("++"), xsMinIO: holds("++")}.
			with(refusedOpen("0123456789"), xsAzure, xsSFTPGo)),

		xsCase("open/exclusive-existing", digits, rewrite(os.O_WRONLY|os.O_CREATE|os.O_EXCL, func(*File) error {
			return nil
		}), xsExpect[written]{
			xsOnDisk: func(e *xsEnv, w written) {
				requireStatus(e, w.open, StatusFailure)
				require.ErrorIs(e, w.open, fs.ErrExist, "the FAILURE is explained by an LSTAT")
				require.Equal(e, "0123456789", string(w.content))
			},
			xsOnVFS: holds(""), // O_EXCL is not honoured
			// Not a refusal: the name is taken, as on OpenSSH.
			xsDrop: func(e *xsEnv, w written) {
				requireStatus(e, w.open, StatusFailure)
				require.Equal(e, "0123456789", string(w.content))
			},
			// Refused as a resume before the name is looked at.
			xsSFTPGo: refusedOpen("0123456789"),
		}),

		// The second half first: rclone waits (--vfs-write-wait, 1 s) for the bytes
		// before it, then refuses the seek; the first half still lands.
		xsCase("upload/WriteAt-backwards", nil, func(e *xsEnv) outOfOrder {
			f, err := e.c.Create(e.ctx, "w")
			require.NoError(e, err)
			var o outOfOrder
			within(e, func() {
				_, o.second = f.WriteAt(data[50:], 50)
				_, o.first = f.WriteAt(data[:50], 0)
			})
			o.close = f.Close()
			o.content = readLocal(e, e.local("w"))
			return o
		}, xsExpect[outOfOrder]{
			xsOnDisk: func(e *xsEnv, o outOfOrder) {
				require.NoError(e, errors.Join(o.second, o.first, o.close))
				require.Equal(e, data, o.content)
			},
			xsOnVFS: func(e *xsEnv, o outOfOrder) {
				requireStatus(e, o.second, StatusFailure)
				require.NoError(e, o.first)
				require.NoError(e, o.close)
				require.Equal(e, data[:50], o.content)
			},
			// With its cache, rclone sometimes takes the write at 50 and sometimes
			// refuses it as without: it depends on how far its cache has got.
			// Either way the bytes it took land whole.
			xsRcloneWrites: func(e *xsEnv, o outOfOrder) {
				require.NoError(e, o.first)
				require.NoError(e, o.close)
				if o.second == nil {
					require.Equal(e, data, o.content)
					return
				}
				requireStatus(e, o.second, StatusFailure)
				require.Equal(e, data[:50], o.content)
			},
		}),

		// Read back what was just written through the same handle. rclone with
		// --vfs-cache-mode writes answers that READ with STATUS OK (code 0), which
		// fits no READ: the read fails, and only the read. And the READ costs the
		// bytes it covered: rclone fills them from the (empty) file it is
		// replacing, so the file ends with zeros there.
		//
		// rclone-writes needs the STATUS rule of issue 9 section 1 (a STATUS that does
		// not fit its request fails that request only, not the channel): until that
		// is merged, this scenario fails there with a closed Client.
		xsCase("open/read-write", nil, func(e *xsEnv) readWrite {
			var rw readWrite
			f, err := e.c.OpenFile(e.ctx, "rw", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if rw.open = err; err != nil {
				return rw
			}
			within(e, func() {
				_, rw.write = f.Write([]byte("hello world"))
				p := make([]byte, 5)
				var n int
				n, rw.read = f.ReadAt(p, 6)
				rw.got = string(p[:n])
			})
			_, rw.stat = e.c.Stat(e.ctx, "rw")
			rw.close = f.Close()
			content, err := os.ReadFile(e.local("rw"))
			rw.content = string(content)
			require.NoError(e, err, "the local file, after write %v, read %v, stat %v, close %v", rw.write, rw.read, rw.stat, rw.close)
			return rw
		}, xsExpect[readWrite]{
			// The OPEN is refused.
			xsAWS: openRefused, xsAzure: openRefused,
			// The OPEN succeeds, its READs are refused.
			xsSFTPGo: readRefused(StatusOpUnsupported), xsMinIO: readRefused(StatusFailure),
			xsOnDisk: func(e *xsEnv, rw readWrite) {
				require.NoError(e, errors.Join(rw.write, rw.read, rw.stat, rw.close))
				require.Equal(e, "world", rw.got)
				require.Equal(e, "hello world", rw.content)
			},
			// Without its cache rclone writes a file front to back only: it waits
			// (--vfs-write-wait) for the READ's seek, then refuses it.
			xsRclone: func(e *xsEnv, rw readWrite) {
				require.NoError(e, rw.write)
				requireStatus(e, rw.read, StatusFailure)
				require.Empty(e, rw.got)
				require.NoError(e, errors.Join(rw.stat, rw.close))
				require.Equal(e, "hello world", rw.content)
			},
			xsRcloneWrites: func(e *xsEnv, rw readWrite) {
				require.NoError(e, rw.write)
				requireStatus(e, rw.read, StatusOK)
				require.NotErrorIs(e, rw.read, net.ErrClosed, "the channel carries on")
				require.Empty(e, rw.got)
				require.NoError(e, rw.stat, "later calls work")
				require.NoError(e, rw.close)
				require.Equal(e, "hello \x00\x00\x00\x00\x00", rw.content, "rclone zeroed what the READ covered")
			},
		}),
	}
}

// readWrite is what a write and a read back on one handle did.
type readWrite struct {
	open, write, read, stat, close error
	got, content                   string
}

// Trees.

// xsMakeTree makes files of several sizes in nested directories and an empty
// directory under root; with a link, also a symbolic link.
func xsMakeTree(t *testing.T, root string, link bool) {
	for name, n := range map[string]int{"a.txt": 0, "b.bin": 70000, "sub/c.txt": 5, "sub/deeper/d.bin": 300001} {
		gpWrite(t, filepath.Join(root, filepath.FromSlash(name)), xsData(n))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "empty"), 0o755))
	if link {
		require.NoError(t, os.Symlink("sub/c.txt", filepath.Join(root, "link")))
	}
}

func xsTreeScenarios() []xsScenario {
	// Listings (see listTree) of the source and of the copies; nil where none was made.
	type copied struct {
		put, get      error
		src, up, back map[string]string
	}
	list := func(e *xsEnv, root string, err error) map[string]string {
		if err != nil {
			return nil
		}
		return listTree(e.T, root)
	}
	// put copies a local tree to "up", get copies "up" or "tree" back: what each
	// scenario does of it.
	put := func(e *xsEnv, link bool) copied {
		src := filepath.Join(e.TempDir(), "src")
		xsMakeTree(e.T, src, link)
		err := e.c.Put(e.ctx, src, "up", Recursive())
		return copied{put: err, src: listTree(e.T, src), up: list(e, e.local("up"), err)}
	}
	get := func(e *xsEnv, c copied, from string) copied {
		back := filepath.Join(e.TempDir(), "back")
		c.get = e.c.Get(e.ctx, from, back, Recursive())
		c.back = list(e, back, c.get)
		return c
	}
	noReadlinkGet := func(e *xsEnv, c copied) {
		require.ErrorIs(e, c.get, errors.ErrUnsupported)
		require.ErrorContains(e, c.get, "readlink tree/link")
	}
	noSymlinkPut := func(e *xsEnv, c copied) {
		require.ErrorIs(e, c.put, errors.ErrUnsupported)
		_, err := os.Lstat(e.local("up/link"))
		require.ErrorIs(e, err, fs.ErrNotExist)
	}
	withoutLink := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		delete(m, "link")
		return m
	}

	return []xsScenario{
		xsCase("tree/put-get", nil, func(e *xsEnv) copied {
			return get(e, put(e, false), "up")
		}, xsAll(func(e *xsEnv, c copied) {
			require.NoError(e, c.put)
			require.NoError(e, c.get)
			require.Len(e, c.src, 8)
			require.Equal(e, c.src, c.up)
			require.Equal(e, c.src, c.back)
		}).with(func(e *xsEnv, c copied) {
			// No RENAME: every file's part file fails to reach its name.
			require.ErrorIs(e, c.put, errors.ErrUnsupported)
			var te *TreeError
			require.ErrorAs(e, c.put, &te)
		}, xsMinIO)),

		xsCase("tree/get-with-symlink", func(t *testing.T, dir string) {
			xsMakeTree(t, filepath.Join(dir, "tree"), true)
		}, func(e *xsEnv) copied {
			return get(e, copied{src: listTree(e.T, e.local("tree"))}, "tree")
		}, xsExpect[copied]{
			xsOnDisk: func(e *xsEnv, c copied) {
				require.NoError(e, c.get)
				require.Equal(e, "link sub/c.txt", c.back["link"])
				require.Equal(e, c.src, c.back)
			},
			xsOnVFS: func(e *xsEnv, c copied) {
				require.NoError(e, c.get)
				require.Equal(e, withoutLink(c.src), c.back, "the link is hidden")
			},
			// READLINK makes the target absolute (see "readlink"), and the copy
			// keeps what the server said.
			xsProFTPD: func(e *xsEnv, c copied) {
				require.NoError(e, c.get)
				require.Equal(e, "link /tree/sub/c.txt", c.back["link"])
				require.Equal(e, withoutLink(c.src), withoutLink(c.back))
			},
			// READLINK is refused (see "readlink"), and so the link fails.
			xsFilesCom: noReadlinkGet, xsAWS: noReadlinkGet, xsAzure: noReadlinkGet, xsSFTPGo: noReadlinkGet, xsMinIO: noReadlinkGet,
			// READLINK fails (see "readlink"), and so does the tree copy.
			xsAsyncSSH: func(e *xsEnv, c copied) {
				require.ErrorIs(e, c.get, fs.ErrNotExist)
				require.ErrorContains(e, c.get, "readlink tree/link")
			},
		}),

		xsCase("tree/put-with-symlink", nil, func(e *xsEnv) copied { return put(e, true) }, xsExpect[copied]{
			xsOnDisk: func(e *xsEnv, c copied) {
				require.NoError(e, c.put)
				require.Equal(e, c.src, c.up)
			},
			xsOnVFS: noSymlinkPut,
		}.with(noSymlinkPut, xsFilesCom, xsAWS, xsAzure, xsSFTPGo, xsMinIO)),
	}
}
