package sftp

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"sync"
	"sync/atomic"
)

// Hashes of remote files, and how a Client gets them (Client.Hash). SFTP v3 has no
// request for a hash; the means, best first:
//
//   - check-file-name (draft-ietf-secsh-filexfer-extensions-00, section 3): the server
//     hashes the file itself and sends back only the digest. ProFTPD's mod_sftp answers
//     it, without advertising it in a version 3 session; OpenSSH, dropbear, rclone,
//     gesftpserver and asyncssh do not (checkfile.go);
//   - a command on the same SSH connection (sha256sum, sha1sum, md5sum), where the
//     caller allows it (WithHashCommand): OpenSSH runs the system's, SFTPGo and rclone
//     serve sftp their own (hashcmd.go);
//   - reading the file through the engine, as a download would, and hashing it here:
//     the whole file crosses the network.
//
// What each means can do is learned once per Client (hashMeans), the first time it is
// needed.

// HashAlgorithm names a hash function Hash and Verify can use. The names are those of
// the check-file extension and, with "sum" after them, of the coreutils commands.
type HashAlgorithm string

// The hash algorithms this package knows.
const (
	SHA256 HashAlgorithm = "sha256"
	SHA512 HashAlgorithm = "sha512"
	SHA1   HashAlgorithm = "sha1"
	MD5    HashAlgorithm = "md5"
)

// HashAlgorithms lists the algorithms Hash and VerifyWith accept, strongest first.
func HashAlgorithms() []HashAlgorithm { return []HashAlgorithm{SHA256, SHA512, SHA1, MD5} }

// ErrUnknownHashAlgorithm is the error for a HashAlgorithm this package does not know.
var ErrUnknownHashAlgorithm = errors.New("sftp: unknown hash algorithm (want sha256, sha512, sha1 or md5)")

func (a HashAlgorithm) newHash() (hash.Hash, error) {
	switch a {
	case SHA256:
		return sha256.New(), nil
	case SHA512:
		return sha512.New(), nil
	case SHA1:
		return sha1.New(), nil
	case MD5:
		return md5.New(), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownHashAlgorithm, string(a))
}

// size is the length of a's digest in bytes, 0 for an unknown algorithm.
func (a HashAlgorithm) size() int {
	switch a {
	case SHA256:
		return sha256.Size
	case SHA512:
		return sha512.Size
	case SHA1:
		return sha1.Size
	case MD5:
		return md5.Size
	}
	return 0
}

// emptySum is the digest of no bytes.
func (a HashAlgorithm) emptySum() []byte {
	h, _ := a.newHash()
	return h.Sum(nil)
}

// hashBy says how a remote hash was made.
type hashBy int

const (
	hashByNothing   hashBy = iota // an empty range: nothing to ask
	hashByCheckFile               // check-file-name
	hashByCommand                 // a command on the SSH connection
	hashByReading                 // the file read and hashed here
)

func (b hashBy) String() string {
	switch b {
	case hashByCheckFile:
		return "check-file"
	case hashByCommand:
		return "command"
	case hashByReading:
		return "reading"
	}
	return "nothing"
}

// learned is what a Client knows of one means of hashing: not yet tried, there, or not.
type learned int32

const (
	unknown learned = iota
	offered
	refused
)

// hashMeans is what a Client has learned about how its server hashes.
type hashMeans struct {
	checkFile atomic.Int32 // a learned: the server answers check-file-name
	// learning is held by the one call finding out whether the server answers
	// check-file-name, so that the files of a tree do not all ask at once. A channel,
	// not a mutex: the others wait for it only while their ctx lasts.
	learning chan struct{}
	once     sync.Once

	mu       sync.Mutex
	commands map[HashAlgorithm]learned // each algorithm's command: runs, or not
	verify   HashAlgorithm             // the algorithm Verify uses by default, once chosen
}

// learn takes the right to find out whether the server answers check-file-name, or
// returns ok false: ctx ended, or it is known by the time the right came.
func (m *hashMeans) learn(ctx context.Context) (release func(), ok bool) {
	m.once.Do(func() { m.learning = make(chan struct{}, 1) })
	select {
	case m.learning <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	if learned(m.checkFile.Load()) != unknown {
		<-m.learning
		return nil, false
	}
	return func() { <-m.learning }, true
}

func (m *hashMeans) command(alg HashAlgorithm) learned {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commands[alg]
}

func (m *hashMeans) setCommand(alg HashAlgorithm, l learned) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.commands == nil {
		m.commands = make(map[HashAlgorithm]learned)
	}
	m.commands[alg] = l
}

// Hash returns the alg digest of the remote file name, by the best means the server
// offers: the check-file extension where the server answers it (ProFTPD), a command
// such as sha256sum on the SSH connection where WithHashCommand allows it, else by
// reading the whole file (striped on a long link, as a download) and hashing it here.
// The first two move only the digest; the last costs what downloading the file costs.
// What the server offers is learned once per Client, the first time a means is tried.
//
// The digest is the server's word: a server can answer with any digest it likes. Used
// to check a copy (Verify), a wrong one can only fail the check.
func (c *Client) Hash(ctx context.Context, name string, alg HashAlgorithm) ([]byte, error) {
	return c.HashRange(ctx, name, alg, 0, -1)
}

