package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/sluicehq/sftp"
)

// Hashes: "sluice sum", and put's and get's --verify and --checksum. How the server's
// hash is had is the library's (sftp.Client.Hash): the check-file extension where the
// server answers it, a command such as sha256sum where --hash-command allows it, else
// the file is read and hashed here.

func init() {
	helpPages["sum"] = `Print the hash of remote files (sha256 unless -a says otherwise), one line each as
sha256sum prints them, so that a copy can be checked with sha256sum -c. REMOTE may be a
glob. The server hashes the file where it can: with the check-file extension (ProFTPD),
or by running sha256sum (sha1sum, md5sum...) when --hash-command allows it (OpenSSH,
SFTPGo, rclone); otherwise the file is read and hashed here, which costs what a download
costs. A file that cannot be hashed is reported, the others go on, and the exit status is 1.
  sluice sum box:big.iso > big.iso.sha256         then, beside the copy: sha256sum -c big.iso.sha256
  sluice --hash-command sum -a md5 'box:logs/*'   the server hashes; only the hashes cross`
}

func sumCommand() command {
	return command{"sum [-a sha256|sha512|sha1|md5] REMOTE...", 1, 0, false, func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		alg := fs.String("a", "sha256", "the hash `algorithm`: sha256, sha512, sha1 or md5")
		return func(ctx context.Context, a *app, args []string) error { return a.sum(ctx, args, *alg) }
	}}
}

// registerSums adds put's and get's hash flags.
func (x *xferFlags) registerSums(fs *flag.FlagSet) {
	fs.BoolVar(&x.verify, "verify", false, "check each file end to end: hash it as it moves, compare with the server's hash,\nand give it its name only if they agree (else exit 1, keeping the part file); with\n--hash-command or a server that hashes (ProFTPD) only the hash crosses back, otherwise\nthe file is read again")
	fs.BoolVar(&x.checksum, "checksum", false, "skip files whose destination has the same size and the same hash (content), whatever\ntheir times, like rsync -c; the rest are copied. Both ends are read to hash them")
}

// sumOptions are the library options of --verify and --checksum.
func (x *xferFlags) sumOptions() []sftp.TransferOption {
	var opts []sftp.TransferOption
	if x.verify {
		opts = append(opts, sftp.Verify())
	}
	if x.checksum {
		opts = append(opts, sftp.SkipIdentical())
	}
	return opts
}

// sum prints the hash of each remote file (globs matched) as sha256sum does, so that
// "sluice sum box:f > f.sha256" can be checked locally by "sha256sum -c f.sha256" once
// f is fetched. A file that cannot be hashed is reported and the rest go on; the exit
// status is then 1.
func (a *app) sum(ctx context.Context, args []string, name string) (err error) {
	alg, err := hashAlgorithm(name)
	if err != nil {
		return err
	}
	paths, s, closeFn, err := a.openPaths(ctx, "sum", args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	failed := 0
	for _, p := range paths {
		// Not bounded by --timeout: a hash by reading is a transfer, ended by Ctrl-C.
		d, err := s.client.Hash(ctx, p, alg)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "sluice: sum: %s\n", escapeText(userError(describe(err, p))))
			failed++
			continue
		}
		if _, err := io.WriteString(a.stdout, sumLine(d, p)); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &sumFailed{failed: failed, total: len(paths)}
	}
	return nil
}

// sumFailed ends a sum that could not hash some files, each reported already.
type sumFailed struct{ failed, total int }

func (e *sumFailed) Error() string {
	return fmt.Sprintf("sum: %d of %d files could not be hashed", e.failed, e.total)
}

// hashAlgorithm checks a -a value.
func hashAlgorithm(name string) (sftp.HashAlgorithm, error) {
	var names []string
	for _, alg := range sftp.HashAlgorithms() {
		if string(alg) == strings.ToLower(name) {
			return alg, nil
		}
		names = append(names, string(alg))
	}
	return "", usagef("sum -a %s: unknown algorithm; want one of %s", name, strings.Join(names, ", "))
}

// sumLine is one line of sha256sum's output: the digest, two spaces, the name. As GNU
// coreutils does, a name holding a backslash, a newline or a carriage return is
// written with those escaped (\\, \n, \r) and the line starts with a backslash. Any
// other control character, and invalid UTF-8, is shown escaped as everywhere in sluice
// (\x1b), so a name cannot drive the terminal; sha256sum -c cannot check such a line.
func sumLine(digest []byte, name string) string {
	prefix := ""
	if strings.ContainsAny(name, "\\\n\r") {
		prefix = `\`
		name = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(name)
	}
	return prefix + hex.EncodeToString(digest) + "  " + escapeText(name) + "\n"
}

// streamCheck is --verify for get to standard output: SHA-256 of the bytes as they
// pass, compared with the server's afterwards. (put from standard input goes through
// PutReader, with the library's Verify.)
type streamCheck struct{ h hash.Hash }

func newStreamCheck(verify bool) *streamCheck {
	if !verify {
		return nil
	}
	return &streamCheck{h: sha256.New()}
}

// writer makes w hash what it takes.
func (k *streamCheck) writer(w io.Writer) io.Writer {
	if k == nil {
		return w
	}
	return io.MultiWriter(w, k.h)
}

// check compares the hash of what passed with the server's hash of held, the source:
// a *sftp.VerifyError when they differ.
func (k *streamCheck) check(ctx context.Context, c *sftp.Client, op, path, held, part string) error {
	if k == nil {
		return nil
	}
	remote, err := c.Hash(ctx, held, sftp.SHA256)
	if err != nil {
		return fmt.Errorf("verify: the server's hash: %w", err)
	}
	if local := k.h.Sum(nil); !bytes.Equal(local, remote) {
		return &sftp.VerifyError{Op: op, Path: path, Part: part, Algorithm: sftp.SHA256, Local: local, Remote: remote}
	}
	return nil
}
