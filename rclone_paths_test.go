package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/stretchr/testify/require"
)

// The cross-server scenarios (see rclone_test.go) of path operations, links, opening
// for writing and tree transfers.

// Path operations.

type xsRes[T any] struct {
	v   T
	err error
}

func xsR[T any](v T, err error) xsRes[T] { return xsRes[T]{v, err} }

var (
	xsMTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	xsATime = time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)
)

// xsVFSMode is the mode rclone's VFS reports for every file (dirs: 0777 less umask).
func xsVFSMode(dir bool) fs.FileMode {
	if dir {
		return fs.ModeDir | 0o777&^umask()
	}
	return 0o666 &^ umask()
}

func xsLocalMode(e *xsEnv, name string) fs.FileMode {
	fi, err := os.Lstat(e.local(name))
	require.NoError(e, err)
	return fi.Mode()
}

func xsFiles(files map[string]string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		for name, content := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			writeLocal(t, p, []byte(content), 0o644)
		}
	}
}

func xsPathScenarios() []xsScenario {
	type stats map[string]xsRes[fs.FileInfo]
	statCommon := func(e *xsEnv, got stats) *FileAttrs {
		f := got["stat f"]
		require.NoError(e, f.err)
		require.Equal(e, "f", f.v.Name())
		require.Equal(e, int64(5), f.v.Size())
		require.True(e, xsMTime.Equal(f.v.ModTime()), "ModTime %v", f.v.ModTime())
		require.NoError(e, got["stat d"].err)
		require.True(e, got["stat d"].v.IsDir())
		return f.v.Sys().(*FileAttrs)
	}
	type listing struct {
		names []string
		types map[string]fs.FileMode
		err   error
	}
	many := make([]string, 150) // more than one READDIR reply on OpenSSH (100 a batch)
	for i := range many {
		many[i] = fmt.Sprintf("f%03d", i)
	}
	type mkdirs struct {
		first, again error
		mode         fs.FileMode
	}
	type setattr struct {
		err  error
		stat xsRes[fs.FileInfo]
	}

	return []xsScenario{
		xsCase("stat", func(t *testing.T, dir string) {
			writeLocal(t, filepath.Join(dir, "f"), []byte("hello"), 0o640)
			require.NoError(t, os.Chtimes(filepath.Join(dir, "f"), xsATime, xsMTime))
			require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o750))
			require.NoError(t, os.Chmod(filepath.Join(dir, "d"), 0o750))
			require.NoError(t, os.Symlink("f", filepath.Join(dir, "l")))
		}, func(e *xsEnv) stats {
			return stats{
				"stat f": xsR(e.c.Stat(e.ctx, "f")), "stat d": xsR(e.c.Stat(e.ctx, "d")),
				"lstat l": xsR(e.c.Lstat(e.ctx, "l")), "stat l": xsR(e.c.Stat(e.ctx, "l")),
			}
		}, xsExpect[stats]{
			openssh: func(e *xsEnv, got stats) {
				fa := statCommon(e, got)
				st := localStat(e, e.local("f"))
				require.Equal(e, uint32(0xf), fa.Flags, "size, uid/gid, permissions, times")
				require.Equal(e, st.Uid, fa.UID)
				require.Equal(e, st.Gid, fa.GID)
				require.Equal(e, uint32(0o100640), fa.Permissions)
				require.Equal(e, fs.FileMode(0o640), got["stat f"].v.Mode())
				require.True(e, xsATime.Equal(fa.ATime), "ATime %v", fa.ATime)
				require.Equal(e, fs.ModeDir|0o750, got["stat d"].v.Mode())
				require.Equal(e, localStat(e, e.local("d")).Size, got["stat d"].v.Size())
				require.NoError(e, got["lstat l"].err)
				require.Equal(e, fs.ModeSymlink, got["lstat l"].v.Mode().Type())
				require.NoError(e, got["stat l"].err)
				require.True(e, got["stat l"].v.Mode().IsRegular())
			},
			rclone: func(e *xsEnv, got stats) {
				fa := statCommon(e, got)
				require.Equal(e, uint32(0xd), fa.Flags, "no uid/gid")
				require.Zero(e, fa.UID)
				require.Zero(e, fa.GID)
				// The type bits are there, the permissions are the VFS's, not the file's.
				require.Equal(e, uint32(0o100000)|uint32(xsVFSMode(false)), fa.Permissions)
				require.Equal(e, xsVFSMode(false), got["stat f"].v.Mode())
				require.True(e, xsMTime.Equal(fa.ATime), "no atime: ATime %v is the mtime", fa.ATime)
				require.Equal(e, xsVFSMode(true), got["stat d"].v.Mode())
				require.Zero(e, got["stat d"].v.Size())
				// Links are hidden, not followed.
				require.ErrorIs(e, got["lstat l"].err, fs.ErrNotExist)
				require.ErrorIs(e, got["stat l"].err, fs.ErrNotExist)
			},
		}),

		xsCase("readdir", func(t *testing.T, dir string) {
			for _, n := range many {
				writeLocal(t, filepath.Join(dir, n), []byte(n), 0o644)
			}
			require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
			require.NoError(t, os.Symlink("f000", filepath.Join(dir, "l")))
		}, func(e *xsEnv) listing {
			es, err := e.c.ReadDir(e.ctx, ".")
			l := listing{err: err, types: map[string]fs.FileMode{}}
			for _, de := range es {
				l.names = append(l.names, de.Name())
				l.types[de.Name()] = de.Type()
			}
			return l
		}, xsExpect[listing]{
			openssh: func(e *xsEnv, l listing) {
				require.NoError(e, l.err)
				require.Equal(e, slices.Concat([]string{"d"}, many, []string{"l"}), l.names)
				require.Equal(e, fs.ModeDir, l.types["d"])
				require.Equal(e, fs.ModeSymlink, l.types["l"])
			},
			rclone: func(e *xsEnv, l listing) {
				require.NoError(e, l.err)
				require.Equal(e, slices.Concat([]string{"d"}, many), l.names, "the link is hidden")
				require.Equal(e, fs.ModeDir, l.types["d"])
			},
		}),

		xsCase("mkdir", nil, func(e *xsEnv) mkdirs {
			m := mkdirs{first: e.c.Mkdir(e.ctx, "new", 0o700)}
			m.mode = xsLocalMode(e, "new")
			m.again = e.c.Mkdir(e.ctx, "new", 0o700)
			return m
		}, xsExpect[mkdirs]{
			openssh: func(e *xsEnv, m mkdirs) {
				require.NoError(e, m.first)
				require.Equal(e, fs.ModeDir|0o700&^umask(), m.mode)
				requireStatus(e, m.again, StatusFailure)
			},
			rclone: func(e *xsEnv, m mkdirs) {
				require.NoError(e, m.first)
				require.Equal(e, xsVFSMode(true), m.mode, "the mode asked for is ignored")
				require.NoError(e, m.again, "an existing directory is not an error")
			},
		}),

		xsCase("mkdirall", xsFiles(map[string]string{"a/x": "x"}), func(e *xsEnv) [2]error {
			return [2]error{e.c.MkdirAll(e.ctx, "a/b/c", 0o755), e.c.MkdirAll(e.ctx, "a/b/c", 0o755)}
		}, xsBoth(func(e *xsEnv, errs [2]error) {
			require.NoError(e, errs[0])
			require.NoError(e, errs[1])
			require.DirExists(e, e.local("a/b/c"))
		})),

		xsCase("remove", func(t *testing.T, dir string) {
			xsFiles(map[string]string{"f": "f", "full/g": "g"})(t, dir)
			require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
		}, func(e *xsEnv) map[string]error {
			out := map[string]error{}
			for _, n := range []string{"f", "empty", "full", "missing"} {
				out[n] = e.c.Remove(e.ctx, n)
			}
			return out
		}, xsBoth(func(e *xsEnv, errs map[string]error) {
			require.NoError(e, errs["f"])
			require.NoError(e, errs["empty"])
			require.NoFileExists(e, e.local("f"))
			require.NoDirExists(e, e.local("empty"))
			requireStatus(e, errs["full"], StatusFailure)
			require.FileExists(e, e.local("full/g"))
			require.ErrorIs(e, errs["missing"], fs.ErrNotExist)
		})),

		xsCase("removeall", xsFiles(map[string]string{"t/a/b/f": "f", "t/g": "g"}), func(e *xsEnv) [2]error {
			return [2]error{e.c.RemoveAll(e.ctx, "t"), e.c.RemoveAll(e.ctx, "missing")}
		}, xsBoth(func(e *xsEnv, errs [2]error) {
			require.NoError(e, errs[0])
			require.NoError(e, errs[1])
			require.NoDirExists(e, e.local("t"))
		})),

		xsCase("removeall/with-symlink", func(t *testing.T, dir string) {
			xsFiles(map[string]string{"t/f": "f"})(t, dir)
			require.NoError(t, os.Symlink("f", filepath.Join(dir, "t", "l")))
		}, func(e *xsEnv) error { return e.c.RemoveAll(e.ctx, "t") }, xsExpect[error]{
			openssh: func(e *xsEnv, err error) {
				require.NoError(e, err)
				require.NoDirExists(e, e.local("t"))
			},
			rclone: func(e *xsEnv, err error) {
				// The link is invisible to rclone, so the directory never empties.
				requireStatus(e, err, StatusFailure)
				require.NoFileExists(e, e.local("t/f"))
				_, lerr := os.Lstat(e.local("t/l"))
				require.NoError(e, lerr)
			},
		}),

		xsCase("chmod", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) setattr {
			err := e.c.Chmod(e.ctx, "f", 0o600)
			return setattr{err, xsR(e.c.Stat(e.ctx, "f"))}
		}, xsExpect[setattr]{
			openssh: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				require.Equal(e, fs.FileMode(0o600), xsLocalMode(e, "f"))
				require.Equal(e, fs.FileMode(0o600), s.stat.v.Mode())
			},
			rclone: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err, "accepted...")
				require.Equal(e, fs.FileMode(0o644), xsLocalMode(e, "f"), "...and ignored")
				require.Equal(e, xsVFSMode(false), s.stat.v.Mode())
			},
		}),

		xsCase("chtimes", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) setattr {
			err := e.c.Chtimes(e.ctx, "f", xsATime, xsMTime)
			return setattr{err, xsR(e.c.Stat(e.ctx, "f"))}
		}, xsExpect[setattr]{
			openssh: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				st := localStat(e, e.local("f"))
				require.Equal(e, xsMTime.Unix(), st.Mtim.Sec)
				require.Equal(e, xsATime.Unix(), st.Atim.Sec)
				require.True(e, xsATime.Equal(s.stat.v.Sys().(*FileAttrs).ATime))
				require.True(e, xsMTime.Equal(s.stat.v.ModTime()))
			},
			rclone: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				st := localStat(e, e.local("f"))
				require.Equal(e, xsMTime.Unix(), st.Mtim.Sec)
				require.Equal(e, xsMTime.Unix(), st.Atim.Sec, "the atime asked for is dropped: both get the mtime")
				require.True(e, xsMTime.Equal(s.stat.v.Sys().(*FileAttrs).ATime))
				require.True(e, xsMTime.Equal(s.stat.v.ModTime()))
			},
		}),

		xsCase("truncate", xsFiles(map[string]string{"f": "0123456789"}), func(e *xsEnv) error {
			return e.c.Truncate(e.ctx, "f", 3)
		}, xsExpect[error]{
			openssh: func(e *xsEnv, err error) {
				require.NoError(e, err)
				require.Equal(e, []byte("012"), readLocal(e, e.local("f")))
			},
			rclone: func(e *xsEnv, err error) {
				require.NoError(e, err, "accepted...")
				require.Equal(e, []byte("0123456789"), readLocal(e, e.local("f")), "...and ignored")
			},
		}),

		xsCase("realpath", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) map[string]xsRes[string] {
			out := map[string]xsRes[string]{}
			for _, n := range []string{".", "f", "missing", "missing/x", "a/../b"} {
				out[n] = xsR(e.c.RealPath(e.ctx, n))
			}
			return out
		}, xsExpect[map[string]xsRes[string]]{
			openssh: func(e *xsEnv, got map[string]xsRes[string]) {
				for n, want := range map[string]string{".": e.dir, "f": e.local("f"), "missing": e.local("missing")} {
					require.NoError(e, got[n].err, n)
					require.Equal(e, want, got[n].v, n)
				}
				// Only the last component may be missing.
				require.ErrorIs(e, got["missing/x"].err, fs.ErrNotExist)
				require.ErrorIs(e, got["a/../b"].err, fs.ErrNotExist)
			},
			rclone: func(e *xsEnv, got map[string]xsRes[string]) {
				// Served from "/", resolved lexically: anything resolves.
				for n, want := range map[string]string{".": "/", "f": "/f", "missing": "/missing", "missing/x": "/missing/x", "a/../b": "/b"} {
					require.NoError(e, got[n].err, n)
					require.Equal(e, want, got[n].v, n)
				}
			},
		}),

		xsCase("extensions", nil, func(e *xsEnv) map[string]string { return e.c.Extensions() }, xsExpect[map[string]string]{
			openssh: func(e *xsEnv, exts map[string]string) {
				for name, v := range map[string]string{extPosixRename: "1", extHardlink: "1", extStatVFS: "2", extLimits: "1", extFsync: "1"} {
					require.Equal(e, v, exts[name], name)
				}
			},
			rclone: func(e *xsEnv, exts map[string]string) {
				require.Equal(e, map[string]string{extPosixRename: "1", extHardlink: "1", extStatVFS: "2"}, exts)
				require.Equal(e, Limits{MaxPacket: 34000, MaxRead: 32768, MaxWrite: 32768}, e.c.Limits())
			},
		}),

		xsCase("missing", nil, func(e *xsEnv) map[string]error {
			ctx, c := e.ctx, e.c
			_, errStat := c.Stat(ctx, "missing")
			_, errLstat := c.Lstat(ctx, "missing")
			_, errOpen := c.Open(ctx, "missing")
			_, errReadDir := c.ReadDir(ctx, "missing")
			_, errReadFile := c.ReadFile(ctx, "missing")
			return map[string]error{
				"stat": errStat, "lstat": errLstat, "open": errOpen, "readdir": errReadDir, "readfile": errReadFile,
				"remove": c.Remove(ctx, "missing"), "rename": c.Rename(ctx, "missing", "x"),
				"chmod": c.Chmod(ctx, "missing", 0o600), "chtimes": c.Chtimes(ctx, "missing", xsATime, xsMTime),
				"truncate": c.Truncate(ctx, "missing", 0), "removeall": c.RemoveAll(ctx, "missing"),
			}
		}, xsExpect[map[string]error]{
			openssh: func(e *xsEnv, errs map[string]error) { xsRequireMissing(e, errs, "No such file") },
			rclone: func(e *xsEnv, errs map[string]error) {
				// Only a SETSTAT that sets times looks for the file: size or
				// permissions alone are answered OK, missing file or not.
				require.NoError(e, errs["truncate"])
				require.NoError(e, errs["chmod"])
				require.NoFileExists(e, e.local("missing"))
				xsRequireMissing(e, errs, "file does not exist", "truncate", "chmod")
			},
		}),
	}
}

