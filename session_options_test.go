package sftp

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// sessionSSHD starts a private sshd that also offers sftp-server as the subsystem
// "alt-sftp" and accepts the variable SLUICE_TEST_VAR.
func sessionSSHD(t *testing.T) *ssh.Client {
	t.Helper()
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{ExtraConfig: []string{
		"Subsystem alt-sftp " + sshdtest.SFTPServerPath(),
		"AcceptEnv SLUICE_TEST_VAR",
	}})
	sc, err := s.Dial()
	require.NoError(t, err)
	t.Cleanup(func() { sc.Close() })
	return sc
}

func TestSessionOptionsOverSSHD(t *testing.T) {
	sc := sessionSSHD(t)
	ctx := testCtx(t)
	dir := t.TempDir()

	// A subsystem by another name.
	c, err := NewClient(ctx, sc, WithSubsystem("alt-sftp"))
	require.NoError(t, err)
	require.NoError(t, c.WriteFile(ctx, filepath.Join(dir, "alt"), []byte("alt"), 0o644))
	require.NoError(t, c.Close())
	require.Equal(t, "alt", string(readLocal(t, filepath.Join(dir, "alt"))))

	_, err = NewClient(ctx, sc, WithSubsystem("no-such-subsystem"))
	require.ErrorContains(t, err, "no-such-subsystem")

	// A server command, in rclone's server_command style, with a variable set through
	// the session: the command records what it saw before it becomes the server.
	seen := filepath.Join(dir, "seen")
	cmd := `printf %s "$SLUICE_TEST_VAR" > '` + seen + `' && exec ` + sshdtest.SFTPServerPath()
	c, err = NewClient(ctx, sc, WithServerCommand(cmd), WithEnv("SLUICE_TEST_VAR", "it works"), WithChannels(2))
	require.NoError(t, err)
	require.NoError(t, c.WriteFile(ctx, filepath.Join(dir, "cmd"), []byte("cmd"), 0o644))
	fi, err := c.Stat(ctx, filepath.Join(dir, "cmd"))
	require.NoError(t, err)
	require.EqualValues(t, 3, fi.Size())
	require.NoError(t, c.Close())
	require.Equal(t, "it works", string(readLocal(t, seen)))

	// A variable sshd does not accept is an error naming it.
	_, err = NewClient(ctx, sc, WithEnv("SLUICE_REFUSED", "x"))
	require.ErrorContains(t, err, "SLUICE_REFUSED")

	// A command that is no SFTP server fails the handshake, not the caller's wait;
	// WithStderr shows what it said.
	// The session copies stderr on its own goroutine, which may finish after NewClient
	// has returned: wait for the line itself.
	stderr := &lineWatch{want: "no server here\n", seen: make(chan struct{})}
	_, err = NewClient(ctx, sc, WithServerCommand("echo no server here >&2; exit 3"), WithStderr(stderr))
	require.Error(t, err)
	within(t, func() { <-stderr.seen })
}

func TestSessionOptionsAreChecked(t *testing.T) {
	for _, opts := range [][]Option{
		{WithSubsystem("")},
		{WithServerCommand("")},
		{WithSubsystem("a"), WithServerCommand("b")},
		{WithServerCommand("b"), WithSubsystem("a")},
		{WithEnv("", "x")},
		{WithEnv("A=B", "x")},
	} {
		_, err := newClient(opts)
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), "sftp: With"), err.Error())
	}
}

// lineWatch is a writer that closes seen once what was written contains want.
type lineWatch struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}
