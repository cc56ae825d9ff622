//go:build linux

package sftp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The File against a model: random sequences of File operations, with sizes and
// offsets around READ/WRITE and window boundaries, run on a remote File and on a local
// *os.File side by side, on every real server of the cross-server suite
// (xsservers_test.go). Every result (n, the class of error, the bytes) must agree, and
// so must the final contents. Small packets (WithMaxPacket) and a small window
// (WithMaxInflight) keep the boundaries cheap to cross.
//
// Where a server differs from a local file in a way docs/servers.md documents, the
// model follows the server (and so asserts the quirk) or the server runs the part of
// the model that applies to it, as fileOpsProfile says.

const (
	opsChunk    = 1024 // WithMaxPacket
	opsInflight = 3    // WithMaxInflight
	opsPerSeq   = 40
)

// fileOpsProfile is how the model runs on one server.
type fileOpsProfile struct {
	// readWrite: the full model on one handle opened read-write. rclone cannot read
	// back through a read-write handle (docs/servers.md; asserted by the cross-server
	// scenario open/read-write) and writes front to back only: it gets a read-only
	// sequence on a file made beforehand, and a sequential write sequence.
	readWrite bool
	// truncateZeroes: paramiko's FSETSTAT truncates by reopening the file "w+", so
	// Truncate(n) leaves n zero bytes.
	truncateZeroes bool
	// reopenAfterTruncate: the server's handle goes on reading what it read before a
	// Truncate through it (TestModelTruncateQuirks asserts each case), so the model
	// goes on with a new handle after one.
	reopenAfterTruncate bool
}

func fileOpsProfileOf(server string) fileOpsProfile {
	switch server {
	case xsRclone, xsRcloneWrites:
		return fileOpsProfile{}
	case xsParamiko:
		return fileOpsProfile{readWrite: true, truncateZeroes: true, reopenAfterTruncate: true}
	case xsProFTPD:
		return fileOpsProfile{readWrite: true, reopenAfterTruncate: true}
	}
	return fileOpsProfile{readWrite: true}
}

// opKinds are the operations each kind of sequence draws from.
var (
	opsReadWrite = []string{"Read", "ReadAt", "Seek", "Write", "WriteAt", "ReadFrom", "WriteTo", "Truncate", "Stat"}
	opsReadOnly  = []string{"Read", "ReadAt", "Seek", "WriteTo", "Stat"}
	opsAppend    = []string{"Write", "ReadFrom"}
)

// fileModel runs one sequence: remote and local are the two files, size what local
// holds.
type fileModel struct {
	t       *testing.T
	log     *modelLog
	rng     *rand.Rand
	prof    fileOpsProfile
	c       *Client
	flag    int
	remote  *File
	local   *os.File
	written int // bytes the sequence has generated, so each write's data differs
	seed    uint64
}

// errClass is what the model compares of an error: its kind, not its text.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case err == io.EOF:
		return "EOF"
	case errors.Is(err, syscall.EINVAL):
		return "EINVAL"
	}
	return "other: " + err.Error()
}

func (m *fileModel) size() int64 {
	fi, err := m.local.Stat()
	require.NoError(m.t, err)
	return fi.Size()
}

func (m *fileModel) pos() int64 {
	p, err := m.local.Seek(0, io.SeekCurrent)
	require.NoError(m.t, err)
	return p
}

// length draws an operation's length: a boundary size, now and then 0.
func (m *fileModel) length() int { return pick(m.rng, boundarySizes(opsChunk, opsInflight)...) }

// offset draws an offset: around the end of the file, or a boundary, or anywhere.
func (m *fileModel) offset() int64 {
	size := m.size()
	switch m.rng.IntN(4) {
	case 0:
		return max(0, size+int64(pick(m.rng, -opsChunk-1, -1, 0, 1, opsChunk+1)))
	case 1:
		return int64(m.length())
	}
	return m.rng.Int64N(size + opsChunk + 1)
}

