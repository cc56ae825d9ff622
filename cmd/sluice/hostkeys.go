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
	cb      ssh.HostKeyCallback
}

// loadHostKeys reads -known-hosts, or OpenSSH's two default files. Missing files are
// not an error (a new user has none); every host is then unknown.
func loadHostKeys(cfg *config) (*hostKeyDB, error) {
	var names []string
	if cfg.knownHosts != "" {
		names = []string{expandHome(cfg.knownHosts)}
	} else {
		if home, err := os.UserHomeDir(); err == nil {
			names = append(names, filepath.Join(home, ".ssh", "known_hosts"))
		}
		names = append(names, "/etc/ssh/ssh_known_hosts")
	}
	db := &hostKeyDB{}
	for _, n := range names {
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
	db            *hostKeyDB
	acceptUnknown bool
	warn          io.Writer

	// algorithms restricts the host key types the client asks for to those
	// known_hosts lists for this host. Without it x/crypto prefers ECDSA, and a host
	// known by its Ed25519 key (what OpenSSH records first) would look changed.
	algorithms []string

	called bool
	err    error
}

// probeKey matches no known_hosts line; checking it lists the host's known keys.
var probeKey, _ = ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))

func (db *hostKeyDB) checker(addr string, remoteAddr net.Addr, acceptUnknown bool, warn io.Writer) *hostCheck {
	c := &hostCheck{db: db, acceptUnknown: acceptUnknown, warn: warn}
	if db.cb == nil {
		return c
	}
	var ke *knownhosts.KeyError
	if err := db.cb(addr, remoteAddr, probeKey); errors.As(err, &ke) {
		for _, k := range ke.Want {
			for _, a := range hostKeyAlgorithms(k.Key.Type()) {
				if !slices.Contains(c.algorithms, a) {
					c.algorithms = append(c.algorithms, a)
				}
			}
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

func (c *hostCheck) callback(hostname string, remoteAddr net.Addr, key ssh.PublicKey) error {
	c.called = true
	c.err = c.check(hostname, remoteAddr, key)
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
		if c.acceptUnknown {
			fmt.Fprintf(c.warn, "sluice: warning: accepting unknown host %s with key %s (-insecure-accept-unknown-host; not saved)\n", host, offered)
			return nil
		}
		return fmt.Errorf("unknown host %s: its key %s is not in %s; "+
			"check the fingerprint and add the key to known_hosts (e.g. ssh-keyscan), "+
			"or pass -insecure-accept-unknown-host", host, offered, c.db.describe())
	default:
		return fmt.Errorf("checking the host key of %s: %w", host, err)
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
	if c.called || len(c.algorithms) == 0 {
		return ""
	}
	return fmt.Sprintf(" (known_hosts lists only %s keys for this host; if the server no longer has one, its key changed)",
		strings.Join(c.algorithms, ", "))
}
