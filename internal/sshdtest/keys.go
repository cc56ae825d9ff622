package sshdtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"

	"golang.org/x/crypto/ssh"
)

// keyPair is an ed25519 key written to disk in OpenSSH's private key format, so that both
// sshd (host key) and ssh/sftp(1) (client key via -i) can read it.
type keyPair struct {
	signer ssh.Signer
	path   string
}

// newKeyPair generates an ed25519 key and writes it to path with mode 0600: sshd and ssh
// both refuse private keys that others can read.
func newKeyPair(path, comment string) (*keyPair, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshdtest: generating key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, fmt.Errorf("sshdtest: encoding key: %w", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("sshdtest: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("sshdtest: %w", err)
	}
	return &keyPair{signer: signer, path: path}, nil
}