// xsRequireMissing: every operation on a missing name but those accepted fails with
// fs.ErrNotExist, the code mapped whatever the server's words (msg) for it.
func xsRequireMissing(e *xsEnv, errs map[string]error, msg string, accepted ...string) {
	require.NoError(e, errs["removeall"], "a missing name is not an error for RemoveAll")
	require.Len(e, errs, 11)
	for op, err := range errs {
		if op != "removeall" && !slices.Contains(accepted, op) {
			require.ErrorIs(e, err, fs.ErrNotExist, op)
		}
	}
	var se *StatusError
	require.ErrorAs(e, errs["stat"], &se)
	require.Equal(e, msg, se.Message)
}

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

	return []xsScenario{
		// Both offer posix-rename@openssh.com, which replaces the target.
		xsCase("rename/onto-existing", twoFiles, func(e *xsEnv) renamed {
			require.True(e, e.c.hasExt(extPosixRename))
			return rename(e)
		}, xsBoth(replaced(sshfx.TypeExtended))),

		// Plain RENAME, as to a server without posix-rename: the servers part ways.
		xsCase("rename/plain-onto-existing", twoFiles, func(e *xsEnv) renamed {
			delete(e.c.exts, extPosixRename)
			return rename(e)
		}, xsExpect[renamed]{
			openssh: func(e *xsEnv, r renamed) {
				require.Equal(e, []sshfx.PacketType{sshfx.TypeRename}, r.sent)
				requireLinkErr(e, r.err, "rename", "a", "b")
				requireStatus(e, r.err, StatusFailure)
				require.Equal(e, []byte("new"), r.a)
				require.Equal(e, []byte("old"), r.b)
			},
			rclone: replaced(sshfx.TypeRename),
		}),

		xsCase("symlink", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) error {
			return e.c.Symlink(e.ctx, "f", "l")
		}, xsExpect[error]{
			openssh: func(e *xsEnv, err error) {
				require.NoError(e, err)
				target, err := os.Readlink(e.local("l"))
				require.NoError(e, err)
				require.Equal(e, "f", target)
			},
			rclone: func(e *xsEnv, err error) {
				unsupported(e, err)
				requireLinkErr(e, err, "symlink", "f", "l")
				_, lerr := os.Lstat(e.local("l"))
				require.ErrorIs(e, lerr, fs.ErrNotExist)
			},
		}),

		xsCase("readlink", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("somewhere", filepath.Join(dir, "l")))
		}, func(e *xsEnv) xsRes[string] { return xsR(e.c.Readlink(e.ctx, "l")) }, xsExpect[xsRes[string]]{
			openssh: func(e *xsEnv, r xsRes[string]) {
				require.NoError(e, r.err)
				require.Equal(e, "somewhere", r.v)
			},
			rclone: func(e *xsEnv, r xsRes[string]) {
				unsupported(e, r.err)
				requirePathErr(e, r.err, "readlink", "l")
			},
		}),

		xsCase("link", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) linked {
			require.True(e, e.c.hasExt(extHardlink), "both advertise hardlink@openssh.com")
			return linked{e.c.Link(e.ctx, "f", "h"), e.c.Link(e.ctx, "missing", "h2")}
		}, xsExpect[linked]{
			openssh: func(e *xsEnv, l linked) {
				require.NoError(e, l.err)
				fa, err := os.Stat(e.local("f"))
				require.NoError(e, err)
				fh, err := os.Stat(e.local("h"))
				require.NoError(e, err)
				require.True(e, os.SameFile(fa, fh))
				require.ErrorIs(e, l.errMissing, fs.ErrNotExist)
			},
			rclone: func(e *xsEnv, l linked) {
				// OK, and nothing done, even with no source: the client cannot tell.
				require.NoError(e, l.err)
				require.NoError(e, l.errMissing)
				require.NoFileExists(e, e.local("h"))
				require.NoFileExists(e, e.local("h2"))
				_, err := e.c.Stat(e.ctx, "h")
				require.ErrorIs(e, err, fs.ErrNotExist)
			},
		}),

		xsCase("statvfs", nil, func(e *xsEnv) xsRes[*StatVFS] {
			require.True(e, e.c.hasExt(extStatVFS), "both advertise statvfs@openssh.com")
			return xsR(e.c.StatVFS(e.ctx, "."))
		}, xsExpect[xsRes[*StatVFS]]{
			openssh: func(e *xsEnv, r xsRes[*StatVFS]) {
				require.NoError(e, r.err)
				st := localStatfs(e, e.dir)
				require.Equal(e, st.Blocks, r.v.Blocks)
				require.Equal(e, st.Namelen, r.v.NameMax)
			},
			rclone: func(e *xsEnv, r xsRes[*StatVFS]) {
				// Advertised, yet refused.
				unsupported(e, r.err)
				requirePathErr(e, r.err, "statvfs", ".")
			},
		}),
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
		}), xsExpect[written]{openssh: holds("XY23456789"), rclone: holds("XY")}),

		xsCase("open/append", digits, rewrite(os.O_WRONLY|os.O_APPEND, func(f *File) error {
			_, err := f.Write([]byte("++"))
			return err
		}), xsExpect[written]{openssh: holds("0123456789++"), rclone: holds("++")}),

		xsCase("open/exclusive-existing", digits, rewrite(os.O_WRONLY|os.O_CREATE|os.O_EXCL, func(*File) error {
			return nil
		}), xsExpect[written]{
			openssh: func(e *xsEnv, w written) {
				requireStatus(e, w.open, StatusFailure)
				require.Equal(e, "0123456789", string(w.content))
			},
			rclone: holds(""), // O_EXCL is not honoured
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
			openssh: func(e *xsEnv, o outOfOrder) {
				require.NoError(e, errors.Join(o.second, o.first, o.close))
				require.Equal(e, data, o.content)
			},
			rclone: func(e *xsEnv, o outOfOrder) {
				requireStatus(e, o.second, StatusFailure)
				require.NoError(e, o.first)
				require.NoError(e, o.close)
				require.Equal(e, data[:50], o.content)
			},
		}),
	}
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
	withoutLink := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		delete(m, "link")
		return m
	}

	return []xsScenario{
		xsCase("tree/put-get", nil, func(e *xsEnv) copied {
			return get(e, put(e, false), "up")
		}, xsBoth(func(e *xsEnv, c copied) {
			require.NoError(e, c.put)
			require.NoError(e, c.get)
			require.Len(e, c.src, 8)
			require.Equal(e, c.src, c.up)
			require.Equal(e, c.src, c.back)
		})),

		xsCase("tree/get-with-symlink", func(t *testing.T, dir string) {
			xsMakeTree(t, filepath.Join(dir, "tree"), true)
		}, func(e *xsEnv) copied {
			return get(e, copied{src: listTree(e.T, e.local("tree"))}, "tree")
		}, xsExpect[copied]{
			openssh: func(e *xsEnv, c copied) {
				require.NoError(e, c.get)
				require.Equal(e, "link sub/c.txt", c.back["link"])
				require.Equal(e, c.src, c.back)
			},
			rclone: func(e *xsEnv, c copied) {
				require.NoError(e, c.get)
				require.Equal(e, withoutLink(c.src), c.back, "the link is hidden")
			},
		}),

		xsCase("tree/put-with-symlink", nil, func(e *xsEnv) copied { return put(e, true) }, xsExpect[copied]{
			openssh: func(e *xsEnv, c copied) {
				require.NoError(e, c.put)
				require.Equal(e, c.src, c.up)
			},
			rclone: func(e *xsEnv, c copied) {
				require.ErrorIs(e, c.put, errors.ErrUnsupported)
				_, err := os.Lstat(e.local("up/link"))
				require.ErrorIs(e, err, fs.ErrNotExist)
			},
		}),
	}
}
