package sftp

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sftp/internal/testserver"
)

// ReadFrom's errors say "readfrom", before and during the transfer (see
// TestWriteToErrorsNameWriteTo).
func TestReadFromErrorsNameReadFrom(t *testing.T) {
	c, srv := newTestServerClient(t, testserver.Options{Stall: ofType(testserver.TypeWrite)})
	f, err := c.Create(testCtx(t), "f")
	require.NoError(t, err)
	defer f.Close()
	res := tsGo(func() error { _, err := f.ReadFrom(bytes.NewReader(randBytes(2<<20, 7))); return err })
	tsWaitStalled(t, srv, 1)
	require.NoError(t, f.SetDeadline(time.Now()))
	requireOp(t, tsRecv(t, res, "ReadFrom"), "readfrom")
	_, err = f.ReadFrom(bytes.NewReader([]byte("x")))
	requireOp(t, err, "readfrom")
	srv.ReleaseStalled()
}
