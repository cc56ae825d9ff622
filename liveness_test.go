package sftp

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDoneFiresWhenTheServerDies(t *testing.T) {
	c, p := startServer(t, t.TempDir(), nil)
	select {
	case <-c.Done():
		t.Fatal("Done closed while the server is alive")
	default:
	}
	require.NoError(t, c.Err())

	p.kill(t) // SIGKILL: the pipe's far end closes with the process
	within(t, func() { <-c.Done() })
	err := c.Err()
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, err, errServerClosed, "the cause says the server went away")

	// Every call from then on fails with the same error, at once.
	_, err = c.Stat(testCtx(t), ".")
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, c.Close())
}

func TestDoneFiresOnClose(t *testing.T) {
	c := newServerClient(t, t.TempDir())
	require.NoError(t, c.Close())
	within(t, func() { <-c.Done() })
	require.ErrorIs(t, c.Err(), net.ErrClosed)
	require.True(t, errors.Is(c.Err(), errClientClosed))
}
