package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The ssh_config algorithm keywords: Ciphers, KexAlgorithms, MACs and
// HostKeyAlgorithms, read as OpenSSH reads them. A value is a comma-separated list,
// each entry a name or a pattern with * and ?:
//
//   - a plain list replaces the defaults;
//   - "+list" appends what it names to the defaults;
//   - "-list" removes what it names from the defaults;
//   - "^list" puts what it names first, the rest of the defaults after.
//
// The defaults are x/crypto's secure algorithms (ssh.SupportedAlgorithms). The ones
// x/crypto implements but calls insecure (ssh.InsecureAlgorithms: arcfour, CBC modes,
// SHA-1 key exchanges and MACs, ssh-dss...) are used only when named exactly: a
// pattern never brings one in. Names x/crypto does not implement (umac-64@openssh.com,
// say, from a file written for OpenSSH's ssh) are left out, as long as something the
// list names is usable; a list that names nothing usable is an error, so a typo does
// not quietly change nothing.

// algorithmKind is one of the keywords: the defaults it starts from and what it is
// called in messages.
type algorithmKind struct {
	keyword string
	noun    string // "cipher", "MAC"...
	secure  func(ssh.Algorithms) []string
}

var (
	cipherKind  = algorithmKind{"Ciphers", "cipher", func(a ssh.Algorithms) []string { return a.Ciphers }}
	kexKind     = algorithmKind{"KexAlgorithms", "key exchange", func(a ssh.Algorithms) []string { return a.KeyExchanges }}
	macKind     = algorithmKind{"MACs", "MAC", func(a ssh.Algorithms) []string { return a.MACs }}
	hostKeyKind = algorithmKind{"HostKeyAlgorithms", "host key algorithm", func(a ssh.Algorithms) []string { return a.HostKeys }}
)

// list applies the value v to the defaults.
func (k algorithmKind) list(v string) ([]string, error) {
	def := slices.Clone(k.secure(ssh.SupportedAlgorithms()))
	insecure := k.secure(ssh.InsecureAlgorithms())
	op := byte(0)
	if v != "" && strings.ContainsRune("+-^", rune(v[0])) {
		op, v = v[0], v[1:]
	}
	entries := strings.Split(v, ",")
	if op == '-' {
		return slices.DeleteFunc(def, func(name string) bool { return matchAny(entries, name) }), nil
	}
	var named []string
	for _, e := range entries {
		for _, name := range def {
			if matchEntry(e, name) && !slices.Contains(named, name) {
				named = append(named, name)
			}
		}
		if slices.Contains(insecure, e) && !slices.Contains(named, e) {
			named = append(named, e)
		}
	}
	if len(named) == 0 {
		return nil, fmt.Errorf("ssh_config: %s: unknown %s %s; want one of %s", k.keyword, k.noun, v, strings.Join(def, ", "))
	}
	switch op {
	case '+': // the defaults keep their order; what they lack goes after them
		return append(def, slices.DeleteFunc(named, func(name string) bool { return slices.Contains(def, name) })...), nil
	case '^':
		return append(named, slices.DeleteFunc(def, func(name string) bool { return slices.Contains(named, name) })...), nil
	}
	return named, nil
}

// matchAny reports whether name matches one of the entries.
func matchAny(entries []string, name string) bool {
	return slices.ContainsFunc(entries, func(e string) bool { return matchEntry(e, name) })
}

// matchEntry matches an OpenSSH pattern (* and ?) against an algorithm name. Names
// hold no '/' or '[', so path.Match's other syntax never comes up; a malformed
// pattern matches nothing.
func matchEntry(pattern, name string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == name
	}
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

// cipherList is the Ciphers keyword's value applied to the defaults.
func cipherList(v string) ([]string, error) { return cipherKind.list(v) }

// applyAlgorithms is the step of KexAlgorithms, MACs or HostKeyAlgorithms: the list
// into the field field returns, nil (x/crypto's defaults) when the keyword is unset.
func applyAlgorithms(k algorithmKind, field func(*hostConfig) *[]string) func(*hostLookup, *hostConfig) error {
	return func(l *hostLookup, hc *hostConfig) error {
		v := l.get(k.keyword)
		if v == "" {
			return nil
		}
		list, err := k.list(v)
		*field(hc) = list
		return err
	}
}

// applyHostKeyAlias: HostKeyAlias names the host in known_hosts instead of its
// address, for lookups and for keys recorded.
func applyHostKeyAlias(l *hostLookup, hc *hostConfig) error {
	hc.hostKeyAlias = l.get("HostKeyAlias")
	return nil
}

// sshAlgorithms is the ssh.Config hc's algorithm keywords make. An unset keyword
// gives x/crypto's secure algorithms, not its defaults: those still take a SHA-1
// key exchange (diffie-hellman-group14-sha1) and hmac-sha1-96, which OpenSSH's ssh
// no longer offers either; a server that needs one is reached by naming it.
func (hc *hostConfig) sshAlgorithms() ssh.Config {
	c := ssh.Config{Ciphers: hc.ciphers, KeyExchanges: hc.kexAlgos, MACs: hc.macs}
	if c.KeyExchanges == nil {
		c.KeyExchanges = ssh.SupportedAlgorithms().KeyExchanges
	}
	if c.MACs == nil {
		c.MACs = ssh.SupportedAlgorithms().MACs
	}
	return c
}
