//go:build linux

package sshdtest

import "golang.org/x/crypto/ssh"

// The pieces below serve launchers of other SSH servers (see internal/realserver), so
// that every test server gets its keys, port and readiness check the same way.

// NewKeyFile generates an ed25519 key, writes it to path in OpenSSH's private key format
// with mode 0600 and returns its signer.
func NewKeyFile(path, comment string) (ssh.Signer, error) {
	kp, err := newKeyPair(path, comment)
	if err != nil {
		return nil, err
	}
	return kp.signer, nil
}

// FreePort returns a loopback port that was free a moment ago. Another process can take
// it before the server binds it, so a launcher retries a start that failed on the port.
func FreePort() (int, error) { return freePort() }

// ProbeBanner connects to addr and reads one line: nil when it is an SSH-2.0
// identification, which proves an SSH server (not some other listener) accepts there.
func ProbeBanner(addr string) error { return probeBanner(addr) }
