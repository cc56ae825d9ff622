//go:build linux

package sftp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/sluicehq/sftp/internal/sshfx"
	"github.com/stretchr/testify/require"
)

// Harness: the cross-server suite.
//
// One suite, eight real servers (xsservers_test.go). Every scenario runs against each
// and states what must happen there: where servers differ, the difference is asserted
// rather than skipped, so a change on either side, or in how the client copes with it,
// shows up here. docs/servers.md describes each server's behaviour for users.
//
// This file provides the scenario machinery: xsCase (setup, the call, the outcome
// expected per server or group of servers: xsAll, xsExpect.with), xsEnv (one
// scenario's run on one server) and xsTap (the packets each request sent). Where tests
// go: a behaviour whose outcome depends on the server (paths, links, modes, times,
// extensions) is a scenario in xs_paths_test.go or xs_links_test.go, listed by
// xsScenarios; a new server goes in xsservers_test.go (and internal/realserver) and
// must state an outcome for every scenario (TestCrossServerScenariosComplete).
//
// rclone serves through its VFS, which by default (--vfs-cache-mode off) can only
// write a file front to back and truncates it on every open for writing, reports every
// mode as 0666/0777 less the umask, answers chmod, truncate and hardlink with OK while
// doing nothing, hides symbolic links, and caps READ at 32 KiB. The others serve the
// disk as it is, each with quirks of its own.

// xsEnv is one scenario's run on one server.
type xsEnv struct {
	*testing.T
	ctx    context.Context
	c      *Client
	dir    string // what the server serves, on the local disk
	server string
	tap    *xsTap
}

// local is name, relative to the served directory, on the local disk.
func (e *xsEnv) local(name string) string { return filepath.Join(e.dir, filepath.FromSlash(name)) }

// xsOutcome checks what must hold on one server, given what the scenario's
// operations returned.
type xsOutcome[R any] func(e *xsEnv, got R)

// xsExpect is a scenario's outcome on each server, by name or by group (xsGroup).
type xsExpect[R any] map[string]xsOutcome[R]

// on returns the outcome for server: its own, else its group's; on a server that
// refuses all but uploads (xsDenied), a scenario met with an error must have been
// refused with PERMISSION_DENIED, and one met with none holds as on its group.
func (x xsExpect[R]) on(server string) xsOutcome[R] {
	if o := x[server]; o != nil {
		return o
	}
	group := x[xsGroup[server]]
	if xsDenied[server] {
		return func(e *xsEnv, got R) { xsDeniedOr(e, got, group) }
	}
	return group
}

// xsAll is the expectation of a scenario on which every server agrees.
func xsAll[R any](o xsOutcome[R]) xsExpect[R] {
	x := xsExpect[R]{}
	for _, s := range xsServerNames() {
		if xsDenied[s] {
			x[xsGroup[s]] = o // what holds where nothing was refused
		} else {
			x[s] = o
		}
	}
	return x
}

// with sets o as the outcome on each of servers.
func (x xsExpect[R]) with(o xsOutcome[R], servers ...string) xsExpect[R] {
	for _, s := range servers {
		x[s] = o
	}
	return x
}

func xsServerNames() []string {
	var names []string
	for _, s := range xsSuite() {
		names = append(names, s.name)
	}
	return names
}

type xsScenario struct {
	name string
	// setup makes local files before the server starts: rclone caches listings, so
	// what appears behind its back later may stay invisible to it.
	setup   func(t *testing.T, dir string)
	run     func(e *xsEnv)
	missing []string // servers without an outcome
}

// xsCase is a scenario: do runs the same operations on every server, want says what
// each server's result must be.
func xsCase[R any](name string, setup func(*testing.T, string), do func(*xsEnv) R, want xsExpect[R]) xsScenario {
	var missing []string
	for _, srv := range xsServerNames() {
		if want.on(srv) == nil {
			missing = append(missing, srv)
		}
	}
	return xsScenario{
		name: name, setup: setup, missing: missing,
		run: func(e *xsEnv) {
			got := do(e)
			o := want.on(e.server)
			if o == nil {
				e.Fatalf("no outcome for server %q", e.server)
			}
			o(e, got)
		},
	}
}

