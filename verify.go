package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/sluicehq/sftp/internal/localfs"
)

// Verify: each file of a Get or Put is hashed here while its bytes move (sumfeed.go),
// the server is asked for its hash of the file (hash.go), and the part file is renamed
// into place only when the two agree.

// Verify makes Get, Put and PutReader check each file end to end before it takes its
// name: the bytes are hashed here as they move (no second read of anything this call
// moved), the server is asked for its hash of the file it holds (for Put, the part
// file once written and closed; for Get, the source, once received, or beside the
// transfer when a command hashes it), and the part file is renamed into place only
// when the two hashes agree. Otherwise the call fails
// with a *VerifyError naming the file, the algorithm and both hashes, and the part
// file is kept for inspection (remove it to start over: Resume would continue it). A
// resumed file is checked whole: the part's prefix from the earlier run (Get) or the
// local source's (Put) is hashed first.
//
// The algorithm is SHA-256, unless the server hashes another one cheaply and SHA-256
// only by reading (see VerifyWith). How the server's hash is had decides the cost (see
// Client.Hash): with the check-file extension (ProFTPD) or a hash command
// (WithHashCommand: OpenSSH with coreutils, SFTPGo, rclone) only the digest crosses the
// network; otherwise the file is read back from the server after a Put, or a second
// time after a Get, which doubles what the transfer moves. On OpenSSH, enable
// WithHashCommand to make Verify cheap.
//
// What it proves: the file the server holds under the part name (Put), or under the
// source's name (Get), hashes as the bytes sent or received here do, so nothing between
// the two ends (the network, the engine, striping, a resume, the local disk write) lost,
// doubled, reordered or changed a byte. What it does not: the server computes its own
// hash, so a dishonest one can fail a good copy, or pass a bad one it chose to hash as
// expected (it could serve wrong bytes anyway). A Get's source that changes while it is
// copied fails the check. Put in place onto a remote device is not checked; a download
// written in place locally (a device, FIFO or terminal) is checked once written, and a
// failure is reported with the bytes already there.
func Verify() TransferOption {
	return func(o *transferOptions) error { o.verify = true; return nil }
}

// VerifyWith is Verify with the algorithm alg (SHA256, SHA512, SHA1 or MD5), whatever
// the server offers: a server that hashes alg cheaply makes it cheap, else the file is
// read back.
func VerifyWith(alg HashAlgorithm) TransferOption {
	return func(o *transferOptions) error {
		if _, err := alg.newHash(); err != nil {
			return fmt.Errorf("sftp: VerifyWith: %w", err)
		}
		o.verify, o.verifyAlg = true, alg
		return nil
	}
}

// VerifyError is the failure of Verify: the file's hash on the server is not the hash
// of the bytes sent or received. The part file holding those bytes is kept.
type VerifyError struct {
	Op        string        // "get" or "put"
	Path      string        // the remote file: a Get's source, a Put's destination
	Part      string        // the part file kept (local for Get, remote for Put); "" when written in place
	Algorithm HashAlgorithm //
	Local     []byte        // the hash of the bytes this side sent or received
	Remote    []byte        // the server's hash of the file it holds
}

func (e *VerifyError) Error() string {
	kept := ""
	if e.Part != "" {
		kept = "; the part file " + e.Part + " is kept"
	}
	return fmt.Sprintf("sftp: verify %s %s: %s %x here, %x on the server%s", e.Op, e.Path, e.Algorithm, e.Local, e.Remote, kept)
}

// callCheck is a call's choice of algorithm, made by its first file.
type callCheck struct {
	mu  sync.Mutex
	alg HashAlgorithm
}

// checkAlgorithm returns the algorithm the call's files are verified with: the one the
// caller named, else the Client's choice, made once.
func (t *getPutCall) checkAlgorithm(ctx context.Context) HashAlgorithm {
	if t.o.verifyAlg != "" {
		return t.o.verifyAlg
	}
	t.check.mu.Lock()
	defer t.check.mu.Unlock()
	if t.check.alg == "" {
		t.check.alg = t.c.verifyAlgorithm(ctx)
	}
	return t.check.alg
}

