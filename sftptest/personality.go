package sftptest

import "github.com/sluicehq/sftp/internal/testserver"

// Personality is a server to behave as: the zero value is OpenSSH's sftp-server.
// The others reproduce services that cannot be run in a test, from their own
// documentation and their users' reports (each constructor names its sources);
// where those are silent they behave as OpenSSH's, except where the store behind
// the service cannot (an object store has no links): those choices say "assumed".
// The sluice repository's docs/servers.md has the same account, and what sluice
// does on each.
type Personality struct {
	name string
	opts func() testserver.Options
}

// Name is the personality's short name ("aws-s3", "azure-blob", ...).
func (p Personality) Name() string {
	if p.opts == nil {
		return "openssh"
	}
	return p.name
}

func (p Personality) String() string { return p.Name() }

func (p Personality) options() testserver.Options {
	if p.opts == nil {
		return testserver.OpenSSH()
	}
	return p.opts()
}

// Personalities lists every personality, OpenSSH's first.
func Personalities() []Personality {
	var out []Personality
	for _, p := range testserver.Personalities() {
		out = append(out, Personality{name: p.Name, opts: p.Options})
	}
	return out
}

func personality(name string, opts func() testserver.Options) Personality {
	return Personality{name: name, opts: opts}
}

// OpenSSH is OpenSSH 9.x's sftp-server: the zero Personality.
func OpenSSH() Personality { return personality("openssh", testserver.OpenSSH) }

// AWSTransferS3 is AWS Transfer Family with an S3 bucket behind it.
//
//   - A READDIR is answered with the whole directory in one NAME, however large
//     (libssh2 PR #791: "AWS always sends a single package with all files of a
//     directory", about 7 MB reported; libssh2 PR #269).
//   - OPEN with READ and WRITE together fails with OP_UNSUPPORTED "Cannot open file
//     in mode: WRITE|TRUNCATE|CREATE|READ" (pkg/sftp #305, rclone #3776).
//   - SETSTAT and FSETSTAT fail with OP_UNSUPPORTED "SETSTAT unsupported" unless the
//     server's SetStatOption is ENABLE_NO_OP (AWS Transfer ProtocolDetails
//     SetStatOption; paramiko #1969).
//   - At most 10 SFTP sessions at once; 1800 s idle timeout; "if your client
//     contains an option to use multiple connections for a single transfer, make
//     sure to disable the option" (AWS Transfer user guide, transfer-file): a
//     second handle writing the same file fails with FAILURE.
//   - Extensions: none documented, none advertised, so requests stay at 32 KiB.
//     Assumed: a plain RENAME replaces an existing object (S3 copies over it);
//     SYMLINK and READLINK are OP_UNSUPPORTED.
func AWSTransferS3() Personality { return personality("aws-s3", testserver.AWSTransferS3) }

// AzureBlob is SFTP for Azure Blob Storage (MicrosoftDocs/azure-docs,
// articles/storage/blobs/secure-file-transfer-protocol-known-issues.md @84b7b06 and
// secure-file-transfer-protocol-performance.md @2260e8c).
//
//   - Unsupported, answered OP_UNSUPPORTED: OPEN with READ and WRITE, OPEN with
//     APPEND (so no resume: "reput", "put -a"), chmod, chown, chgrp and "put -p"
//     (SETSTAT of permissions, owner or times), symlink, readlink, hard links, and
//     the extensions fsync, limits, lsetstat and statvfs (none is advertised, so
//     requests stay at 32 KiB; the page recommends "sftp -B 262000", which fits
//     OpenSSH's 256 KiB packet limit this server keeps).
//   - "Rename operations where the target file name already exists is a protocol
//     violation": a plain RENAME onto an existing name fails (FAILURE).
//   - "Using multiple connections to upload a single file is not supported": a
//     second handle writing the same file fails with FAILURE.
//   - A 2-minute idle timeout.
func AzureBlob() Personality { return personality("azure-blob", testserver.AzureBlob) }

// SFTPGoCloud is SFTPGo serving an S3, GCS or Azure Blob backend (drakkan/sftpgo
// docs/s3.md @4519bff, docs/full-configuration.md @f9d8b83; GCS and Azure "have the
// same limitations"), built on pkg/sftp's request server.
//
//   - chmod, chown and chtimes fail with OP_UNSUPPORTED (setstat_mode 0, the
//     default); truncate, symlink and readlink are not supported (OP_UNSUPPORTED).
//   - "opening a file for both reading and writing at the same time is not
//     supported": the OPEN succeeds, its READs fail with OP_UNSUPPORTED
//     (internal/sftpd/handler.go, errForRead).
//   - "resuming uploads is not supported": an OPEN for writing of an existing file
//     without TRUNC fails with OP_UNSUPPORTED (GetMaxWriteSize).
//   - A plain RENAME replaces an existing file (sftpgo #2068) and is a copy then a
//     delete; a directory that is not empty cannot be renamed (FAILURE).
//   - Only statvfs@openssh.com is advertised; READ is capped at 32768 bytes and
//     packets at 256 KiB, as pkg/sftp's server does. Idle timeout 15 minutes of no
//     SFTP request.
func SFTPGoCloud() Personality { return personality("sftpgo-cloud", testserver.SFTPGoCloud) }

