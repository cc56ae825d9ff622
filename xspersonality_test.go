//go:build linux

package sftp

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// The personalities of internal/testserver (exported by sftptest) in the cross-server
// suite: each serves the scenario's directory through Options.Root and behaves as the
// service it imitates, from that service's documentation (docs/servers.md). They run
// in process, so they add little to the suite's time.

const (
	xsAWS      = "aws-s3"
	xsAzure    = "azure-blob"
	xsSFTPGo   = "sftpgo-cloud"
	xsMinIO    = "minio"
	xsFilesCom = "files-com"
	xsHetzner  = "hetzner"
	xsDrop     = "drop-folder"
	xsWindows  = "windows-openssh"
	xsSterling = "ibm-sterling"
)

// xsPersonalityServers are the personalities as servers of the suite. They run the
// scenarios (xsSuite), not the model tests of the real servers' file semantics
// (model_fileops_test.go, model_fs_test.go, over xsServers): a personality is as
// POSIX as the service it imitates, which is the point.
var xsPersonalityServers []xsServer

// xsSuite is every server the scenarios run on: the real ones, then the personalities.
func xsSuite() []xsServer { return slices.Concat(xsServers, xsPersonalityServers) }

func init() {
	for _, p := range testserver.Personalities() {
		if p.Name == "openssh" {
			continue // the real one is in the suite
		}
		xsPersonalityServers = append(xsPersonalityServers, xsServer{p.Name, xsEach(xsPersonalityStarter(p.Options))})
		xsGroup[p.Name] = xsOnDisk
	}
	for _, s := range []string{xsAWS, xsAzure, xsSFTPGo, xsMinIO, xsFilesCom, xsHetzner, xsSterling} {
		xsChunk[s] = 32768 // no limits@openssh.com advertised
	}
	xsChunk[xsDrop], xsChunk[xsWindows] = 261120, 261120
}

// xsPersonalityStarter serves dir with the personality's Options.
func xsPersonalityStarter(options func() testserver.Options) func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
	return func(t *testing.T, dir string, tap *xsTap, opts ...Option) *Client {
		root, err := os.OpenRoot(dir)
		require.NoError(t, err)
		o := options()
		o.Root = root
		srv := testserver.New(o)
		t.Cleanup(func() {
			srv.Close()
			root.Close()
		})
		var r io.ReadCloser
		var w io.WriteCloser
		r, w = srv.Conn()
		if tap != nil {
			r, w = tap.wrap(r, w)
		}
		c, err := NewClientPipe(testCtx(t), r, w, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// xsMadeUpStatVFS: the figures internal/testserver makes up for statvfs.
func xsMadeUpStatVFS(e *xsEnv, r xsRes[*StatVFS]) {
	require.NoError(e, r.err)
	require.EqualValues(e, 1<<24, r.v.Blocks)
	require.EqualValues(e, 255, r.v.NameMax)
}

// xsReadCap is a personality's READ cap below what limits@openssh.com says.
var xsReadCap = map[string]int{xsWindows: 102400}

// xsDownloadedCapped: the server answered short at readCap though its limits said
// more; the client learned the cap once the file went on past a short DATA.
func xsDownloadedCapped(e *xsEnv, m xsMoved, readCap int) {
	total := 0
	for _, n := range m.sizes {
		require.LessOrEqual(e, n, readCap)
		total += n
	}
	require.EqualValues(e, len(m.data), total)
	require.EqualValues(e, readCap, e.c.readCap.Load())
}

// xsWindowsRealPath: lexical, under the drive ("/C:/").
func xsWindowsRealPath(e *xsEnv, got map[string]xsRes[string]) {
	for n, want := range map[string]string{".": "/C:/", "f": "/C:/f", "missing": "/C:/missing", "missing/x": "/C:/missing/x", "a/../b": "/C:/b"} {
		require.NoError(e, got[n].err, n)
		require.Equal(e, want, got[n].v, n)
	}
}

// openRefused: OPEN with READ and WRITE is refused (OP_UNSUPPORTED).
func openRefused(e *xsEnv, rw readWrite) {
	require.ErrorIs(e, rw.open, errors.ErrUnsupported)
	require.NoFileExists(e, e.local("rw"))
}

func xsTruncateRefused(e *xsEnv, err error) {
	require.ErrorIs(e, err, errors.ErrUnsupported)
	require.Equal(e, []byte("0123456789"), readLocal(e, e.local("f")))
}

// xsMissingRefusing: as on OpenSSH, but the named operations are refused
// (OP_UNSUPPORTED) whether the name exists or not.
func xsMissingRefusing(refused ...string) xsOutcome[map[string]error] {
	return func(e *xsEnv, errs map[string]error) {
		for _, op := range refused {
			require.ErrorIs(e, errs[op], errors.ErrUnsupported, op)
		}
		xsRequireMissing(e, errs, "No such file", refused...)
	}
}

// xsDenied are the servers on which an account may only upload: a scenario without
// an outcome of their own must have been refused with PERMISSION_DENIED.
var xsDenied = map[string]bool{xsDrop: true}

// xsDeniedOr: where got (whatever the scenario returned) holds errors, each is a
// refusal (fs.ErrPermission); where it holds none, the outcome other holds.
func xsDeniedOr[R any](e *xsEnv, got R, other xsOutcome[R]) {
	if xsRequireDenied(e, got, false) {
		return
	}
	require.NotNil(e, other, "nothing was refused, and the group states no outcome")
	other(e, got)
}

// xsRequireDenied: every error in got is a refusal (fs.ErrPermission); with must,
// there is at least one. It reports whether there was one.
func xsRequireDenied(e *xsEnv, got any, must bool) bool {
	var errs []error
	if t := reflect.TypeOf(got); t != nil {
		v := reflect.New(t) // addressable, so unexported fields can be read
		v.Elem().Set(reflect.ValueOf(got))
		xsErrors(v.Elem(), &errs)
	}
	if must {
		require.NotEmpty(e, errs, "nothing was refused")
	}
	for _, err := range errs {
		require.ErrorIs(e, err, fs.ErrPermission)
	}
	return len(errs) > 0
}

var errorType = reflect.TypeFor[error]()

// xsErrors collects the non-nil errors in v: itself, its fields, elements and values.
func xsErrors(v reflect.Value, errs *[]error) {
	if !v.IsValid() {
		return
	}
	if v.Type().Implements(errorType) || v.Type() == errorType {
		if v.Kind() == reflect.Interface && v.IsNil() || (v.Kind() == reflect.Pointer && v.IsNil()) {
			return
		}
		if err, ok := v.Interface().(error); ok && err != nil {
			*errs = append(*errs, err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			xsErrors(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), errs)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			xsErrors(v.Index(i), errs)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			c := reflect.New(v.Type().Elem()).Elem() // addressable copy
			c.Set(v.MapIndex(k))
			xsErrors(c, errs)
		}
	}
}