func TestCrossServer(t *testing.T) {
	scenarios := xsScenarios()
	for _, srv := range xsSuite() {
		t.Run(srv.name, func(t *testing.T) {
			run := srv.begin(t)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					dir := run.dir(t)
					if sc.setup != nil {
						sc.setup(t, dir)
					}
					tap := &xsTap{}
					c := run.start(t, dir, tap)
					sc.run(&xsEnv{T: t, ctx: testCtx(t), c: c, dir: dir, server: srv.name, tap: tap})
				})
			}
		})
	}
}

// TestCrossServerScenariosComplete keeps every scenario honest: one without an outcome
// for some server would pass there by asserting nothing.
func TestCrossServerScenariosComplete(t *testing.T) {
	seen := map[string]bool{}
	scenarios := xsScenarios()
	require.NotEmpty(t, scenarios)
	for _, sc := range scenarios {
		require.Empty(t, sc.missing, "scenario %s lacks an outcome for these servers", sc.name)
		require.False(t, seen[sc.name], "scenario %s appears twice", sc.name)
		seen[sc.name] = true
	}
}

func xsScenarios() []xsScenario {
	var all []xsScenario
	all = append(all, xsTransferScenarios()...)
	all = append(all, xsPathScenarios()...)
	all = append(all, xsLinkScenarios()...)
	all = append(all, xsOpenScenarios()...)
	all = append(all, xsTreeScenarios()...)
	all = append(all, xsHashScenarios()...)
	all = append(all, xsResumeScenarios()...)
	return all
}

// Packet tap.

// xsTap watches both directions of a Client's pipe and records the type of every
// request and the payload length of every WRITE sent and every DATA received: what
// really crossed, where the Client shows only what it meant to do.
type xsTap struct {
	mu            sync.Mutex
	sent          []sshfx.PacketType
	writes, datas []int
}

// wrap taps one channel's streams: each has framers of its own, so several channels
// may share a tap.
func (tp *xsTap) wrap(r io.ReadCloser, w io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	req, rep := &xsFramer{}, &xsFramer{}
	rep.on = func(h []byte) {
		if sshfx.PacketType(h[4]) == sshfx.TypeData && len(h) >= 13 {
			tp.datas = append(tp.datas, int(binary.BigEndian.Uint32(h[9:])))
		}
	}
	req.on = func(h []byte) {
		tp.sent = append(tp.sent, sshfx.PacketType(h[4]))
		if sshfx.PacketType(h[4]) != sshfx.TypeWrite || len(h) < 13 {
			return
		}
		at := 13 + int(binary.BigEndian.Uint32(h[9:])) + 8 // past the handle and offset
		if len(h) >= at+4 {
			tp.writes = append(tp.writes, int(binary.BigEndian.Uint32(h[at:])))
		}
	}
	return &xsTapReader{r, tp, rep}, &xsTapWriter{w, tp, req}
}

// reset forgets what crossed so far.
func (tp *xsTap) reset() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.sent, tp.writes, tp.datas = nil, nil, nil
}

// requests returns the types of the requests sent since reset, in order.
func (tp *xsTap) requests() []sshfx.PacketType {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.sent)
}

// seen returns the WRITE and DATA payload lengths since reset, each sorted.
func (tp *xsTap) seen() (writes, datas []int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	writes, datas = slices.Clone(tp.writes), slices.Clone(tp.datas)
	slices.Sort(writes)
	slices.Sort(datas)
	return writes, datas
}

type xsTapReader struct {
	io.ReadCloser
	tp  *xsTap
	rep *xsFramer
}

func (r *xsTapReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.tp.mu.Lock()
	r.rep.feed(p[:n])
	r.tp.mu.Unlock()
	return n, err
}

type xsTapWriter struct {
	io.WriteCloser
	tp  *xsTap
	req *xsFramer
}

// Write records p before writing it: the channel's writer goroutine (connwrite.go)
// may return from a Write after the server has answered it, and the call that sent
// it after that; what the call sent must be on record by then.
func (w *xsTapWriter) Write(p []byte) (int, error) {
	w.tp.mu.Lock()
	w.req.feed(p)
	w.tp.mu.Unlock()
	return w.WriteCloser.Write(p)
}