func (m *fileModel) data(n int) []byte {
	b := randBytes(n, mix(m.seed, uint64(m.written)))
	m.written += n
	return b
}

// same asserts the two sides agreed.
func (m *fileModel) same(what string, rn, ln int64, rerr, lerr error) {
	m.t.Helper()
	require.Equal(m.t, errClass(lerr), errClass(rerr), "%s: error class", what)
	require.Equal(m.t, ln, rn, "%s: n", what)
}

// step applies one operation of kind to both files and compares the outcomes. Each
// is logged before it runs, so a failure's log ends with the operation that failed.
func (m *fileModel) step(kind string) {
	switch kind {
	case "Read":
		m.read()
	case "ReadAt":
		m.readAt()
	case "Seek":
		m.seek()
	case "Write", "ReadFrom":
		m.write(kind == "ReadFrom")
	case "WriteAt":
		m.writeAt()
	case "WriteTo":
		m.writeTo()
	case "Truncate":
		m.truncate()
	case "Stat":
		m.log.add("Stat")
		rfi, rerr := m.remote.Stat()
		lfi, lerr := m.local.Stat()
		require.Equal(m.t, errClass(lerr), errClass(rerr), "Stat")
		require.Equal(m.t, lfi.Size(), rfi.Size(), "Stat: size")
		require.True(m.t, rfi.Mode().IsRegular(), "Stat")
	}
}

func (m *fileModel) read() {
	t, n := m.t, m.length()
	what := fmt.Sprintf("Read(%d) at %d", n, m.pos())
	m.log.add("%s", what)
	p := make([]byte, n)
	var rn int
	var rerr error
	within(t, func() { rn, rerr = m.remote.Read(p) })
	// A Reader may return fewer bytes than asked: the local file reads as many.
	q := make([]byte, rn)
	ln, lerr := io.ReadFull(m.local, q)
	switch {
	case n == 0:
		require.NoError(t, rerr, what)
	case rerr == io.EOF:
		require.Zero(t, rn, what)
		require.GreaterOrEqual(t, m.pos(), m.size(), "%s: EOF before the end", what)
	default:
		require.NoError(t, rerr, what)
		require.Positive(t, rn, what)
		require.NoError(t, lerr, "%s: more than the file holds", what)
	}
	requireSameFileBytes(t, q[:ln], p[:rn], what)
}

func (m *fileModel) readAt() {
	n, off := m.length(), m.offset()
	what := fmt.Sprintf("ReadAt(%d, %d)", n, off)
	m.log.add("%s", what)
	p, q := make([]byte, n), make([]byte, n)
	var rn int
	var rerr error
	within(m.t, func() { rn, rerr = m.remote.ReadAt(p, off) })
	ln, lerr := m.local.ReadAt(q, off)
	m.same(what, int64(rn), int64(ln), rerr, lerr)
	requireSameFileBytes(m.t, q[:ln], p[:rn], what)
}

func (m *fileModel) seek() {
	whence := m.rng.IntN(3)
	off := int64(pick(m.rng, 0, 1, -1, opsChunk, -opsChunk-1, opsChunk*opsInflight+1))
	if whence == io.SeekStart && m.rng.IntN(2) == 0 {
		off = m.offset()
	}
	what := fmt.Sprintf("Seek(%d, %d) from %d", off, whence, m.pos())
	m.log.add("%s", what)
	rp, rerr := m.remote.Seek(off, whence)
	lp, lerr := m.local.Seek(off, whence)
	if lerr != nil {
		rp, lp = 0, 0 // what a failed Seek returns is not its contract
	}
	m.same(what, rp, lp, rerr, lerr)
}