// verifyAlgorithm is the algorithm Verify uses by default on c: SHA-256 (with SHA-NI or
// ARMv8's SHA2 the cheapest to hash here), unless the server hashes it only by reading
// back while it runs the command of another one, SHA-512 (as strong), then SHA-1 or
// MD5 (weak against a forger, which the server would need to be, but they catch any
// accident), which keeps the check from costing a second transfer. What the Client
// learns is kept: the choice is made once.
func (c *Client) verifyAlgorithm(ctx context.Context) HashAlgorithm {
	c.hashes.mu.Lock()
	chosen := c.hashes.verify
	c.hashes.mu.Unlock()
	if chosen != "" {
		return chosen
	}
	if !c.opts.hashCommand || c.commandConn() == nil {
		return SHA256 // nothing to learn before the first file: check-file or reading
	}
	if release, first := c.hashes.learn(ctx); first {
		c.learnCheckFile(ctx)
		release()
	}
	alg, sure := SHA256, true
	if learned(c.hashes.checkFile.Load()) != offered {
		alg, sure = c.cheapestCommand(ctx)
	}
	if sure {
		c.hashes.mu.Lock()
		c.hashes.verify = alg
		c.hashes.mu.Unlock()
	}
	return alg
}

// cheapestCommand returns the first algorithm, strongest first, whose command the
// server runs; SHA-256 when none does. sure is false when a probe could not tell.
func (c *Client) cheapestCommand(ctx context.Context) (alg HashAlgorithm, sure bool) {
	sure = true
	for _, a := range HashAlgorithms() {
		switch c.probeCommand(ctx, a) {
		case offered:
			return a, sure
		case unknown:
			sure = false
		}
	}
	return SHA256, sure
}

// fileCheck is the Verify of one file: the running hash of its bytes here, and the
// server's, asked for beside a Get.
type fileCheck struct {
	t      *getPutCall
	rs     *runningSum
	remote chan remoteDigest // a Get's cheap digest under way; nil when none was asked
	cancel context.CancelFunc
}

type remoteDigest struct {
	sum []byte
	ok  bool
	err error
}

// startCheck begins the Verify of a file, nil without Verify. off bytes were moved by
// an earlier run (Resume): they are hashed from r, the local part (Get) or source
// (Put), before the transfer goes on from there.
func (t *getPutCall) startCheck(ctx context.Context, r io.ReaderAt, off int64) (*fileCheck, error) {
	if !t.o.verify {
		return nil, nil
	}
	if err := t.verifyReadOnce(); err != nil {
		return nil, err
	}
	rs, err := newRunningSum(t.checkAlgorithm(ctx))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if err := rs.prefix(r, off); err != nil {
			return nil, err
		}
	}
	return &fileCheck{t: t, rs: rs}, nil
}

// verifyReadOnce is ErrReadOnce where Verify would have to read a file back on a
// server that lets a file be read once, before the transfer opens anything.
func (t *getPutCall) verifyReadOnce() error {
	if t.o.verify && t.c.readOnce() && !t.c.hashesWithoutReading() {
		return ErrReadOnce // the server's hash would use the file up
	}
	return nil
}

// openSource opens a Get's source src, once Verify is known not to need a second
// read of it on a read-once server (where the first uses the file up).
func (t *getPutCall) openSource(ctx context.Context, src string) (*File, error) {
	if err := t.verifyReadOnce(); err != nil {
		return nil, err
	}
	return t.openRemote(ctx, src, os.O_RDONLY, 0)
}

// startGetCheck is startCheck for a Get of src into lf, the local part file named part,
// and asks for the server's hash of src at once. lf is open for writing only: its
// prefix is read through a second handle, checked to be the same file.
func (t *getPutCall) startGetCheck(ctx context.Context, src, part string, lf *os.File, off int64) (*fileCheck, error) {
	k, err := t.partCheck(ctx, part, lf, off)
	if err == nil {
		k.askRemote(ctx, src)
	}
	return k, err
}

func (t *getPutCall) partCheck(ctx context.Context, part string, lf *os.File, off int64) (*fileCheck, error) {
	if !t.o.verify || off == 0 {
		return t.startCheck(ctx, nil, 0)
	}
	fi, err := lf.Stat()
	if err != nil {
		return nil, err
	}
	rf, err := t.local.Root.OpenFile(part, os.O_RDONLY|localfs.OpenFlags, 0)
	if err != nil {
		return nil, t.local.Err(err)
	}
	defer rf.Close()
	if err := localfs.CheckOpened(rf, fi, fs.FileMode.IsRegular); err != nil {
		return nil, pathErr("verify", t.local.Path(part), err)
	}
	return t.startCheck(ctx, rf, off)
}

