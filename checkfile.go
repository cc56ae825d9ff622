package sftp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// The check-file extension (draft-ietf-secsh-filexfer-extensions-00, section 3): the
// server hashes a range of a file and sends the digest. The request is
//
//	string "check-file-name", string path, string algorithms (comma-separated),
//	uint64 offset, uint64 length (0: to the end), uint32 block size (0: one digest)
//
// and the answer an EXTENDED_REPLY holding the algorithm used and the digest bytes.
//
// What servers do with it (measured, TestHash* and the cross-server suite):
//
//   - ProFTPD 1.3.8 answers check-file-name and check-file-handle without advertising
//     the extension in a version 3 session (later versions advertise "check-file",
//     with "1" as data rather than a list of algorithms). Its reply leaves out the
//     "check-file" string the draft puts before the algorithm. It knows md5, sha1,
//     sha224, sha256, sha384 and sha512, and refuses an unknown algorithm, an empty
//     file and an offset at or past the end with OP_UNSUPPORTED (its "invalid
//     parameter" in version 3). Only a range to the end of the file (length 0) is
//     hashed right: 1.3.8 takes a length n from offset off as off+n bytes (a range of
//     5000 bytes from 1000 hashes 6000), and when that is not a multiple of its read
//     buffer (four file-system blocks, 16 KiB here) the last read overshoots and its
//     count of bytes left wraps, so it hashes on to the end of the file (later
//     versions fix the first bug, not the second). So this client asks it for whole
//     files, or ranges to the end, only. It hashes in its session's one process, so the
//     channel's other requests wait.
//   - paramiko advertises "check-file" with "md5,sha1" but serves only its own
//     request, named "check-file" and taking a handle (OP_UNSUPPORTED to the draft's
//     names), and gets it wrong past 64 KiB: the offset it reads from moves by the
//     running total instead of the chunk (offset += count), so a block of 128 KiB to
//     192 KiB is hashed from the wrong bytes and a larger one loops for ever on empty
//     reads (paramiko/sftp_server.py _check_file, 2.12 and the current source). This
//     client never sends paramiko's request.
//   - OpenSSH, dropbear (OpenSSH's sftp-server), rclone, gesftpserver and asyncssh
//     answer OP_UNSUPPORTED.
//
// So whether a server answers is learned by asking, and an OP_UNSUPPORTED before any
// answer is ambiguous (ProFTPD's refusal of an empty file looks like OpenSSH's refusal
// of the extension): a second request, for a name that cannot exist, settles it once
// per Client. A server that knows the extension answers NO_SUCH_FILE there.

const (
	extCheckFileName  = "check-file-name"
	checkFileReplyTag = "check-file" // what the draft puts before the algorithm
)

// checkFileSum asks the server for the alg digest of name from off to the end with
// check-file-name. ok is false when the server did not hash it (it lacks the
// extension, or refused this algorithm or range): then the next means is tried. A
// reply that answers with another algorithm or a digest of the wrong length is an
// error, not a reason to try elsewhere: the server said something false.
func (c *Client) checkFileSum(ctx context.Context, name string, alg HashAlgorithm, off int64) (sum []byte, ok bool, err error) {
	if learned(c.hashes.checkFile.Load()) == unknown {
		if release, first := c.hashes.learn(ctx); first {
			defer release()
		} else if err := ctxError(ctx, ""); err != nil {
			return nil, false, err
		}
	}
	if learned(c.hashes.checkFile.Load()) == refused {
		return nil, false, nil
	}
	var serr error // the server's STATUS: a refusal of this request
	err = c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendCheckFileName(dst, id, name, alg, off, -1)
	}, func(r response) error {
		if r.typ == sshfx.TypeStatus {
			serr = otherReply(extCheckFileName, &r, sshfx.TypeExtendedReply)
			return nil
		}
		var derr error
		sum, derr = decodeCheckFile(&r, alg) // a *ProtocolError fails the channel (do)
		return derr
	})
	if err != nil {
		return nil, false, err
	}
	if serr != nil {
		var se *StatusError
		if errors.As(serr, &se) && se.Code == StatusNoSuchFile {
			c.hashes.checkFile.Store(int32(offered))
			return nil, false, serr
		}
		if errors.As(serr, &se) && se.Code == StatusOpUnsupported && learned(c.hashes.checkFile.Load()) == unknown {
			return nil, false, c.learnCheckFile(ctx)
		}
		return nil, false, nil // a refusal of this request: the next means may do
	}
	c.hashes.checkFile.Store(int32(offered))
	return sum, true, nil
}

// learnCheckFile settles whether the server knows check-file-name after an
// OP_UNSUPPORTED, by asking for the digest of a name that does not exist: a server
// that knows the request looks the name up, and says so. The caller holds the right
// to learn (hashMeans.learn), or knows nobody else is asking.
func (c *Client) learnCheckFile(ctx context.Context) error {
	var b [12]byte
	rand.Read(b[:])
	missing := ".sluice-check-file-probe-" + hex.EncodeToString(b[:])
	l := offered
	err := c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendCheckFileName(dst, id, missing, SHA256, 0, -1)
	}, func(r response) error {
		var se *StatusError
		if r.typ == sshfx.TypeStatus && errors.As(decodeStatus(r.body), &se) && se.Code == StatusOpUnsupported {
			l = refused
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.hashes.checkFile.CompareAndSwap(int32(unknown), int32(l))
	return nil
}

// appendCheckFileName encodes a check-file-name request for one digest of n bytes from
// off (n < 0: to the end, which the request says with 0).
func appendCheckFileName(dst []byte, id uint32, name string, alg HashAlgorithm, off, n int64) []byte {
	start := len(dst)
	dst = sshfx.Begin(dst, sshfx.TypeExtended, id)
	dst = sshfx.AppendString(dst, extCheckFileName)
	dst = sshfx.AppendString(dst, name)
	dst = sshfx.AppendString(dst, string(alg))
	dst = sshfx.AppendUint64(dst, uint64(off))
	dst = sshfx.AppendUint64(dst, uint64(max(n, 0)))
	dst = sshfx.AppendUint32(dst, 0) // block size 0: one digest of the whole range
	return sshfx.Finish(dst, start)
}

// decodeCheckFile reads a check-file reply that should hold one alg digest: the
// algorithm (after "check-file" in the draft's form, alone in ProFTPD's) and the
// digest, exactly alg's size. A reply that cannot be read is a *ProtocolError; one
// that names another algorithm or carries another length is a plain error saying what
// came back.
func decodeCheckFile(r *response, alg HashAlgorithm) ([]byte, error) {
	d, err := decodeExtendedReply(extCheckFileName, r)
	if err != nil {
		return nil, err
	}
	used := d.String()
	if used == checkFileReplyTag {
		used = d.String()
	}
	digest := d.Rest()
	if err := d.Err(); err != nil {
		return nil, &ProtocolError{Op: extCheckFileName, Reason: err}
	}
	if used != string(alg) {
		return nil, fmt.Errorf("sftp: check-file: asked for %s, the server answered with %q", alg, clip(used, 64))
	}
	if len(digest) != alg.size() {
		return nil, fmt.Errorf("sftp: check-file: the server's %s digest has %d bytes, not %d (it began %x)", alg, len(digest), alg.size(), clipBytes(digest, 64))
	}
	return append([]byte(nil), digest...), nil
}

// clip shortens s to at most n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func clipBytes(b []byte, n int) []byte { return b[:min(len(b), n)] }
