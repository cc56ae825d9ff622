package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every run: a hang fails the test instead of the whole binary.
const testTimeout = 2 * time.Minute

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command in-process, as main would without the exit.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runApp(t, nil, args...)
}

// runApp is runCLI with the app's test hooks set by hook first.
func runApp(t *testing.T, hook func(a *app), args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	var errb lockedBuffer
	a := newApp(&out, &errb)
	if hook != nil {
		hook(a)
	}
	code := a.run(ctx, args)
	return result{code, out.String(), errb.String()}
}

func requireOK(t *testing.T, r result) {
	t.Helper()
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
}

func needLocalServer(t *testing.T) string {
	t.Helper()
	p := findLocalServer()
	if p == "" {
		t.Skip("OpenSSH sftp-server is not installed")
	}
	return p
}

// randomFile writes n random bytes to a new file in dir and returns its path and data.
func randomFile(t *testing.T, dir, name string, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	_, err := rand.Read(data)
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p, data
}

// isolateEnv keeps the user's agent, keys and known_hosts out of a test.
func isolateEnv(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("SSH_AUTH_SOCK", "")
}

// lockedBuffer is a bytes.Buffer for a run in another goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