// HashRange is Hash of n bytes of name from off; n < 0 means to the end of the file. A
// range past the end of the file covers the bytes there are, as sha256sum of a file cut
// there would.
func (c *Client) HashRange(ctx context.Context, name string, alg HashAlgorithm, off, n int64) ([]byte, error) {
	if off < 0 {
		return nil, pathErr("hash", name, fmt.Errorf("sftp: negative offset %d", off))
	}
	sum, _, err := c.remoteSum(ctx, name, alg, off, n)
	return sum, pathErr("hash", name, err)
}

// remoteSum is HashRange, saying how the digest was made.
func (c *Client) remoteSum(ctx context.Context, name string, alg HashAlgorithm, off, n int64) ([]byte, hashBy, error) {
	if alg.size() == 0 {
		_, err := alg.newHash()
		return nil, hashByNothing, err
	}
	if n == 0 {
		return alg.emptySum(), hashByNothing, nil
	}
	if sum, by, ok, err := c.cheapSum(ctx, name, alg, off, n); ok || err != nil {
		return sum, by, err
	}
	sum, err := c.readSum(ctx, name, alg, off, n)
	return sum, hashByReading, err
}

// cheapSum is remoteSum by the means that move only the digest: check-file for a range
// to the end of the file (the only ranges ProFTPD hashes right, see checkfile.go), then
// the command, for a whole file. ok is false when neither could.
func (c *Client) cheapSum(ctx context.Context, name string, alg HashAlgorithm, off, n int64) (sum []byte, by hashBy, ok bool, err error) {
	if n >= 0 {
		return nil, hashByNothing, false, nil
	}
	if sum, ok, err := c.checkFileSum(ctx, name, alg, off); ok || err != nil {
		return sum, hashByCheckFile, ok, err
	}
	if off == 0 {
		if sum, ok, err := c.commandSum(ctx, name, alg); ok || err != nil {
			return sum, hashByCommand, ok, err
		}
	}
	return nil, hashByNothing, false, nil
}

// ErrReadOnce is the error of a hash the Client would have to make by reading a file
// on a server that lets a file be read once (WithReadOnce, or an FSTAT refused): the
// read would use the file up. Hash, and Verify (checked before the transfer starts),
// fail with it there unless the server hashes by check-file or by command.
var ErrReadOnce = errors.New("sftp: the server lets a file be read once (WithReadOnce), and hashing it here would read it again")

// hashesWithoutReading reports whether the server is known to hash a whole file
// without the Client reading it: check-file answered, or a hash command allowed.
func (c *Client) hashesWithoutReading() bool {
	return learned(c.hashes.checkFile.Load()) == offered || c.opts.hashCommand && c.commandConn() != nil
}

// readSum hashes n bytes of name from off (n < 0: to the end) by reading them.
func (c *Client) readSum(ctx context.Context, name string, alg HashAlgorithm, off, n int64) ([]byte, error) {
	if c.readOnce() {
		return nil, ErrReadOnce
	}
	f, err := c.Open(ctx, name)
	if err != nil {
		return nil, unwrapPath(err)
	}
	f.callCtx = ctx // its CLOSEs, its siblings' included, within the call's ctx
	return sumFile(ctx, f, alg, off, n)
}

// sumFile hashes n bytes of f from off (n < 0: to the end) while ctx lasts, and
// closes f.
func sumFile(ctx context.Context, f *File, alg HashAlgorithm, off, n int64) ([]byte, error) {
	rs, err := newRunningSum(alg)
	if err != nil {
		f.close(ctx)
		return nil, err
	}
	rs.next = off
	got, err := f.sumTo(ctx, rs, off, n)
	f.close(ctx)
	if err != nil {
		return nil, unwrapPath(err)
	}
	return rs.sum(off + got)
}

// sumTo hashes n bytes of f from off (n < 0: to the end) into rs, whose sum must have
// reached off, while ctx lasts, and returns how many there were. It reads as writeTo
// does, pieces arriving in any order and hashed in order beside the transfer
// (sumfeed.go), without moving f's offset.
func (f *File) sumTo(ctx context.Context, rs *runningSum, off, n int64) (int64, error) {
	if err := f.checkAccess("read", false); err != nil {
		return 0, err
	}
	limit := int64(-1)
	if n >= 0 {
		limit = off + n
	}
	s := f.newReadStream(ctx, off, limit, f.window(), true)
	defer s.close()
	return s.writeAt(&summedDiscard{rs: rs}, off)
}

// summedDiscard is the destination of a read that only hashes: the writers write
// nothing, and the feed hashes each piece from its reply's buffer.
type summedDiscard struct{ rs *runningSum }

func (d *summedDiscard) WriteAt(b []byte, _ int64) (int, error) { return len(b), nil }
func (d *summedDiscard) runningSum() *runningSum                { return d.rs }

// unwrapPath drops a *fs.PathError's wrapping, for a call that wraps its own.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && err == error(pe) {
		return pe.Err
	}
	return err
}
