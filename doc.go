// Package sftp is an SFTP version 3 client on golang.org/x/crypto/ssh, built to move
// data at the speed of the link: transfers keep many requests in flight and stripe
// large files across several SFTP channels of one SSH connection.
//
// # Quick start
//
// Dial SSH with golang.org/x/crypto/ssh, then start SFTP on the connection:
//
//	conn, err := ssh.Dial("tcp", "example.com:22", config)
//	if err != nil { ... }
//	defer conn.Close()
//	c, err := sftp.NewClient(ctx, conn)
//	if err != nil { ... }
//	defer c.Close()
//
//	f, err := c.Create(ctx, "backup.tar")
//	_, err = io.Copy(f, src)  // many WRITEs in flight
//	err = f.Close()           // always check: a write may fail only here
//
//	err = c.Get(ctx, "/srv/logs", "./logs", sftp.Recursive())
//
// NewClientPipe speaks SFTP over any pair of pipes instead, for example to a local
// sftp-server process. WithSubsystem, WithServerCommand and WithEnv choose how the
// server is started on an SSH session (rclone's server_command and set_env).
//
// What a program usually needs:
//   - files: Open, Create, OpenFile give a *File with every io interface; ReadFile,
//     WriteFile; Get and Put move files and whole trees, in parallel, resumable;
//   - paths: Stat, Lstat, Mkdir, MkdirAll, Remove, RemoveAll, Rename, Chmod, Chown,
//     Chtimes, Truncate, Readlink, Symlink, Link, RealPath, Getwd, HomeDir, StatVFS;
//   - listings: ReadDir (sorted, whole), DirEntries and OpenDir (streaming, for
//     directories of any size), WalkDir and Walk, Glob;
//   - io/fs: FS and DirFS give an fs.FS rooted at the start directory or at any
//     remote directory, for fs.WalkDir, fs.Glob, os.CopyFS, template.ParseFS and the rest;
//   - on the server alone: Copy (copy-data), UserGroupNames (owner names);
//   - liveness: Done and Err report that the connection died without a call; the
//     keepalive (WithKeepalive, on by default) turns a link gone silent into a dead
//     connection within about 30 s, so that no call waits on it for ever;
//   - observability: WithLogger logs connection-level events (channels given up,
//     keepalive misses, capability fallbacks, the Client failing) to a *slog.Logger,
//     and Stats returns counters (bytes, requests, errors, channels) to export.
//
// # Coming from pkg/sftp
//
// The calls keep github.com/pkg/sftp's names where they can, with a ctx first;
// docs/migrating-from-pkg-sftp.md, in the repository, maps every one. What changes
// without a compile error:
//   - os.IsNotExist(err) and os.IsPermission(err) are false for this package's errors;
//     errors.Is(err, fs.ErrNotExist) and errors.Is(err, fs.ErrPermission) work (see
//     Errors for why);
//   - Create opens write-only, as some servers require: reading back through its File
//     fails at once with syscall.EBADF. OpenFile with os.O_RDWR reads and writes;
//   - Rename replaces an existing target where the server offers
//     posix-rename@openssh.com, as pkg/sftp's PosixRename did (its Rename sent plain
//     RENAME, which most servers refuse then);
//   - File.Read may return fewer bytes than len(p), and io.EOF on a call of its own;
//     io.ReadFull fills p;
//   - StatVFS.FreeSpace is the space an unprivileged user can still write (f_bavail),
//     not every free block (f_bfree);
//   - WithMaxPacket takes 512 to 16 MiB; File.Sync without fsync@openssh.com returns an
//     error matching errors.ErrUnsupported.
//
// # Contexts and time bounds
//
// Every Client method that sends requests, all but Close, takes a context.Context
// that bounds all of its waits: when ctx ends, the call returns an error matching
// ctx.Err() promptly, even if the server never answers. A handle the server opens for
// a call that gave up is closed in the background.
//
// A *File or *Dir outlives the ctx of the call that opened it: Open's ctx governs only
// the open. Its I/O (Read, Write, io.Copy through it) waits as long as the server
// takes, and ends when the File is closed (from any goroutine: transfers in progress
// stop with an error matching fs.ErrClosed) or the connection dies (a silent one is
// given up by the keepalive, see WithKeepalive). To bound File I/O
// in time, set a deadline with File.SetDeadline: a wait past it fails with an error
// matching os.ErrDeadlineExceeded, as with os.File. A Dir
// takes a ctx per read (Dir.ReadDirContext). The io/fs views take no context at all;
// use the Client's methods where a call must be bounded.
//
// # Concurrency
//
// A Client is safe for concurrent use by any number of goroutines, and so is a File.
// Requests from all goroutines share the SFTP channel: each request is written whole,
// replies are matched to requests by id, and a slow reader of one reply never holds up
// another. A File's Read, Write, Seek, ReadFrom and WriteTo share its offset and run
// one at a time; ReadAt and WriteAt run concurrently with anything. Close of a File
// orders itself after every request that names its handle, so no request can reach a
// handle the server has since reused.
//
// # Transfers and striping
//
// File.ReadFrom, WriteTo (and so io.Copy), ReadFile, WriteFile, Get and Put keep a
// window of requests in flight (64 on one channel, 12 per channel when striped,
// within 32 MiB; WithMaxInflight sets another), each as large as the server's
// limits@openssh.com allows (WithMaxPacket). The buffers of all the Client's transfers
// come out of one budget (WithTransferMemory, 48 MiB by default), which concurrent
// transfers share. One SSH channel carries at most
// its 2 MiB window per round trip; on links with a long round trip (2 ms or more,
// measured) a large transfer is striped: the file is opened on several SFTP channels,
// each moving its own ranges, as many as the round trip calls for and more while that
// still pays, up to WithChannels(n) (default 16). Channels are sessions of the same
// SSH connection, of more connections WithDialer dials, or pipes WithPipeOpener opens
// for NewClientPipe (which otherwise uses one). Striping is invisible to the caller:
// the data arrives in order through the same io interfaces. On such links files are
// opened on those data channels and the Client's first channel is kept for small calls
// (Stat, Rename, ReadDir, ...), so that they never wait behind bulk data.
//
// # Errors
//
// The client draws the line OpenSSH's does. A STATUS reply, whatever its code, fails
// only the request it answers: the channel and every other request carry on, even
// where the STATUS makes no sense (rclone answers some READs with STATUS OK). Anything
// else that does not fit closes the channel: broken framing (a bad length, a truncated
// body, an unknown or repeated request id), a reply of the wrong type, DATA longer than
// its READ asked for. Every call on that channel, the one that met the bad reply
// included, then fails with an error matching both *ProtocolError and net.ErrClosed,
// so a caller that reconnects on net.ErrClosed need not know which check fired.
//
// Errors are wrapped once, with the operation and path: *fs.PathError for one path,
// *os.LinkError for two (Rename, Symlink, Link, Copy). Inside is one of:
//   - *StatusError, the server's STATUS reply. Branch with errors.Is on the standard
//     errors it matches: fs.ErrNotExist (NO_SUCH_FILE), fs.ErrPermission
//     (PERMISSION_DENIED), errors.ErrUnsupported (OP_UNSUPPORTED). Never branch on its
//     Message: servers word the same failure differently. A STATUS OK where data was
//     due is a *StatusError with Code StatusOK; an EOF where no end exists, one with
//     Code StatusEOF, never io.EOF.
//   - a sharper error where SFTP v3 says only FAILURE and the client can find out
//     more: Mkdir of a path that exists, and OpenFile with os.O_CREATE|os.O_EXCL of
//     one, match fs.ErrExist; Remove of a directory that is not empty matches
//     syscall.ENOTEMPTY. Each still matches the *StatusError.
//   - errors.ErrUnsupported for an extension the server does not offer (StatVFS, Link,
//     Lchtimes, Copy, UserGroupNames, File.Sync), with nothing sent.
//   - syscall.EBADF for a read of a File opened write-only (Create) or a write of one
//     opened read-only (Open), with nothing sent, as from an *os.File.
//   - an error matching net.ErrClosed once the channel is gone (Close, the server
//     leaving, the SSH connection dropping); it unwraps to the cause, and Err returns it.
//   - *ProtocolError when the server broke the protocol; the channel is closed with it,
//     since nothing after a malformed packet can be trusted, so the error also matches
//     net.ErrClosed.
//   - ctx.Err() (matched with errors.Is) when the call's ctx ended.
//   - for listings: ErrListingTooLarge when a call would hold more than its memory
//     limit (WithMemoryLimit), ErrInvalidEntryName for a name that is not one plain
//     name; ErrWalkTooDeep past MaxWalkDepth in a walk.
//
// io.EOF is returned bare wherever callers compare it with ==. No call returns short
// data with a nil error.
//
// os.IsNotExist, os.IsPermission and os.IsExist report false for these errors, and
// err == os.ErrNotExist is false: those functions predate errors.Is, look through one
// level of wrapping only, and recognise only the os package's own errors, as their
// documentation says. Write errors.Is(err, fs.ErrNotExist) (os.ErrNotExist is the same
// value), which matches this package's errors and the os package's alike. The error
// keeps the server's *StatusError, code and message, where pkg/sftp replaced it with a
// bare os.ErrNotExist.
//
// # The server is not trusted
//
// Nothing a server sends may crash the client, hang a call past its ctx, or grow memory
// without bound: replies are length-checked before anything is allocated, and a
// directory entry name that could name another file ("a/b", "..", "") is refused
// wherever listings surface. What a call holds because of what the server sent (each
// listed entry with its name and attributes, extended pairs included; the paths it
// builds; Glob's matches) is charged to one memory account per call, from the decoded
// sizes, page by page as the server sends them: past the Client's limit
// (WithMemoryLimit, 64 MiB per call by default) the call fails with an error matching
// ErrListingTooLarge rather than returning less. With the default limit:
//   - a whole listing (ReadDir, Dir.ReadDir(n <= 0), the io/fs ReadDir) holds at most
//     64 MiB, about 400,000 entries with short names; a streaming one (DirEntries,
//     Dir.ReadDir(n > 0)) holds one page whatever the directory's size;
//   - a READDIR reply longer than the reply cap (256 KiB), as AWS Transfer Family
//     sends a whole directory in one, is read within the memory account of the call
//     that asked, entries included (a streaming listing has an account of its own),
//     so 100,000 entries in one reply list with the default limit; a reply past the
//     account fails that call with an error matching ErrListingTooLarge and is
//     skipped without being held, and the channel goes on;
//   - WalkDir, Walk and RemoveAll hold at most 64 MiB on the current path, and go down
//     at most MaxWalkDepth levels; a directory too large to hold whole is walked a page
//     at a time, in the server's order, so no honest directory is too large for them;
//   - Glob, and the io/fs view's, hold at most 64 MiB of matches (names only) and the
//     page being matched;
//   - a recursive Get: 64 levels, 1,048,576 entries and 256 MiB of path names for the
//     whole tree, shared by the listings in flight.
//
// Beyond the limit, a call holds for a moment what is not charged yet: the page being
// decoded when the limit is passed (at most 17 times the reply, 4.3 MiB for OpenSSH's
// 256 KiB cap; an honest page of 100 names takes about 16 KiB) and up to four replies
// in flight. Against a server built to cost the most memory per byte it sends, no call
// grew the heap by more than 66 MiB with the default limit.
package sftp