// write is Write, or ReadFrom of a bytes.Reader.
func (m *fileModel) write(readFrom bool) {
	p := m.data(m.length())
	what := fmt.Sprintf("Write(%d) at %d", len(p), m.pos())
	if readFrom {
		what = fmt.Sprintf("ReadFrom(%d) at %d", len(p), m.pos())
	}
	m.log.add("%s", what)
	var rn int64
	var rerr error
	within(m.t, func() {
		if readFrom {
			rn, rerr = m.remote.ReadFrom(bytes.NewReader(p))
			return
		}
		var k int
		k, rerr = m.remote.Write(p)
		rn = int64(k)
	})
	ln, lerr := m.local.Write(p)
	m.same(what, rn, int64(ln), rerr, lerr)
}

func (m *fileModel) writeAt() {
	p, off := m.data(m.length()), m.offset()
	what := fmt.Sprintf("WriteAt(%d, %d)", len(p), off)
	m.log.add("%s", what)
	var rn int
	var rerr error
	within(m.t, func() { rn, rerr = m.remote.WriteAt(p, off) })
	ln, lerr := m.local.WriteAt(p, off)
	m.same(what, int64(rn), int64(ln), rerr, lerr)
}

func (m *fileModel) writeTo() {
	what := fmt.Sprintf("WriteTo from %d", m.pos())
	m.log.add("%s", what)
	var rb, lb bytes.Buffer
	var rn int64
	var rerr error
	within(m.t, func() { rn, rerr = m.remote.WriteTo(&rb) })
	ln, lerr := io.Copy(&lb, m.local)
	m.same(what, rn, ln, rerr, lerr)
	requireSameFileBytes(m.t, lb.Bytes(), rb.Bytes(), what)
}

func (m *fileModel) truncate() {
	size := max(0, m.size()+int64(pick(m.rng, -opsChunk-1, -1, 0, 1, opsChunk+1)))
	if m.rng.IntN(3) == 0 {
		size = int64(m.length())
	}
	what := fmt.Sprintf("Truncate(%d)", size)
	m.log.add("%s", what)
	rerr := m.remote.Truncate(size)
	lerr := m.local.Truncate(size)
	if m.prof.truncateZeroes && lerr == nil {
		// paramiko: the file becomes size zero bytes.
		_, lerr = m.local.WriteAt(make([]byte, size), 0)
	}
	m.same(what, 0, 0, rerr, lerr)
	if m.prof.reopenAfterTruncate {
		m.reopen()
	}
}

// reopen replaces the remote handle by a new one at the same offset.
func (m *fileModel) reopen() {
	t := m.t
	pos := m.pos()
	require.NoError(t, m.remote.Close())
	var err error
	m.remote, err = m.c.OpenFile(testCtx(t), "f", m.flag&^(os.O_CREATE|os.O_TRUNC), 0)
	require.NoError(t, err)
	_, err = m.remote.Seek(pos, io.SeekStart)
	require.NoError(t, err)
}

// requireSameFileBytes says where the remote bytes first differ from the model's.
func requireSameFileBytes(t *testing.T, model, remote []byte, what string) {
	t.Helper()
	if bytes.Equal(model, remote) {
		return
	}
	i := 0
	for i < min(len(model), len(remote)) && model[i] == remote[i] {
		i++
	}
	t.Fatalf("%s: %d bytes, the model's %d; they first differ at %d (remote % x..., model % x...)", what,
		len(remote), len(model), i, remote[i:min(i+8, len(remote))], model[i:min(i+8, len(model))])
}

// run draws and applies opsPerSeq operations of kinds.
func (m *fileModel) run(kinds []string) {
	for range opsPerSeq {
		m.step(pick(m.rng, kinds...))
	}
}