// xsHeadMax covers a WRITE's length, type, id, handle (at most 256 bytes), offset and
// data length.
const xsHeadMax = 4 + 1 + 4 + 4 + 256 + 8 + 4

// xsFramer cuts a byte stream into SFTP packets, however it is split into reads, and
// hands on the first bytes of each (from the length on, up to xsHeadMax).
type xsFramer struct {
	head  []byte
	total int // length of the current packet with its length field; 0 until known
	skip  int // bytes of the current packet past head still to come
	on    func(head []byte)
}

func (f *xsFramer) feed(b []byte) {
	for len(b) > 0 {
		if f.skip > 0 {
			k := min(f.skip, len(b))
			f.skip -= k
			b = b[k:]
			continue
		}
		want := 4
		if f.total > 0 {
			want = min(f.total, xsHeadMax)
		}
		k := min(want-len(f.head), len(b))
		f.head = append(f.head, b[:k]...)
		b = b[k:]
		switch {
		case len(f.head) < want:
		case f.total == 0:
			f.total = 4 + int(binary.BigEndian.Uint32(f.head))
			if f.total < 5 { // no type byte: nothing to report
				f.head, f.total = f.head[:0], 0
			}
		default:
			f.on(f.head)
			f.skip = f.total - len(f.head)
			f.head, f.total = f.head[:0], 0
		}
	}
}

