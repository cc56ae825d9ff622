package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeyDB is the known_hosts files in use.
type hostKeyDB struct {
	files   []string // loaded
	missing []string // named but absent: every host is unknown to them
	write   string   // where a newly accepted key goes: the first user file
	cb      ssh.HostKeyCallback
}

// loadHostKeys reads the known_hosts files of hc: the user's (UserKnownHostsFile or
// -known-hosts) and the system's. Missing files are not an error (a new user has none);
// every host is then unknown.
func loadHostKeys(hc *hostConfig) (*hostKeyDB, error) {
	db := &hostKeyDB{}
	if len(hc.knownHosts) > 0 {
		db.write = hc.knownHosts[0]
	}
	for _, n := range append(slices.Clone(hc.knownHosts), hc.globalKnown...) {
		_, err := os.Stat(n)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			db.missing = append(db.missing, n)
		case err != nil:
			return nil, fmt.Errorf("known_hosts: %w", err)
		default:
			db.files = append(db.files, n)
		}
	}
	if len(db.files) > 0 {
		cb, err := knownhosts.New(db.files...)
		if err != nil {
			return nil, fmt.Errorf("reading known_hosts: %w", err)
		}
		db.cb = cb
	}
	return db, nil
}

// hostCheck verifies one connection's host key. err keeps the reason for a refusal,
// because x/crypto wraps the callback's error in handshake noise.
type hostCheck struct {
	db     *hostKeyDB
	hc     *hostConfig
	prompt *prompter
	warn   io.Writer

	// algorithms restricts the host key types the client asks for to those
	// known_hosts lists for this host. Without it x/crypto prefers ECDSA, and a host
	// known by its Ed25519 key (what OpenSSH records first) would look changed.
	// HostKeyAlgorithms orders them, and is the list when known_hosts has none.
	algorithms []string
	known      []string // the algorithms of the keys known_hosts lists for the host
	// name is what known_hosts knows the host by: its address, or HostKeyAlias.
	name string

	called   bool
	err      error
	accepted ssh.PublicKey // the key that passed, for the session's extra connections
}

// probeKey matches no known_hosts line; checking it lists the host's known keys.
var probeKey, _ = ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))

func (db *hostKeyDB) checker(addr string, remoteAddr net.Addr, hc *hostConfig, p *prompter, warn io.Writer) *hostCheck {
	c := &hostCheck{db: db, hc: hc, prompt: p, warn: warn, name: addr}
	if hc.hostKeyAlias != "" {
		// As OpenSSH: the alias alone, without the port, names the host's lines.
		c.name = net.JoinHostPort(hc.hostKeyAlias, "22")
	}
	var known []string
	var ke *knownhosts.KeyError
	if db.cb != nil && errors.As(db.cb(c.name, remoteAddr, probeKey), &ke) {
		for _, k := range ke.Want {
			for _, a := range hostKeyAlgorithms(k.Key.Type()) {
				if !slices.Contains(known, a) {
					known = append(known, a)
				}
			}
		}
	}
	c.algorithms, c.known = known, known
	if hc.hostKeyAlgos != nil {
		c.algorithms = slices.DeleteFunc(slices.Clone(hc.hostKeyAlgos), func(a string) bool {
			return len(known) > 0 && !slices.Contains(known, a)
		})
		if len(c.algorithms) == 0 {
			c.algorithms = hc.hostKeyAlgos // the key offered is then checked, and refused, as changed
		}
	}
	return c
}

// hostKeyAlgorithms lists the signature algorithms that can prove a key of type t:
// an RSA key signs with SHA-2 (preferred) or SHA-1.
func hostKeyAlgorithms(t string) []string {
	if t == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{t}
}

func (c *hostCheck) callback(_ string, remoteAddr net.Addr, key ssh.PublicKey) error {
	c.called = true
	c.err = c.check(c.name, remoteAddr, key)
	if c.err == nil {
		c.accepted = key
	}
	return c.err
}

