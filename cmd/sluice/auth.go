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

	// What the user typed, kept for the session's extra connections (see
	// authMemory): the last password, and the last answers to each
	// keyboard-interactive challenge.
	typedPassword *string
	answers       map[string][]string

	// trace tells -v what is tried; last is the method tried last, which is the one
	// that worked once the login succeeds (x/crypto tries them in order).
	trace func(format string, args ...any)
	last  string
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
	a.agent, a.conn = agentFor(hc)
	return a, nil
}

// methods returns the auth methods in OpenSSH's order. x/crypto tries each method
// name once, so all keys go through one publickey method.
func (a *sshAuth) methods() []ssh.AuthMethod {
	var m []ssh.AuthMethod
	if a.hc.pubkey {
		m = append(m, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			s, err := a.signers()
			a.tried("publickey", "offering %d key(s)", len(s))
			return s, err
		}))
	}
	if a.prompt.usable() && a.hc.kbdInteractive {
		m = append(m, ssh.RetryableAuthMethod(ssh.KeyboardInteractive(func(name, instruction string, questions []string, echos []bool) ([]string, error) {
			a.tried("keyboard-interactive", "%d question(s)", len(questions))
			return a.challenge(name, instruction, questions, echos)
		}), a.hc.passwordTries))
	}
	if a.prompt.usable() && a.hc.password {
		m = append(m, ssh.RetryableAuthMethod(ssh.PasswordCallback(func() (string, error) {
			a.tried("password", "asking")
			return a.password()
		}), a.hc.passwordTries))
	}
	return m
}

// tried records that method is being tried, for -v.
func (a *sshAuth) tried(method, format string, args ...any) {
	a.last = method
	if a.trace != nil {
		a.trace("auth: trying %s: "+format, append([]any{method}, args...)...)
	}
}

// lastMethod is the method tried last: after a successful login, the one that worked.
func (a *sshAuth) lastMethod() string {
	if a.last == "" {
		return "none"
	}
	return a.last
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
	if a.answers == nil {
		a.answers = map[string][]string{}
	}
	a.answers[challengeKey(name, instruction, questions, echos)] = answers
	return answers, nil
}

// challengeKey identifies a keyboard-interactive challenge by everything the server
// sent in it.
func challengeKey(name, instruction string, questions []string, echos []bool) string {
	return fmt.Sprintf("%q %q %q %v", name, instruction, questions, echos)
}

func (a *sshAuth) password() (string, error) {
	pw, err := a.prompt.secret(fmt.Sprintf("%s@%s's password: ", a.hc.user, a.hc.hostName))
	if err == nil {
		a.typedPassword = &pw
	}
	return pw, err
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

// authMemory is what logged the session's first connection in, for the extra
// connections the Client dials for lanes (WithDialer): they must never ask anything,
// so they offer only what needs no question. That is the keys already loaded (an
// encrypted one was decrypted for the first login), the agent's keys, and what the
// user typed for the first login: the password and keyboard-interactive answers.
//
// Keeping a typed password in memory for the session's life is a choice. OpenSSH's
// ControlMaster avoids a second login by running sessions over one connection, which
// is what the extra connections exist to avoid. Without the password, a user whose
// server allows few sessions would get no extra connections at all. The password
// stays in this process's memory, as it already did (Go cannot wipe a string), and is
// sent only to the server that proved, by the same host key the first connection
// accepted, to be the one that took it; it is never written anywhere, and is
// forgotten when the command ends.
type authMemory struct {
	hc       *hostConfig
	keys     []ssh.Signer
	password *string
	answers  map[string][]string
}

// remember keeps what a's successful login used. Call it once the handshake is over:
// x/crypto no longer calls a's methods then.
func (a *sshAuth) remember() *authMemory {
	m := &authMemory{hc: a.hc, password: a.typedPassword, answers: a.answers}
	for _, k := range a.files {
		if k.signer != nil {
			m.keys = append(m.keys, k.signer)
		}
	}
	return m
}

// typed reports whether the memory holds something the user typed: replaying it is
// the kind of login that can fail where the first did not (a one-time code).
func (m *authMemory) typed() bool { return m.password != nil || len(m.answers) > 0 }

// methods are the auth methods of an extra connection, in OpenSSH's order, none of
// which asks anything. ag is a fresh connection to the agent, or nil.
func (m *authMemory) methods(ag agent.ExtendedAgent) []ssh.AuthMethod {
	var out []ssh.AuthMethod
	if m.hc.pubkey {
		out = append(out, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			signers := slices.Clone(m.keys)
			if ag == nil {
				return signers, nil
			}
			var pubs [][]byte
			for _, k := range m.keys {
				pubs = append(pubs, k.PublicKey().Marshal())
			}
			if as, err := ag.Signers(); err == nil {
				for _, s := range as {
					if !m.hc.identitiesOnly || containsKey(pubs, s.PublicKey().Marshal()) {
						signers = append(signers, s)
					}
				}
			}
			return signers, nil
		}))
	}
	if len(m.answers) > 0 && m.hc.kbdInteractive {
		out = append(out, ssh.KeyboardInteractive(func(name, instruction string, questions []string, echos []bool) ([]string, error) {
			if len(questions) == 0 {
				return nil, nil
			}
			if ans, ok := m.answers[challengeKey(name, instruction, questions, echos)]; ok {
				return ans, nil
			}
			return nil, errWouldPrompt
		}))
	}
	if m.password != nil && m.hc.password {
		out = append(out, ssh.Password(*m.password))
	}
	return out
}

// errWouldPrompt ends an extra connection's login where the first one's asked the user
// something new: extra connections never ask.
var errWouldPrompt = errors.New("the login would need an answer from the user")

// agentFor connects to ssh-agent for hc, as newAuth does; nil without one.
func agentFor(hc *hostConfig) (agent.ExtendedAgent, net.Conn) {
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" && hc.pubkey {
		if c, err := net.Dial("unix", sock); err == nil {
			return agent.NewClient(c), c
		}
	}
	return nil, nil
}