func TestCrossServerFramer(t *testing.T) {
	// Two WRITEs (handle "h1", 5 and 70000 data bytes) and a DATA, passed through in
	// pieces of 1 byte, 3 bytes and all at once, are reported the same. Each side sees
	// the whole stream and reports only its own kind of packet.
	var stream []byte
	stream = appendWrite(stream, 7, "h1", 9, []byte("hello"))
	stream = appendWrite(stream, 8, "h1", 14, make([]byte, 70000))
	stream = binary.BigEndian.AppendUint32(stream, 1+4+4+3)
	stream = append(stream, byte(sshfx.TypeData), 0, 0, 0, 9, 0, 0, 0, 3, 'a', 'b', 'c')
	for _, step := range []int{1, 3, len(stream)} {
		var tp xsTap
		var src io.Reader = bytes.NewReader(stream)
		if step == 1 {
			src = iotest.OneByteReader(src)
		}
		r, w := tp.wrap(io.NopCloser(src), nopWriteCloser{io.Discard})
		for b := stream; len(b) > 0; b = b[min(step, len(b)):] {
			_, err := w.Write(b[:min(step, len(b))])
			require.NoError(t, err)
		}
		_, err := io.Copy(io.Discard, io.LimitReader(r, int64(len(stream))))
		require.NoError(t, err)
		writes, datas := tp.seen()
		require.Equal(t, []sshfx.PacketType{sshfx.TypeWrite, sshfx.TypeWrite, sshfx.TypeData}, tp.requests())
		require.Equal(t, []int{5, 70000}, writes, "step %d", step)
		require.Equal(t, []int{3}, datas, "step %d", step)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// xsChunks is how spans of bytes, each moved on its own, cross in pieces of at most
// chunk bytes when no reply comes back short: sorted, as xsTap.seen.
func xsChunks(chunk int, spans ...int) []int {
	var out []int
	for _, n := range spans {
		for ; n >= chunk; n -= chunk {
			out = append(out, chunk)
		}
		if n > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Transfers.

// xsChunk is the payload per READ and WRITE each server is sent: OpenSSH's sftp-server
// (also behind dropbear) publishes 261120 in limits@openssh.com; the others publish no
// limits, so the client keeps to the 32768 every server must accept, which is also
// rclone's READ cap.
var xsChunk = map[string]int{
	xsOpenSSH: 261120, xsDropbear: 261120,
	xsRclone: 32768, xsRcloneWrites: 32768, xsGreenEnd: 32768, xsProFTPD: 32768, xsAsyncSSH: 32768, xsParamiko: 32768,
}

var xsSizes = []int{0, 1, 32767, 32768, 32769, 261121, 5<<20 + 3}

func xsData(n int) []byte { return randBytes(n, 0x5eed) }

func xsFileOf(n int) func(*testing.T, string) {
	return func(t *testing.T, dir string) { writeLocal(t, filepath.Join(dir, "f"), xsData(n), 0o644) }
}

// xsMoved is what a transfer did.
type xsMoved struct {
	n     int64
	data  []byte // read, or what the local file holds after an upload
	err   error
	sizes []int // DATA or WRITE payload lengths that crossed, sorted
}

func xsDownload(e *xsEnv, read func(f *File) ([]byte, int64, error)) xsMoved {
	f, err := e.c.Open(e.ctx, "f")
	if err != nil {
		return xsMoved{err: err}
	}
	e.tap.reset()
	var m xsMoved
	within(e, func() { m.data, m.n, m.err = read(f) })
	require.NoError(e, f.Close())
	_, m.sizes = e.tap.seen()
	return m
}

// xsDownloaded: want arrived whole, every DATA full but the last. A READ answered
// short would have taught the client a read cap; none was, so it learned none.
func xsDownloaded(want []byte, wantErr error, chunk int) xsOutcome[xsMoved] {
	return func(e *xsEnv, m xsMoved) {
		if xsDenied[e.server] {
			xsRequireDenied(e, m, true)
			return
		}
		require.Equal(e, wantErr, m.err)
		require.Equal(e, int64(len(want)), m.n)
		require.True(e, bytes.Equal(want, m.data), "the bytes differ")
		if readCap := xsReadCap[e.server]; readCap > 0 && len(want) > readCap {
			xsDownloadedCapped(e, m, readCap)
			return
		}
		require.Equal(e, xsChunks(chunk, len(want)), m.sizes, "DATA payloads")
		require.Equal(e, chunk, e.c.Limits().MaxRead)
		require.Equal(e, chunk, e.c.readSize())
		require.Zero(e, e.c.readCap.Load())
	}
}

func xsUpload(e *xsEnv, n int, write func(f *File, data []byte) (int64, error)) xsMoved {
	f, err := e.c.Create(e.ctx, "up")
	require.NoError(e, err)
	e.tap.reset()
	var m xsMoved
	within(e, func() { m.n, m.err = write(f, xsData(n)) })
	m.sizes, _ = e.tap.seen()
	require.NoError(e, f.Close())
	m.data = readLocal(e, e.local("up"))
	return m
}

// xsUploaded: the local file holds want, sent as spans in WRITEs of chunk bytes.
func xsUploaded(want []byte, chunk int, spans ...int) xsOutcome[xsMoved] {
	return func(e *xsEnv, m xsMoved) {
		require.NoError(e, m.err)
		require.Equal(e, int64(len(want)), m.n)
		require.True(e, bytes.Equal(want, m.data), "the file holds %d bytes, not the %d sent", len(m.data), len(want))
		want := xsChunks(chunk, spans...)
		require.Equal(e, want, withoutNonces(m.sizes, want), "WRITE payloads")
		require.Equal(e, chunk, e.c.Limits().MaxWrite)
	}
}

// withoutNonces drops from sizes (sorted) the WRITEs of nonceLen bytes that want does
// not have: the nonces of stripe rounds (reopen.go), when a loaded machine's round
// trips make the client stripe on loopback.
func withoutNonces(sizes, want []int) []int {
	extra := countOf(sizes, nonceLen) - countOf(want, nonceLen)
	if extra <= 0 {
		return sizes
	}
	out := make([]int, 0, len(sizes))
	for _, n := range sizes {
		if n == nonceLen && extra > 0 {
			extra--
			continue
		}
		out = append(out, n)
	}
	return out
}

func countOf(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func xsTransferScenarios() []xsScenario {
	var out []xsScenario
	for _, n := range xsSizes {
		data := xsData(n)
		off := n / 3 // where ReadAt starts; its buffer reaches 100 bytes past the end
		half := n / 2
		perServer := func(o func(chunk int) xsOutcome[xsMoved]) xsExpect[xsMoved] {
			x := xsExpect[xsMoved]{}
			for srv, chunk := range xsChunk {
				x[srv] = o(chunk)
			}
			return x
		}
		size := strconv.Itoa(n)
		out = append(out,
			xsCase("download/WriteTo/"+size, xsFileOf(n), func(e *xsEnv) xsMoved {
				return xsDownload(e, func(f *File) ([]byte, int64, error) {
					var buf bytes.Buffer
					k, err := f.WriteTo(&buf)
					return buf.Bytes(), k, err
				})
			}, perServer(func(chunk int) xsOutcome[xsMoved] { return xsDownloaded(data, nil, chunk) })),

			xsCase("download/ReadAt/"+size, xsFileOf(n), func(e *xsEnv) xsMoved {
				return xsDownload(e, func(f *File) ([]byte, int64, error) {
					p := make([]byte, n-off+100)
					k, err := f.ReadAt(p, int64(off))
					return p[:k], int64(k), err
				})
			}, perServer(func(chunk int) xsOutcome[xsMoved] { return xsDownloaded(data[off:], io.EOF, chunk) })),

			xsCase("download/bufio/"+size, xsFileOf(n), func(e *xsEnv) xsMoved {
				return xsDownload(e, func(f *File) ([]byte, int64, error) {
					br := bufio.NewReaderSize(f, 16<<10)
					var got []byte
					p := make([]byte, 1000) // smaller than bufio's buffer: every fill is a File.Read
					for {
						k, err := br.Read(p)
						got = append(got, p[:k]...)
						if err == io.EOF {
							return got, int64(len(got)), nil
						}
						if err != nil {
							return got, int64(len(got)), err
						}
					}
				})
			}, perServer(func(chunk int) xsOutcome[xsMoved] { return xsDownloaded(data, nil, chunk) })),

			xsCase("upload/ReadFrom/"+size, nil, func(e *xsEnv) xsMoved {
				return xsUpload(e, n, func(f *File, data []byte) (int64, error) { return f.ReadFrom(bytes.NewReader(data)) })
			}, perServer(func(chunk int) xsOutcome[xsMoved] { return xsUploaded(data, chunk, n) })),

			xsCase("upload/Write/"+size, nil, func(e *xsEnv) xsMoved {
				return xsUpload(e, n, func(f *File, data []byte) (int64, error) {
					k, err := f.Write(data)
					return int64(k), err
				})
			}, perServer(func(chunk int) xsOutcome[xsMoved] { return xsUploaded(data, chunk, n) })),

			// Front to back, which is all rclone can write without its cache.
			xsCase("upload/WriteAt/"+size, nil, func(e *xsEnv) xsMoved {
				return xsUpload(e, n, func(f *File, data []byte) (int64, error) {
					k1, err := f.WriteAt(data[:half], 0)
					if err != nil {
						return int64(k1), err
					}
					k2, err := f.WriteAt(data[half:], int64(half))
					return int64(k1 + k2), err
				})
			}, perServer(func(chunk int) xsOutcome[xsMoved] { return xsUploaded(data, chunk, half, n-half) })),
		)
	}
	return out
}

// Asking for bigger packets does not take the client past what rclone is known to
// accept: it publishes no limits@openssh.com, so READs and WRITEs stay at the 32768
// every server must take, rclone's READ cap is never met, and there is nothing to
// learn from short reads.
func TestRcloneMaxPacketStaysAtTheGuarantee(t *testing.T) {
	dir := serverDir(t)
	data := xsData(100000)
	writeLocal(t, filepath.Join(dir, "f"), data, 0o644)
	c := newRcloneClient(t, dir, WithMaxPacket(1<<20))
	ctx := testCtx(t)
	require.Equal(t, Limits{MaxPacket: 34000, MaxRead: 32768, MaxWrite: 32768}, c.Limits())
	got, err := c.ReadFile(ctx, "f")
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
	require.NoError(t, c.WriteFile(ctx, "g", data, 0o644))
	require.True(t, bytes.Equal(data, readLocal(t, filepath.Join(dir, "g"))))
	require.Zero(t, c.readCap.Load())
}