func TestModelFileOps(t *testing.T) {
	seeds := modelSeeds(t, fixedSeeds(3))
	for _, srv := range xsServers {
		t.Run(srv.name, func(t *testing.T) {
			run := srv.begin(t)
			prof := fileOpsProfileOf(srv.name)
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					dir := run.dir(t)
					initial := randBytes(int(mix(seed, 3)%(3*opsChunk*opsInflight)), seed)
					writeLocal(t, filepath.Join(dir, "f"), initial, 0o644)
					c := run.start(t, dir, &xsTap{}, WithMaxPacket(opsChunk), WithMaxInflight(opsInflight))
					if prof.readWrite {
						runFileModel(t, c, dir, seed, prof, os.O_RDWR, opsReadWrite)
						return
					}
					runFileModel(t, c, dir, seed, prof, os.O_RDONLY, opsReadOnly)
					runFileModel(t, c, dir, seed, prof, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, opsAppend)
				})
			}
		})
	}
}

// runFileModel opens dir's "f" with flag remotely and a copy of it locally, runs a
// sequence of kinds on both, and compares the files.
func runFileModel(t *testing.T, c *Client, dir string, seed uint64, prof fileOpsProfile, flag int, kinds []string) {
	t.Helper()
	log := newModelLog(t, seed)
	log.add("flag %#x, kinds %v", flag, kinds)
	served := filepath.Join(dir, "f")
	model := filepath.Join(t.TempDir(), "f")
	writeLocal(t, model, readLocal(t, served), 0o644)
	local, err := os.OpenFile(model, os.O_RDWR|flag&os.O_TRUNC, 0)
	require.NoError(t, err)
	defer local.Close()
	remote, err := c.OpenFile(testCtx(t), "f", flag, 0o644)
	require.NoError(t, err)
	m := &fileModel{t: t, log: log, rng: rand.New(rand.NewPCG(seed, uint64(flag))), prof: prof,
		c: c, flag: flag, remote: remote, local: local, seed: seed}
	m.run(kinds)
	require.NoError(t, m.remote.Close())
	require.True(t, bytes.Equal(readLocal(t, model), readLocal(t, served)), "the final contents differ")
}

// The two servers whose handles read stale data after a Truncate through them
// (fileOpsProfile.reopenAfterTruncate), each case as it happens.
func TestModelTruncateQuirks(t *testing.T) {
	const size = 12290
	for _, srv := range xsServers {
		var probe func(t *testing.T, f *File, data []byte) (stale, fresh []byte)
		switch srv.name {
		case xsProFTPD:
			// Extended by a Truncate through a handle not written through, the file
			// reads EOF through that handle past its old size; another handle reads
			// the zeros.
			probe = func(t *testing.T, f *File, data []byte) ([]byte, []byte) {
				require.NoError(t, f.Truncate(size+1025))
				p := make([]byte, 3)
				n, err := f.ReadAt(p, size+1022)
				require.Equal(t, io.EOF, err, "ProFTPD: past the old size, through the extending handle")
				require.Zero(t, n)
				g, err := f.c.Open(testCtx(t), "f")
				require.NoError(t, err)
				defer g.Close()
				n, err = g.ReadAt(p, size+1022)
				require.NoError(t, err, "another handle")
				return p[:n], make([]byte, 3)
			}
		case xsParamiko:
			// Its handle reads through a buffer: after a Truncate (which zeroes the
			// file, see fileOpsProfile.truncateZeroes) it reads on from the buffer.
			probe = func(t *testing.T, f *File, data []byte) ([]byte, []byte) {
				p := make([]byte, 1024)
				_, err := f.ReadAt(p, 0)
				require.NoError(t, err)
				require.NoError(t, f.Truncate(size))
				_, err = f.ReadAt(p, 1024)
				require.NoError(t, err)
				return p, data[1024:2048]
			}
		default:
			continue
		}
		t.Run(srv.name, func(t *testing.T) {
			run := srv.begin(t)
			dir := run.dir(t)
			data := randBytes(size, 4)
			writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
			c := run.start(t, dir, &xsTap{}, WithMaxPacket(opsChunk))
			f, err := c.OpenFile(testCtx(t), "f", os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			var got, want []byte
			within(t, func() { got, want = probe(t, f, data) })
			require.Equal(t, want, got)
		})
	}
}
