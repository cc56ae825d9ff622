//go:build linux

package sftp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The cross-server scenarios (see xs_test.go) of path operations.

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
	// statDisk: the attributes of the local file, with flags; lstatFollows when
	// LSTAT of a symlink reports its target, as STAT does.
	statDisk := func(flags AttrFlags, lstatFollows bool) xsOutcome[stats] {
		return func(e *xsEnv, got stats) {
			fa := statCommon(e, got)
			st := localStat(e, e.local("f"))
			require.Equal(e, flags, fa.Flags, "size, uid/gid, permissions, times")
			require.Equal(e, st.Uid, fa.UID)
			require.Equal(e, st.Gid, fa.GID)
			require.Equal(e, uint32(0o100640), fa.Permissions)
			require.Equal(e, fs.FileMode(0o640), got["stat f"].v.Mode())
			require.True(e, xsATime.Equal(fa.ATime), "ATime %v", fa.ATime)
			require.Equal(e, fs.ModeDir|0o750, got["stat d"].v.Mode())
			require.Equal(e, localStat(e, e.local("d")).Size, got["stat d"].v.Size())
			require.NoError(e, got["lstat l"].err)
			if lstatFollows {
				require.True(e, got["lstat l"].v.Mode().IsRegular(), "LSTAT follows the link")
				require.Equal(e, int64(5), got["lstat l"].v.Size())
			} else {
				require.Equal(e, fs.ModeSymlink, got["lstat l"].v.Mode().Type())
			}
			require.NoError(e, got["stat l"].err)
			require.True(e, got["stat l"].v.Mode().IsRegular())
		}
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
	xsChmodRefused := func(e *xsEnv, s setattr) {
		require.ErrorIs(e, s.err, errors.ErrUnsupported)
		require.Equal(e, fs.FileMode(0o644), xsLocalMode(e, "f"))
	}
	xsChtimesRefused := func(e *xsEnv, s setattr) {
		require.ErrorIs(e, s.err, errors.ErrUnsupported)
		require.False(e, xsMTime.Equal(s.stat.v.ModTime()))
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
			xsOnDisk: statDisk(0xf, false),
			// ProFTPD adds extended attributes, and its LSTAT follows the link.
			xsProFTPD: statDisk(0xf|AttrExtended, true),
			xsOnVFS: func(e *xsEnv, got stats) {
				fa := statCommon(e, got)
				require.Equal(e, AttrSize|AttrPermissions|AttrACModTime, fa.Flags, "no uid/gid")
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
			xsOnDisk: func(e *xsEnv, l listing) {
				require.NoError(e, l.err)
				require.Equal(e, slices.Concat([]string{"d"}, many, []string{"l"}), l.names)
				require.Equal(e, fs.ModeDir, l.types["d"])
				require.Equal(e, fs.ModeSymlink, l.types["l"])
			},
			xsOnVFS: func(e *xsEnv, l listing) {
				require.NoError(e, l.err)
				require.Equal(e, slices.Concat([]string{"d"}, many), l.names, "the link is hidden")
				require.Equal(e, fs.ModeDir, l.types["d"])
			},
		}),

		xsCase("mkdir", nil, func(e *xsEnv) mkdirs {
			m := mkdirs{first: e.c.Mkdir(e.ctx, "new", 0o700)}
			if m.first == nil {
				m.mode = xsLocalMode(e, "new")
			}
			m.again = e.c.Mkdir(e.ctx, "new", 0o700)
			return m
		}, xsExpect[mkdirs]{
			xsOnDisk: func(e *xsEnv, m mkdirs) {
				require.NoError(e, m.first)
				require.Equal(e, fs.ModeDir|0o700&^umask(), m.mode)
				requireStatus(e, m.again, StatusFailure)
			},
			xsOnVFS: func(e *xsEnv, m mkdirs) {
				require.NoError(e, m.first)
				require.Equal(e, xsVFSMode(true), m.mode, "the mode asked for is ignored")
				require.NoError(e, m.again, "an existing directory is not an error")
			},
		}),

		xsCase("mkdirall", xsFiles(map[string]string{"a/x": "x"}), func(e *xsEnv) [2]error {
			return [2]error{e.c.MkdirAll(e.ctx, "a/b/c", 0o755), e.c.MkdirAll(e.ctx, "a/b/c", 0o755)}
		}, xsAll(func(e *xsEnv, errs [2]error) {
			require.NoError(e, errs[0])
			require.NoError(e, errs[1])
			require.DirExists(e, e.local("a/b/c"))
		}).with(func(e *xsEnv, errs [2]error) {
			// A missing name stats as a directory, so MkdirAll finds a/b/c there
			// and makes nothing: the directories come with the first file
			// written below them.
			require.NoError(e, errors.Join(errs[0], errs[1]))
			require.NoDirExists(e, e.local("a/b"))
		}, xsMinIO)),

		xsCase("remove", func(t *testing.T, dir string) {
			xsFiles(map[string]string{"f": "f", "full/g": "g"})(t, dir)
			require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
		}, func(e *xsEnv) map[string]error {
			out := map[string]error{}
			for _, n := range []string{"f", "empty", "full", "missing"} {
				out[n] = e.c.Remove(e.ctx, n)
			}
			return out
		}, xsAll(func(e *xsEnv, errs map[string]error) {
			require.NoError(e, errs["f"])
			require.NoError(e, errs["empty"])
			require.NoFileExists(e, e.local("f"))
			require.NoDirExists(e, e.local("empty"))
			requireStatus(e, errs["full"], StatusFailure)
			require.FileExists(e, e.local("full/g"))
			require.ErrorIs(e, errs["missing"], fs.ErrNotExist)
		}).with(func(e *xsEnv, errs map[string]error) {
			// REMOVE of a missing name is OK; Remove of "full" falls through to
			// RMDIR (REMOVE refuses a directory), and RMDIR removes all below.
			require.NoError(e, errors.Join(errs["f"], errs["empty"], errs["full"], errs["missing"]))
			require.NoDirExists(e, e.local("full"))
		}, xsMinIO)),

		xsCase("removeall", xsFiles(map[string]string{"t/a/b/f": "f", "t/g": "g"}), func(e *xsEnv) [2]error {
			return [2]error{e.c.RemoveAll(e.ctx, "t"), e.c.RemoveAll(e.ctx, "missing")}
		}, xsAll(func(e *xsEnv, errs [2]error) {
			require.NoError(e, errs[0])
			require.NoError(e, errs[1])
			require.NoDirExists(e, e.local("t"))
		})),

		xsCase("removeall/with-symlink", func(t *testing.T, dir string) {
			xsFiles(map[string]string{"t/f": "f"})(t, dir)
			require.NoError(t, os.Symlink("f", filepath.Join(dir, "t", "l")))
		}, func(e *xsEnv) error { return e.c.RemoveAll(e.ctx, "t") }, xsExpect[error]{
			xsOnDisk: func(e *xsEnv, err error) {
				require.NoError(e, err)
				require.NoDirExists(e, e.local("t"))
			},
			xsOnVFS: func(e *xsEnv, err error) {
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
			// "dummy values": answered OK, nothing changed.
			xsFilesCom: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				require.Equal(e, fs.FileMode(0o644), xsLocalMode(e, "f"))
				require.Equal(e, fs.FileMode(0o644), s.stat.v.Mode())
			},
			xsAWS: xsChmodRefused, xsAzure: xsChmodRefused, xsSFTPGo: xsChmodRefused, xsMinIO: xsChmodRefused,
			xsOnDisk: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				require.Equal(e, fs.FileMode(0o600), xsLocalMode(e, "f"))
				require.Equal(e, fs.FileMode(0o600), s.stat.v.Mode())
			},
			xsOnVFS: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err, "accepted...")
				require.Equal(e, fs.FileMode(0o644), xsLocalMode(e, "f"), "...and ignored")
				require.Equal(e, xsVFSMode(false), s.stat.v.Mode())
			},
		}),

		xsCase("chtimes", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) setattr {
			err := e.c.Chtimes(e.ctx, "f", xsATime, xsMTime)
			return setattr{err, xsR(e.c.Stat(e.ctx, "f"))}
		}, xsExpect[setattr]{
			xsFilesCom: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				require.False(e, xsMTime.Equal(s.stat.v.ModTime()), "answered OK, unchanged")
			},
			xsAWS: xsChtimesRefused, xsAzure: xsChtimesRefused, xsSFTPGo: xsChtimesRefused, xsMinIO: xsChtimesRefused,
			xsOnDisk: func(e *xsEnv, s setattr) {
				require.NoError(e, s.err)
				st := localStat(e, e.local("f"))
				require.Equal(e, xsMTime.Unix(), st.Mtim.Sec)
				require.Equal(e, xsATime.Unix(), st.Atim.Sec)
				require.True(e, xsATime.Equal(s.stat.v.Sys().(*FileAttrs).ATime))
				require.True(e, xsMTime.Equal(s.stat.v.ModTime()))
			},
			xsOnVFS: func(e *xsEnv, s setattr) {
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
			xsOnDisk: func(e *xsEnv, err error) {
				require.NoError(e, err)
				require.Equal(e, []byte("012"), readLocal(e, e.local("f")))
			},
			xsOnVFS: func(e *xsEnv, err error) {
				require.NoError(e, err, "accepted...")
				require.Equal(e, []byte("0123456789"), readLocal(e, e.local("f")), "...and ignored")
			},
			xsAWS: xsTruncateRefused, xsSFTPGo: xsTruncateRefused, xsMinIO: xsTruncateRefused,
			// paramiko's SFTPServer.set_file_attr, the helper its backends use,
			// opens the file with "w+" to truncate it: everything is lost, the
			// file is the size asked for, all zeros.
			xsParamiko: func(e *xsEnv, err error) {
				require.NoError(e, err)
				require.Equal(e, []byte{0, 0, 0}, readLocal(e, e.local("f")))
			},
		}),

		xsCase("realpath", xsFiles(map[string]string{"f": "f"}), func(e *xsEnv) map[string]xsRes[string] {
			out := map[string]xsRes[string]{}
			for _, n := range []string{".", "f", "missing", "missing/x", "a/../b"} {
				out[n] = xsR(e.c.RealPath(e.ctx, n))
			}
			return out
		}, xsExpect[map[string]xsRes[string]]{
			xsOnDisk: func(e *xsEnv, got map[string]xsRes[string]) {
				for n, want := range map[string]string{".": e.dir, "f": e.local("f"), "missing": e.local("missing")} {
					require.NoError(e, got[n].err, n)
					require.Equal(e, want, got[n].v, n)
				}
				// Only the last component may be missing.
				require.ErrorIs(e, got["missing/x"].err, fs.ErrNotExist)
				require.ErrorIs(e, got["a/../b"].err, fs.ErrNotExist)
			},
			// Served from "/", resolved lexically: anything resolves.
			xsOnVFS:    xsLexical("/"),
			xsAsyncSSH: xsLexical("/"),
			xsParamiko: xsLexical("/"),
			xsWindows:  xsWindowsRealPath,
			// The real path of the directory, then lexically.
			xsGreenEnd: func(e *xsEnv, got map[string]xsRes[string]) { xsLexical(e.dir+"/")(e, got) },
			// Chrooted, so "/"; only names that exist resolve.
			xsProFTPD: func(e *xsEnv, got map[string]xsRes[string]) {
				require.Equal(e, xsR("/", nil), got["."])
				require.Equal(e, xsR("/f", nil), got["f"])
				for _, n := range []string{"missing", "missing/x", "a/../b"} {
					require.ErrorIs(e, got[n].err, fs.ErrNotExist, n)
				}
			},
		}.with(xsLexical("/"), xsHetzner, xsSterling, xsFilesCom, xsAWS, xsAzure, xsSFTPGo, xsMinIO, xsDrop)),

		xsCase("extensions", nil, func(e *xsEnv) map[string]string { return e.c.Extensions() }, xsExpect[map[string]string]{
			xsOnDisk: func(e *xsEnv, exts map[string]string) {
				for name, v := range map[string]string{extPosixRename: "1", extHardlink: "1", extStatVFS: "2", extLimits: "1", extFsync: "1"} {
					require.Equal(e, v, exts[name], name)
				}
			},
			xsOnVFS: xsExtensions(map[string]string{extPosixRename: "1", extHardlink: "1", extStatVFS: "2"}),
			xsGreenEnd: xsExtensions(map[string]string{
				extPosixRename: "1", extHardlink: "1", extStatVFS: "2", extFsync: "1", "fstatvfs@openssh.com": "2",
				"posix-rename@openssh.org": "", "space-available": "", "statfs@openssh.org": "",
				extSymlinkOrder: "linkpath-targetpath",
				// Binary: the vendor name, product name, version and build number.
				"vendor-id": "\x00\x00\x00\tGreen End\x00\x00\x00\x15Green End SFTP Server\x00\x00\x00\x012\x00\x00\x00\x00\x00\x00\x00\x00",
			}),
			// "versions" lists what it could speak; it speaks 3 all the same.
			xsProFTPD: xsExtensions(map[string]string{
				extPosixRename: "1", extHardlink: "1", extStatVFS: "2", extFsync: "1", "fstatvfs@openssh.com": "2",
				"home-directory": "1", "versions": "2,3,4,5,6",
			}),
			xsAsyncSSH: func(e *xsEnv, exts map[string]string) {
				vendor := exts["vendor-id"]
				delete(exts, "vendor-id") // binary, and it names the version
				require.Contains(e, vendor, "AsyncSSH")
				xsExtensions(map[string]string{
					extPosixRename: "1", extHardlink: "1", extStatVFS: "2", extFsync: "1", "fstatvfs@openssh.com": "2",
					"newline": "\n",
				})(e, exts)
			},
			// What paramiko's server advertises itself; the backend can add none.
			xsParamiko: xsExtensions(map[string]string{"check-file": "md5,sha1"}),
		}.with(xsExtensions(map[string]string{}), xsHetzner, xsSterling, xsFilesCom, xsAWS, xsAzure).
			with(xsExtensions(map[string]string{extStatVFS: "2"}), xsSFTPGo).
			with(xsExtensions(map[string]string{extStatVFS: "2", extHardlink: "1", extPosixRename: "1"}), xsMinIO)),

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
			xsOnDisk: func(e *xsEnv, errs map[string]error) { xsRequireMissing(e, errs, "No such file") },
			// SETSTAT is refused before the name is looked at.
			xsAWS:    xsMissingRefusing("chmod", "chtimes", "truncate"),
			xsSFTPGo: xsMissingRefusing("chmod", "chtimes", "truncate"),
			xsAzure:  xsMissingRefusing("chmod", "chtimes"),
			xsMinIO: func(e *xsEnv, errs map[string]error) {
				for _, op := range []string{"stat", "lstat", "remove", "removeall"} {
					require.NoError(e, errs[op], "a missing name is a directory, and removing it is OK: %s", op)
				}
				for _, op := range []string{"rename", "chmod", "chtimes", "truncate"} {
					require.ErrorIs(e, errs[op], errors.ErrUnsupported, op)
				}
				requireStatus(e, errs["open"], StatusFailure)
				require.ErrorIs(e, errs["readdir"], fs.ErrNotExist)
			},
			xsGreenEnd: func(e *xsEnv, errs map[string]error) { xsRequireMissing(e, errs, "No such file or directory") },
			xsAsyncSSH: func(e *xsEnv, errs map[string]error) { xsRequireMissing(e, errs, "No such file or directory") },
			// set_file_attr opens the file with "w+" to truncate it, so TRUNCATE
			// of a missing name makes it (RemoveAll removes it again).
			xsParamiko: func(e *xsEnv, errs map[string]error) {
				require.NoError(e, errs["truncate"])
				xsRequireMissing(e, errs, "No such file", "truncate")
			},
			xsOnVFS: func(e *xsEnv, errs map[string]error) {
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

// xsLexical: every name resolves, lexically, under root.
func xsLexical(root string) xsOutcome[map[string]xsRes[string]] {
	return func(e *xsEnv, got map[string]xsRes[string]) {
		for n, want := range map[string]string{".": root, "f": root + "f", "missing": root + "missing", "missing/x": root + "missing/x", "a/../b": root + "b"} {
			if n == "." {
				want = strings.TrimSuffix(want, "/")
				if want == "" {
					want = "/"
				}
			}
			require.NoError(e, got[n].err, n)
			require.Equal(e, want, got[n].v, n)
		}
	}
}

// xsExtensions: the server advertises exactly exts, so the client keeps to the READ
// and WRITE size every server must take.
func xsExtensions(exts map[string]string) xsOutcome[map[string]string] {
	return func(e *xsEnv, got map[string]string) {
		require.Equal(e, exts, got)
		require.Equal(e, Limits{MaxPacket: 34000, MaxRead: 32768, MaxWrite: 32768}, e.c.Limits())
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
