package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// defaultIdentities are the key files OpenSSH tries when no -i is given, in its order
// (minus the obsolete DSA), relative to ~/.ssh.
var defaultIdentities = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

// sshAuth holds the keys to offer: -i files (or the default ones) and the agent's.
type sshAuth struct {
	files []ssh.Signer
	agent agent.ExtendedAgent // nil without a usable SSH_AUTH_SOCK
	conn  net.Conn            // the agent socket, closed after the handshake
}

// newAuth loads the -i keys and connects to the agent. A -i key that cannot be used
// is an error; a missing agent or an unreadable default key is not (OpenSSH behaves
// the same way).
func newAuth(cfg *config) (*sshAuth, error) {
	a := &sshAuth{}
	for _, f := range cfg.identities {
		s, err := loadKey(expandHome(f))
		if err != nil {
			return nil, err
		}
		a.files = append(a.files, s)
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			a.conn, a.agent = c, agent.NewClient(c)
		}
	}
	if len(cfg.identities) == 0 {
		if home, err := os.UserHomeDir(); err == nil {
			for _, name := range defaultIdentities {
				if s, err := loadKey(filepath.Join(home, ".ssh", name)); err == nil {
					a.files = append(a.files, s)
				}
			}
		}
	}
	if len(a.files) == 0 && a.agent == nil {
		a.close()
		return nil, errors.New("no SSH keys: give -i KEYFILE, or load a key into ssh-agent (SSH_AUTH_SOCK)")
	}
	return a, nil
}

func loadKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	var pe *ssh.PassphraseMissingError
	if errors.As(err, &pe) {
		// Prompting needs a terminal library; the agent already solves this.
		return nil, fmt.Errorf("key %s is protected by a passphrase: add it to ssh-agent (ssh-add %s) and omit -i", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", path, err)
	}
	return s, nil
}

// methods offers every key through one publickey method: x/crypto tries each method
// name only once, so a second PublicKeys method would never be consulted after the
// first failed. The -i keys go first, as the user chose them, and so that an agent full
// of keys does not use up sshd's MaxAuthTries before them.
func (a *sshAuth) methods() []ssh.AuthMethod {
	return []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		signers := append([]ssh.Signer(nil), a.files...)
		if a.agent != nil {
			// An agent that fails here leaves the file keys usable.
			if as, err := a.agent.Signers(); err == nil {
				signers = append(signers, as...)
			}
		}
		return signers, nil
	})}
}

func (a *sshAuth) close() {
	if a.conn != nil {
		_ = a.conn.Close()
	}
}

// expandHome turns a leading "~/" into the home directory, for -i=~/key where the
// shell does not expand it.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}