// MinIO is MinIO's SFTP server (minio cmd/sftp-server-driver.go, docs/ftp/README.md:
// "rename: no"; minio #17505, PR #19735), on pkg/sftp's request server. The tree
// served is one bucket's contents: the real server lists buckets at "/" and paths
// start with the bucket's name.
//
//   - RENAME and posix-rename, SETSTAT and FSETSTAT, SYMLINK and hard links fail
//     with OP_UNSUPPORTED, though hardlink, posix-rename and statvfs are advertised
//     (pkg/sftp's defaults); statvfs is OP_UNSUPPORTED too.
//   - STAT and LSTAT of a missing name report a directory (the driver's "dummy
//     return to satisfy LIST"); REMOVE of a missing name succeeds; RMDIR removes
//     everything below the directory; listings have no "." and ".."; a file
//     written under names that are not there makes them (objects need no
//     directories).
//   - An OPEN for writing replaces the object; out-of-order WRITEs are buffered up
//     to 100 MiB ahead, and a CLOSE with a gap left fails ("some file segments were
//     not flushed from the queue") and stores nothing.
//   - OPEN of a missing file for reading fails with FAILURE; a READ on a handle
//     opened READ|WRITE fails with FAILURE; READ is capped at 32768 bytes.
func MinIO() Personality { return personality("minio", testserver.MinIO) }

// FilesCom is Files.com's SFTP server (files.com/docs: "Connection Settings In
// Your SFTP App", "File System Semantics").
//
//   - Sessions idle for 60 seconds are timed out.
//   - Paths are case-insensitive and case-preserving: "FILENAME.TXT" names an
//     existing "filename.txt".
//   - POSIX permissions shown are "dummy values": chmod and chown answer OK and
//     change nothing; modification times "are not editable by users" by default
//     (assumed: answered OK, unchanged).
//   - No extensions advertised (the server is Files.com's own; none documented).
//     Assumed: SYMLINK and READLINK are OP_UNSUPPORTED.
func FilesCom() Personality { return personality("files-com", testserver.FilesCom) }

// HetznerStorageBox is a Hetzner Storage Box.
//
//   - A plain RENAME onto an existing file fails with code 11 (FILE_ALREADY_EXISTS,
//     from SFTP version 5), met in a version 3 session (pgbackrest #2376, PR #2377,
//     checked against a storage box).
//   - No posix-rename: storage box users mount sshfs with workaround=rename
//     (borgbackup/borgstore #17); no extension is advertised.
//   - "There is a 10-connection limit on each Storage Box account" (Hetzner's
//     storage box documentation): here, 10 sessions at once.
func HetznerStorageBox() Personality { return personality("hetzner", testserver.HetznerStorageBox) }

// DropFolder is a write-only ("upload only") account, as many managed-file-
// transfer products offer: uploads are allowed, nothing else. LSTAT of the target
// fails with PERMISSION_DENIED (velociraptor #950, fixed by PR #957 against an AWS
// managed SFTP server; ProFTPD #1338: STAT is a READ command), listing fails
// (velociraptor-docs PR #1083: "remote readdir: Permission denied"), and the folder
// "does not allow list, read, only upload" (rclone PR #8459): RENAME, REMOVE,
// MKDIR, RMDIR and SETSTAT are denied too. Otherwise OpenSSH's server.
func DropFolder() Personality { return personality("drop-folder", testserver.DropFolder) }

// WindowsOpenSSH is Win32-OpenSSH's sftp-server.
//
//   - READ answers at most 102400 bytes although limits@openssh.com says 261120
//     (asyncssh #814; mplpl/mft #5: "260120 vs 102400").
//   - Paths are drive paths: REALPATH answers "/C:/...", and "/C:/x" names "/x"
//     (Win32-OpenSSH #1849's session shows "/C:/Users/mgk25/test.txt").
//   - A RENAME of a file onto its own name removes the file and fails with
//     NO_SUCH_FILE (Win32-OpenSSH #1849, open).
func WindowsOpenSSH() Personality { return personality("windows-openssh", testserver.WindowsOpenSSH) }

// IBMSterling is IBM Sterling B2B Integrator's SFTP server with an extractability
// count of 1 (its default), for mailbox messages that may be downloaded once.
//
//   - "Between SSH_FXP_OPEN & SSH_FXP_CLOSE operations, Client must just READ"
//     (IBM, quoted in mscdex/ssh2 #611): a STAT, LSTAT or FSTAT of the file while
//     it is open fails with FAILURE "The message [name] is not extractable!"
//     (pkg/sftp #331, paramiko #530), and so does a second OPEN of it.
//   - Once extracted the file is gone: "Files with an extractability count of 1
//     will become unavailable once the GET request has started" (paramiko PR #579).
//   - No extensions documented, none advertised.
func IBMSterling() Personality { return personality("ibm-sterling", testserver.IBMSterling) }