func (c *hostCheck) check(hostname string, remoteAddr net.Addr, key ssh.PublicKey) error {
	host := knownhosts.Normalize(hostname)
	offered := key.Type() + " " + ssh.FingerprintSHA256(key)
	var err error
	if c.db.cb != nil {
		if err = c.db.cb(hostname, remoteAddr, key); err == nil {
			return nil
		}
	}
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("host key %s of %s is marked @revoked in %s:%d: refusing", offered, host, re.Revoked.Filename, re.Revoked.Line)
	case errors.As(err, &ke) && len(ke.Want) > 0:
		var had []string
		for _, k := range ke.Want {
			had = append(had, fmt.Sprintf("%s:%d has %s %s", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
		}
		return fmt.Errorf("HOST KEY MISMATCH for %s: the server offered %s, but %s. "+
			"Someone may be intercepting the connection, or the host key was replaced: refusing. "+
			"If the change is expected, remove the old line from known_hosts",
			host, offered, strings.Join(had, "; "))
	case err == nil || errors.As(err, &ke):
		return c.unknown(host, offered, key)
	default:
		return fmt.Errorf("checking the host key of %s: %w", host, err)
	}
}

// unknown decides about a host known_hosts does not list, by StrictHostKeyChecking:
// yes refuses, accept-new and no accept and record the key, ask asks on the terminal
// (and refuses without one). -insecure-accept-unknown-host accepts without recording.
func (c *hostCheck) unknown(host, offered string, key ssh.PublicKey) error {
	if c.hc.insecure {
		fmt.Fprintf(c.warn, "sluice: warning: accepting unknown host %s with key %s (-insecure-accept-unknown-host; not saved)\n", host, offered)
		return nil
	}
	switch c.hc.strict {
	case "accept-new", "no":
		return c.record(host, key)
	case "ask":
		if c.prompt.usable() {
			c.prompt.say(fmt.Sprintf("The authenticity of host '%s' can't be established.\n%s key fingerprint is %s.\n",
				host, keyName(key), ssh.FingerprintSHA256(key)))
			for {
				ans, err := c.prompt.line("Are you sure you want to continue connecting (yes/no/[fingerprint])? ")
				if err != nil {
					return err
				}
				switch ans = strings.TrimSpace(ans); {
				case strings.EqualFold(ans, "yes") || ans == ssh.FingerprintSHA256(key):
					return c.record(host, key)
				case strings.EqualFold(ans, "no"):
					return fmt.Errorf("host key of %s not accepted", host)
				}
				c.prompt.say("Please type 'yes', 'no' or the fingerprint: ")
			}
		}
	}
	return fmt.Errorf("unknown host %s: its key %s is not in %s; "+
		"check the fingerprint and accept it with -o StrictHostKeyChecking=accept-new "+
		"(or answer the prompt on a terminal), or add it with ssh-keyscan", host, offered, c.db.describe())
}

// record appends key for host to the user's known_hosts in OpenSSH's format, hashed
// when HashKnownHosts is set, creating the file (and ~/.ssh) if needed.
func (c *hostCheck) record(host string, key ssh.PublicKey) error {
	if c.db.write == "" {
		return fmt.Errorf("no known_hosts file to record the key of %s in (UserKnownHostsFile none)", host)
	}
	if err := checkKnownHostsName(host); err != nil {
		return err
	}
	name := host
	if c.hc.hashKnownHosts {
		name = knownhosts.HashHostname(host)
	}
	line := knownhosts.Line([]string{name}, key) + "\n"
	if err := os.MkdirAll(filepath.Dir(c.db.write), 0o700); err != nil {
		return fmt.Errorf("recording the host key: %w", err)
	}
	f, err := os.OpenFile(c.db.write, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("recording the host key: %w", err)
	}
	// A file whose last line lacks its newline would have the new line glued on.
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if r, err := os.Open(c.db.write); err == nil {
			if _, err := r.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
				line = "\n" + line
			}
			r.Close()
		}
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("recording the host key in %s: %w", c.db.write, err)
	}
	fmt.Fprintf(c.warn, "sluice: warning: permanently added %s (%s) to the list of known hosts in %s\n", host, keyName(key), c.db.write)
	return nil
}

// keyName is OpenSSH's short name for a key type: ED25519, ECDSA, RSA.
func keyName(k ssh.PublicKey) string {
	switch t := k.Type(); {
	case t == ssh.KeyAlgoED25519:
		return "ED25519"
	case strings.HasPrefix(t, "ecdsa-"):
		return "ECDSA"
	case t == ssh.KeyAlgoRSA:
		return "RSA"
	default:
		return t
	}
}

// describe names the files consulted, for messages.
func (db *hostKeyDB) describe() string {
	var parts []string
	if len(db.files) > 0 {
		parts = append(parts, strings.Join(db.files, " or "))
	}
	for _, m := range db.missing {
		parts = append(parts, m+" (which does not exist)")
	}
	return strings.Join(parts, " or ")
}

// handshakeHint explains a handshake failure that happened before the host key was
// seen while the key types were restricted: the server offers none of the known ones.
func (c *hostCheck) handshakeHint() string {
	if c.called || len(c.known) == 0 {
		return ""
	}
	return fmt.Sprintf(" (known_hosts lists only %s keys for this host; if the server no longer has one, its key changed)",
		strings.Join(c.known, ", "))
}