// askRemote asks the server for its hash of name now, beside the transfer, when the
// server's own process hashes it: a command (WithHashCommand), in a process of its own,
// can hash while the file is read. check-file is asked after the transfer instead: the
// server hashes in the process that serves the transfer's READs (ProFTPD), which would
// only wait for each other (measured: a 256 MiB Get with Verify took 1.6 s asking at
// once, 1.3 s asking after, where the Get alone took 1.3).
func (k *fileCheck) askRemote(ctx context.Context, name string) {
	if k == nil {
		return
	}
	c := k.t.c
	if learned(c.hashes.checkFile.Load()) != refused || !c.opts.hashCommand || c.commandConn() == nil || c.hashes.command(k.rs.alg) == refused {
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	k.cancel = cancel
	k.remote = make(chan remoteDigest, 1)
	go func() {
		sum, _, ok, err := c.cheapSum(rctx, name, k.rs.alg, 0, -1)
		k.remote <- remoteDigest{sum, ok, err}
	}()
}

// stop ends a digest still being asked for, and waits for it: no goroutine outlives
// the file's transfer.
func (k *fileCheck) stop() {
	if k == nil || k.cancel == nil {
		return
	}
	k.cancel()
	if k.remote != nil {
		<-k.remote
		k.remote = nil
	}
}

// local makes lf, the local end of the transfer, hash what the engine moves through it.
func (k *fileCheck) local(lf localFile) localFile {
	if k == nil {
		return lf
	}
	return &summedFile{localFile: lf, rs: k.rs}
}

// reader makes r, the source of a Put or PutReader, hash what the engine sends from
// it, keeping the methods that let it be read at offsets (sizedReaderAt).
func (k *fileCheck) reader(r io.Reader) io.Reader {
	if k == nil {
		return r
	}
	if ra, base, size, ok := sizedReaderAt(r); ok {
		return &summedReaderAt{Reader: r, ReaderAt: ra, Seeker: r.(io.Seeker), total: base + size, rs: k.rs}
	}
	return &summedReader{Reader: r, rs: k.rs}
}

// summedReader and summedReaderAt are a PutReader's source with the running sum the
// engine feeds (sumfeed.go).
type summedReader struct {
	io.Reader
	rs *runningSum
}

func (s *summedReader) runningSum() *runningSum { return s.rs }

type summedReaderAt struct {
	io.Reader
	io.ReaderAt
	io.Seeker
	total int64 // the size sizedReaderAt found, from offset 0
	rs    *runningSum
}

func (s *summedReaderAt) Size() int64             { return s.total }
func (s *summedReaderAt) runningSum() *runningSum { return s.rs }

// writer makes w hash what is written to it, in order: for the transfers that move the
// data in order (small files, destinations written in place).
func (k *fileCheck) writer(w io.Writer) io.Writer {
	if k == nil {
		return w
	}
	return io.MultiWriter(w, k.rs)
}

// hashData hashes data, the whole of a small file sent in one WRITE.
func (k *fileCheck) hashData(data []byte) {
	if k != nil {
		k.rs.write(0, data)
	}
}

// moved checks that the hash covers the total bytes the transfer moved, an earlier
// run's included: the engine hashed every byte it sent or wrote, once, in order.
func (k *fileCheck) moved(total int64) error {
	if k == nil {
		return nil
	}
	_, err := k.rs.sum(total)
	return err
}

// verify compares the hash of the bytes moved with the server's hash of held, the file
// it holds (a Get's source, a Put's part), and fails with a *VerifyError naming path
// and part when they differ. size is how many bytes moved, or -1 when the caller
// checked that already (moved). The server's hash is the one asked for beside the
// transfer, else one had cheaply now, else the file read back (in the call's share of
// the window, as its transfer was).
func (k *fileCheck) verify(ctx context.Context, op, path, held, part string, size int64) error {
	if k == nil {
		return nil
	}
	if size < 0 {
		size = k.rs.next
	}
	local, err := k.rs.sum(size)
	if err != nil {
		return err
	}
	remote, err := k.remoteSum(ctx, held)
	if err != nil {
		return fmt.Errorf("sftp: verify: the server's %s hash of %s: %w", k.rs.alg, held, err)
	}
	if !bytes.Equal(local, remote) {
		return &VerifyError{Op: op, Path: path, Part: part, Algorithm: k.rs.alg, Local: local, Remote: remote}
	}
	return nil
}

func (k *fileCheck) remoteSum(ctx context.Context, name string) ([]byte, error) {
	if k.remote != nil {
		d := <-k.remote
		k.remote = nil
		if d.ok || d.err != nil {
			return d.sum, d.err
		}
	} else if sum, _, ok, err := k.t.c.cheapSum(ctx, name, k.rs.alg, 0, -1); ok || err != nil {
		return sum, err
	}
	if k.t.c.readOnce() {
		return nil, ErrReadOnce
	}
	f, err := k.t.openRemote(ctx, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return sumFile(ctx, f, k.rs.alg, 0, -1)
}

// nothingToKeep reports whether a failed download's part file, holding moved bytes,
// goes: when it holds none, unless it failed its check, as a part that failed its
// check is kept even empty.
func (k *fileCheck) nothingToKeep(moved int64, err error) bool {
	var ve *VerifyError
	return moved == 0 && !(k != nil && errors.As(err, &ve))
}
