//go:build linux

package sftp

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Hash and Verify on every server of the cross-server suite: the digests are right
// everywhere, and each server's means is asserted. ProFTPD answers check-file-name
// (without advertising it) and hashes without a READ crossing; paramiko advertises
// check-file ("md5,sha1") but serves only a request of its own (see checkfile.go),
// so there, as everywhere else, the file is read and hashed here.

// xsHashed is what the hash scenario saw of one Hash.
type xsHashed struct {
	sum   []byte
	by    hashBy
	reads bool // READs crossed
	err   error
}

func xsHashScenarios() []xsScenario {
	file := randBytes(300<<10+7, 21)
	setup := func(t *testing.T, dir string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), file, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "e"), nil, 0o644))
	}
	type hashes struct {
		got       map[string]xsHashed
		checkFile learned
		exts      map[string]string
		rawRange  xsHashed // check-file-name of 5000 bytes from 1000, asked as such
	}
	// The calls: each algorithm over the whole file, a range, a range past the end, an
	// empty file, and a file that is not there.
	do := func(e *xsEnv) hashes {
		h := hashes{got: map[string]xsHashed{}}
		one := func(key, name string, alg HashAlgorithm, off, n int64) {
			e.tap.reset()
			sum, by, err := e.c.remoteSum(e.ctx, name, alg, off, n)
			reads := false
			for _, typ := range e.tap.requests() {
				reads = reads || typ == sshfx.TypeRead
			}
			h.got[key] = xsHashed{sum, by, reads, err}
		}
		for _, alg := range HashAlgorithms() {
			one(string(alg), "f", alg, 0, -1)
		}
		one("range", "f", SHA256, 1000, 5000)
		one("to the end", "f", SHA256, 1000, -1)
		h.rawRange = xsRawCheckFile(e, "f", 1000, 5000)
		one("past the end", "f", SHA256, int64(len(file))-10, 100)
		one("empty", "e", SHA256, 0, -1)
		one("missing", "missing", SHA256, 0, -1)
		h.checkFile = learned(e.c.hashes.checkFile.Load())
		h.exts = e.c.Extensions()
		return h
	}
	right := func(e *xsEnv, h hashes, by hashBy) {
		sums := sumsOf(file)
		for _, alg := range HashAlgorithms() {
			g := h.got[string(alg)]
			require.NoError(e, g.err, alg)
			require.Equal(e, sums[alg], g.sum, alg)
			require.Equal(e, by, g.by, alg)
			require.Equal(e, by == hashByReading, g.reads, "%s: READs crossed", alg)
		}
		r := sha256.Sum256(file[1000:6000])
		require.NoError(e, h.got["range"].err)
		require.Equal(e, r[:], h.got["range"].sum)
		require.Equal(e, hashByReading, h.got["range"].by, "a range that ends before the file is read")
		te := sha256.Sum256(file[1000:])
		require.NoError(e, h.got["to the end"].err)
		require.Equal(e, te[:], h.got["to the end"].sum)
		require.Equal(e, by, h.got["to the end"].by)
		p := sha256.Sum256(file[len(file)-10:])
		require.NoError(e, h.got["past the end"].err)
		require.Equal(e, p[:], h.got["past the end"].sum)
		require.NoError(e, h.got["empty"].err)
		require.Equal(e, SHA256.emptySum(), h.got["empty"].sum)
		if e.server == xsMinIO {
			// MinIO answers an OPEN of a missing object with FAILURE (its driver), and
			// its LSTAT calls any missing name a directory: nothing says "not there".
			var se *StatusError
			require.ErrorAs(e, h.got["missing"].err, &se)
			require.Equal(e, StatusFailure, se.Code)
			return
		}
		require.ErrorIs(e, h.got["missing"].err, os.ErrNotExist)
	}
	reading := func(e *xsEnv, h hashes) {
		right(e, h, hashByReading)
		require.Equal(e, refused, h.checkFile, "learned: no check-file-name")
		require.Equal(e, hashByReading, h.got["empty"].by)
		var se *StatusError
		require.ErrorAs(e, h.rawRange.err, &se)
		require.Equal(e, StatusOpUnsupported, se.Code)
	}
	want := xsAll(reading)
	want[xsProFTPD] = func(e *xsEnv, h hashes) {
		right(e, h, hashByCheckFile)
		require.NotContains(e, h.exts, "check-file", "ProFTPD 1.3.8 does not advertise it in version 3")
		require.Equal(e, offered, h.checkFile)
		// An empty file is an "invalid parameter" (OP_UNSUPPORTED) to ProFTPD: read, and
		// check-file-name stays in use.
		require.Equal(e, hashByReading, h.got["empty"].by)
		// Asked for 5000 bytes from 1000, ProFTPD 1.3.8 hashes 6000 (offset+length):
		// why only ranges to the end are asked of check-file.
		wrong := sha256.Sum256(file[1000:7000])
		require.NoError(e, h.rawRange.err)
		require.Equal(e, wrong[:], h.rawRange.sum)
	}
	want[xsDrop] = func(e *xsEnv, h hashes) {
		// Nothing can be read: every hash is refused, and check-file is not there.
		for key, g := range h.got {
			require.ErrorIs(e, g.err, fs.ErrPermission, key)
		}
		require.ErrorIs(e, h.rawRange.err, errors.ErrUnsupported)
	}
	want[xsSterling] = func(e *xsEnv, h hashes) {
		// The first hash reads the file, and its FSTAT is refused: from then on the
		// Client knows the server lets a file be read once, and will not read again.
		first := HashAlgorithms()[0]
		require.NoError(e, h.got[string(first)].err)
		require.Equal(e, sumsOf(file)[first], h.got[string(first)].sum)
		require.Contains(e, e.c.Capabilities().Refused, RefusedFstat)
		for key, g := range h.got {
			if key != string(first) {
				require.ErrorIs(e, g.err, ErrReadOnce, key)
			}
		}
		require.ErrorIs(e, h.rawRange.err, errors.ErrUnsupported)
	}
	want[xsParamiko] = func(e *xsEnv, h hashes) {
		require.Equal(e, "md5,sha1", h.exts["check-file"], "paramiko advertises its own request")
		reading(e, h)
	}

	// Verify, both ways, a file large enough for several requests.
	type verified struct{ put, get error }
	big := randBytes(1<<20+3, 22)
	doVerify := func(e *xsEnv) verified {
		local := filepath.Join(e.TempDir(), "src")
		require.NoError(e, os.WriteFile(local, big, 0o644))
		var v verified
		c := e.c
		if e.server == xsSterling {
			c = e.connect(WithReadOnce()) // its documented option: a file is read once
		}
		v.put = c.Put(e.ctx, local, "up", Verify(), xsPutOption[e.server])
		if e.server == xsSterling { // the Put was refused: a file for the Get
			require.NoFileExists(e, e.local("up"))
			require.NoFileExists(e, e.local(remotePart("up")))
			require.NoError(e, os.WriteFile(e.local("up"), big, 0o644))
		}
		v.get = c.Get(e.ctx, "up", filepath.Join(e.TempDir(), "down"), Verify())
		return v
	}
	verifiedRight := func(e *xsEnv, v verified) {
		require.NoError(e, v.put)
		require.NoError(e, v.get)
		got, err := os.ReadFile(e.local("up"))
		require.NoError(e, err)
		require.Equal(e, big, got)
	}
	return []xsScenario{
		xsCase("hash", setup, do, want),
		xsCase("verify", nil, doVerify, xsAll(verifiedRight).with(func(e *xsEnv, v verified) {
			// Verify would read the file again, which uses it up: refused before
			// anything moves (the Put left nothing, see doVerify), and the file the
			// Get was to read is still there.
			require.ErrorIs(e, v.put, ErrReadOnce)
			require.ErrorIs(e, v.get, ErrReadOnce)
			require.Equal(e, big, readLocal(e, e.local("up")))
		}, xsSterling)),
	}
}

// xsRawCheckFile sends check-file-name for n bytes of name from off, as this client
// never does (it asks for ranges to the end only), and returns the SHA-256 digest the
// server sent or its error.
func xsRawCheckFile(e *xsEnv, name string, off, n int64) xsHashed {
	var h xsHashed
	err := e.c.main.do(e.ctx, func(dst []byte, id uint32) []byte {
		return appendCheckFileName(dst, id, name, SHA256, off, n)
	}, func(r response) error {
		if r.typ == sshfx.TypeStatus {
			h.err = decodeStatus(r.body)
			return nil
		}
		h.sum, h.err = decodeCheckFile(&r, SHA256)
		h.by = hashByCheckFile
		return nil
	})
	if err != nil {
		return xsHashed{err: err}
	}
	return h
}
