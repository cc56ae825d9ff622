package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// TestDialGivesUpWithCtx: a server that accepts and then says nothing must not hold dial
// past its ctx (sluice.WithDialer's contract, and plain-par's dials).
func TestDialGivesUpWithCtx(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600))
	sshPub, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	j := &job{Addr: ln.Addr().String(), User: "u", KeyFile: keyFile, HostKey: string(ssh.MarshalAuthorizedKey(sshPub))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		c, err := dial(ctx, j)
		if c != nil {
			_ = c.Close()
		}
		done <- err
	}()
	srv := <-accepted // the TCP connection is up; the handshake now waits for the server
	require.NotNil(t, srv)
	defer srv.Close()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(20 * time.Second):
		t.Fatal("dial did not return after its ctx was cancelled")
	}
}
