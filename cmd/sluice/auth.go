package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// defaultIdentities are the key files OpenSSH tries when no -i or IdentityFile is
// given, in its order (minus the obsolete DSA), relative to ~/.ssh.
var defaultIdentities = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

// sshAuth offers what OpenSSH offers, in its order: public keys (the -i and
// IdentityFile keys, then the agent's, then the default key files), then
// keyboard-interactive, then password. Passphrases and passwords are asked on the
// terminal, never taken from the command line.
type sshAuth struct {
	hc     *hostConfig
	prompt *prompter
	files  []keyFile
	agent  agent.ExtendedAgent // nil without a usable SSH_AUTH_SOCK
	conn   net.Conn            // the agent socket, closed after the handshake
	// explicit is set when keys were named (-i, IdentityFile): one that cannot be
	// read is an error then, while a missing default key is not.
	explicit bool
}

// keyFile is a private key file, parsed when the public key step asks for it.
type keyFile struct {
	path   string
	signer ssh.Signer // nil until loaded
	pemErr error      // why it could not be loaded (passphrase refused, ...)
	raw    []byte
}

func newAuth(hc *hostConfig, p *prompter) (*sshAuth, error) {
	a := &sshAuth{hc: hc, prompt: p, explicit: len(hc.identityFiles) > 0}
	names := hc.identityFiles
	if !a.explicit {
		if home, err := os.UserHomeDir(); err == nil {
			for _, n := range defaultIdentities {
				names = append(names, filepath.Join(home, ".ssh", n))
			}
		}
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		switch {
		case err == nil:
			a.files = append(a.files, keyFile{path: n, raw: b})
		case slices.Contains(hc.cliIdentities, n) || a.explicit && !errors.Is(err, fs.ErrNotExist):
			// A -i file that cannot be read is a typo; an IdentityFile from a shared
			// config that does not exist on this machine is skipped, as ssh does.
			return nil, fmt.Errorf("reading key: %w", err)
		}
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" && hc.pubkey {
		if c, err := net.Dial("unix", sock); err == nil {
			a.conn, a.agent = c, agent.NewClient(c)
		}
	}
	return a, nil
}

// methods returns the auth methods in OpenSSH's order. x/crypto tries each method
// name once, so all keys go through one publickey method.
func (a *sshAuth) methods() []ssh.AuthMethod {
	var m []ssh.AuthMethod
	if a.hc.pubkey {
		m = append(m, ssh.PublicKeysCallback(a.signers))
	}
	if a.prompt.usable() && a.hc.kbdInteractive {
		m = append(m, ssh.RetryableAuthMethod(ssh.KeyboardInteractive(a.challenge), a.hc.passwordTries))
	}
	if a.prompt.usable() && a.hc.password {
		m = append(m, ssh.RetryableAuthMethod(ssh.PasswordCallback(a.password), a.hc.passwordTries))
	}
	return m
}

// signers lists the keys to offer: the named files first (the user chose them, and an
// agent full of keys must not use up sshd's MaxAuthTries before them), then the
// agent's (with IdentitiesOnly only those matching a named file), then the default
// files. An encrypted key is asked for on the terminal here, once the host is known.
func (a *sshAuth) signers() ([]ssh.Signer, error) {
	var out []ssh.Signer
	var pubs [][]byte
	for i := range a.files {
		k := &a.files[i]
		if k.signer == nil && k.pemErr == nil {
			k.signer, k.pemErr = a.load(k)
			if k.pemErr != nil && a.explicit {
				// A key the user named and that cannot be used is an error, not
				// something to skip quietly.
				return nil, k.pemErr
			}
		}
		if k.signer != nil {
			out = append(out, k.signer)
			pubs = append(pubs, k.signer.PublicKey().Marshal())
		}
	}
	if a.agent != nil {
		if as, err := a.agent.Signers(); err == nil {
			for _, s := range as {
				if a.hc.identitiesOnly && !containsKey(pubs, s.PublicKey().Marshal()) {
					continue
				}
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

// load parses a key file, asking for its passphrase on the terminal if it has one:
// up to three tries, as ssh gives.
func (a *sshAuth) load(k *keyFile) (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(k.raw)
	var pe *ssh.PassphraseMissingError
	if !errors.As(err, &pe) {
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.path, err)
		}
		return s, nil
	}
	if a.agent != nil && !a.explicit {
		// Like ssh, a default key that needs a passphrase is left to the agent
		// rather than asked for on every run.
		return nil, err
	}
	if !a.prompt.usable() {
		return nil, fmt.Errorf("key %s is protected by a passphrase and there is no terminal to ask on: add it to ssh-agent (ssh-add %s)", k.path, k.path)
	}
	for range 3 {
		pass, perr := a.prompt.secret(fmt.Sprintf("Enter passphrase for key '%s': ", k.path))
		if perr != nil {
			return nil, perr
		}
		if pass == "" {
			return nil, fmt.Errorf("key %s: no passphrase given", k.path)
		}
		s, err = ssh.ParsePrivateKeyWithPassphrase(k.raw, []byte(pass))
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, x509.IncorrectPasswordError) {
			return nil, fmt.Errorf("key %s: %w", k.path, err)
		}
		a.prompt.say("Bad passphrase, try again.\n")
	}
	return nil, fmt.Errorf("key %s: wrong passphrase", k.path)
}

// challenge answers keyboard-interactive prompts on the terminal. The server's
// instruction and prompts are its text: they are shown escaped.
func (a *sshAuth) challenge(name, instruction string, questions []string, echos []bool) ([]string, error) {
	if name != "" || instruction != "" {
		a.prompt.say(strings.TrimSpace(name+"\n"+instruction) + "\n")
	}
	answers := make([]string, len(questions))
	for i, q := range questions {
		var err error
		if echos[i] {
			answers[i], err = a.prompt.line(q)
		} else {
			answers[i], err = a.prompt.secret(q)
		}
		if err != nil {
			return nil, err
		}
	}
	return answers, nil
}

func (a *sshAuth) password() (string, error) {
	return a.prompt.secret(fmt.Sprintf("%s@%s's password: ", a.hc.user, a.hc.hostName))
}

func (a *sshAuth) close() {
	if a.conn != nil {
		_ = a.conn.Close()
	}
}

// noMethodsError explains why nothing could be tried.
func (a *sshAuth) noMethodsError() error {
	if len(a.files) == 0 && a.agent == nil && !a.prompt.usable() {
		return errors.New("no SSH keys and no terminal to ask for a password: give -i KEYFILE, set IdentityFile in ssh_config, or load a key into ssh-agent (SSH_AUTH_SOCK)")
	}
	return nil
}

// expandHome turns a leading "~/" into the home directory, for -i=~/key where the
// shell does not expand it, and for paths in ssh_config.
func expandHome(p string) string {
	if p == "~" {
		if home, err := os.UserHomeDir(); err == nil {
			return home
		}
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}
