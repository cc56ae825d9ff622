package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resolving one host's settings: the operand, the flags, ssh_config and the defaults,
// one keyword at a time. Each keyword is a step in hostKeywords, which says where its
// value comes from and how it lands in hostConfig; the order of the table is the order
// the steps run in, since some values use others (%h, %p and %r in IdentityFile,
// UserKnownHostsFile and GlobalKnownHostsFile need HostName, Port and User first).

// hostLookup is what a step reads: the operand, the command line, ssh_config for the
// alias, and whether the host is a jump host (hop), which takes only its operand and
// ssh_config: the flags are the final host's.
type hostLookup struct {
	r     remote
	cfg   *config
	c     *sshConfig
	alias string
	hop   bool
}

// get is the first value of keyword for the alias: -o first, then the files.
func (l *hostLookup) get(keyword string) string { return l.c.get(l.alias, keyword) }

// flag reports whether the command line's value of a shared flag applies: it is the
// final host's, never a jump host's.
func (l *hostLookup) flag(set bool) bool { return set && !l.hop }

// yes reads a yes/no keyword, def when it is not set.
func (l *hostLookup) yes(keyword string, def bool) (bool, error) {
	switch v := strings.ToLower(l.get(keyword)); v {
	case "":
		return def, nil
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	default:
		return false, fmt.Errorf("ssh_config: %s %s: want yes or no", keyword, v)
	}
}

// hostStep applies one keyword to hc.
type hostStep struct {
	keyword string
	apply   func(l *hostLookup, hc *hostConfig) error
}

// hostKeywords are the steps of resolveHost, in the order they run.
var hostKeywords = []hostStep{
	{"HostName", applyHostName},
	{"Port", applyPort},
	{"User", applyUser},
	{"IdentityFile", applyIdentityFiles},
	{"IdentitiesOnly", yesNo("IdentitiesOnly", false, func(hc *hostConfig) *bool { return &hc.identitiesOnly })},
	{"BatchMode", yesNo("BatchMode", false, func(hc *hostConfig) *bool { return &hc.batch })},
	{"PasswordAuthentication", yesNo("PasswordAuthentication", true, func(hc *hostConfig) *bool { return &hc.password })},
	{"KbdInteractiveAuthentication", yesNo("KbdInteractiveAuthentication", true, func(hc *hostConfig) *bool { return &hc.kbdInteractive })},
	{"PubkeyAuthentication", yesNo("PubkeyAuthentication", true, func(hc *hostConfig) *bool { return &hc.pubkey })},
	{"HashKnownHosts", yesNo("HashKnownHosts", false, func(hc *hostConfig) *bool { return &hc.hashKnownHosts })},
	{"NumberOfPasswordPrompts", applyPasswordPrompts},
	{"ProxyJump", applyProxy},
	{"UserKnownHostsFile", applyUserKnownHosts},
	{"GlobalKnownHostsFile", applyGlobalKnownHosts},
	{"StrictHostKeyChecking", applyStrict},
	{"ConnectTimeout", seconds("ConnectTimeout", func(hc *hostConfig) *time.Duration { return &hc.connectTimeout })},
	{"ServerAliveInterval", applyAliveInterval},
	{"ServerAliveCountMax", applyAliveCountMax},
	{"Ciphers", applyCiphers},
	{"KexAlgorithms", applyAlgorithms(kexKind, func(hc *hostConfig) *[]string { return &hc.kexAlgos })},
	{"MACs", applyAlgorithms(macKind, func(hc *hostConfig) *[]string { return &hc.macs })},
	{"HostKeyAlgorithms", applyAlgorithms(hostKeyKind, func(hc *hostConfig) *[]string { return &hc.hostKeyAlgos })},
	{"HostKeyAlias", applyHostKeyAlias},
}

// resolveHost works out hc for r: the operand's user and port win, then the flags,
// then ssh_config, then the defaults. A jump host (hop is true) takes only its
// operand and ssh_config: the flags are the final host's.
func (a *app) resolveHost(r remote, hop bool) (*hostConfig, error) {
	if err := a.checkCLINames(r, hop); err != nil {
		return nil, err
	}
	l := &hostLookup{r: r, cfg: a.cfg, c: a.sshCfg, alias: r.Host, hop: hop}
	hc := &hostConfig{alias: r.Host, insecure: l.flag(a.cfg.acceptUnknown)}
	for _, s := range hostKeywords {
		if err := s.apply(l, hc); err != nil {
			return nil, err
		}
	}
	return hc, nil
}

// checkCLINames checks what the command line gave before any %-token can carry it
// into a ProxyCommand (a shell) or a file name.
func (a *app) checkCLINames(r remote, hop bool) error {
	if err := checkCLIName("host", r.Host); err != nil {
		return usagef("%v", err)
	}
	if err := checkCLIName("user", r.User); err != nil {
		return usagef("%v", err)
	}
	if a.cfg.user != "" && !hop {
		if err := checkCLIName("user", a.cfg.user); err != nil {
			return usagef("-l: %v", err)
		}
	}
	return nil
}

func applyHostName(l *hostLookup, hc *hostConfig) error {
	hc.hostName = l.alias
	if h := l.get("HostName"); h != "" {
		hc.hostName = expandTokens(h, hc, nil)
	}
	return nil
}

func applyPort(l *hostLookup, hc *hostConfig) error {
	switch v := l.get("Port"); {
	case l.r.Port != 0:
		hc.port = l.r.Port
	case l.flag(l.cfg.port != 0):
		hc.port = l.cfg.port
	case v != "":
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("ssh_config: Port %q for %s: want 1 to 65535", v, l.alias)
		}
		hc.port = p
	default:
		hc.port = 22
	}
	return nil
}

func applyUser(l *hostLookup, hc *hostConfig) error {
	switch v := l.get("User"); {
	case l.r.User != "":
		hc.user = l.r.User
	case l.flag(l.cfg.user != ""):
		hc.user = l.cfg.user
	case v != "":
		hc.user = v
	default:
		u, err := localUser()
		if err != nil {
			return fmt.Errorf("no SSH user: give user@host or -l (%v)", err)
		}
		hc.user = u
	}
	return nil
}

// applyIdentityFiles takes the -i files first (they must exist), then IdentityFile.
func applyIdentityFiles(l *hostLookup, hc *hostConfig) error {
	var ids []string
	if !l.hop {
		for _, f := range l.cfg.identities {
			ids = append(ids, expandHome(f))
		}
		hc.cliIdentities = slices.Clone(ids)
	}
	for _, f := range l.c.getAll(l.alias, "IdentityFile") {
		if !strings.EqualFold(f, "none") {
			ids = append(ids, expandTokens(f, hc, nil))
		}
	}
	hc.identityFiles = ids
	return nil
}

// yesNo is the step of a yes/no keyword stored in the field field returns.
func yesNo(keyword string, def bool, field func(*hostConfig) *bool) func(*hostLookup, *hostConfig) error {
	return func(l *hostLookup, hc *hostConfig) error {
		v, err := l.yes(keyword, def)
		*field(hc) = v
		return err
	}
}

// seconds is the step of a keyword giving whole seconds, 0 when not set.
func seconds(keyword string, field func(*hostConfig) *time.Duration) func(*hostLookup, *hostConfig) error {
	return func(l *hostLookup, hc *hostConfig) error {
		v := l.get(keyword)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("ssh_config: %s %q: want seconds", keyword, v)
		}
		*field(hc) = time.Duration(n) * time.Second
		return nil
	}
}

func applyPasswordPrompts(l *hostLookup, hc *hostConfig) error {
	hc.passwordTries = 3
	if v := l.get("NumberOfPasswordPrompts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("ssh_config: NumberOfPasswordPrompts %q: want a number", v)
		}
		hc.passwordTries = n
	}
	return nil
}

// applyProxy takes ProxyJump (-J first) and ProxyCommand.
func applyProxy(l *hostLookup, hc *hostConfig) error {
	if l.flag(l.cfg.jump != "") {
		hc.proxyJump = l.cfg.jump
	} else if j := l.get("ProxyJump"); !strings.EqualFold(j, "none") {
		hc.proxyJump = j
	}
	if pc := l.get("ProxyCommand"); pc != "" && !strings.EqualFold(pc, "none") {
		hc.proxyCommand = pc
	}
	if hc.proxyJump != "" && hc.proxyCommand != "" {
		// OpenSSH takes whichever comes first; sluice cannot tell the order of two
		// keywords, so it refuses rather than guess.
		return fmt.Errorf("both ProxyJump and ProxyCommand apply to %s: keep one", l.alias)
	}
	return nil
}

// fileList expands a space-separated list of files, leaving out "none".
func fileList(v string, hc *hostConfig) []string {
	var out []string
	for _, f := range strings.Fields(v) {
		if f != "none" {
			out = append(out, expandTokens(f, hc, nil))
		}
	}
	return out
}

func applyUserKnownHosts(l *hostLookup, hc *hostConfig) error {
	switch v := l.get("UserKnownHostsFile"); {
	case l.flag(l.cfg.knownHosts != ""):
		hc.knownHosts = []string{expandHome(l.cfg.knownHosts)}
	case v != "":
		hc.knownHosts = fileList(v, hc)
	default:
		if home, err := os.UserHomeDir(); err == nil {
			hc.knownHosts = []string{filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, ".ssh", "known_hosts2")}
		}
	}
	return nil
}

// applyGlobalKnownHosts: the system files are left out when -known-hosts names the
// one file to use.
func applyGlobalKnownHosts(l *hostLookup, hc *hostConfig) error {
	if g := l.get("GlobalKnownHostsFile"); g != "" {
		hc.globalKnown = fileList(g, hc)
	} else if !l.flag(l.cfg.knownHosts != "") {
		hc.globalKnown = []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
	}
	return nil
}

func applyStrict(l *hostLookup, hc *hostConfig) error {
	hc.strict = "ask"
	switch v := strings.ToLower(l.get("StrictHostKeyChecking")); v {
	case "":
	case "yes", "accept-new", "no", "ask":
		hc.strict = v
	case "off":
		hc.strict = "no"
	default:
		return fmt.Errorf("ssh_config: StrictHostKeyChecking %s: want yes, accept-new, no or ask", v)
	}
	return nil
}

// defaultAliveInterval is sluice's ServerAliveInterval when ssh_config and -o set none
// (OpenSSH's is 0, off): with ServerAliveCountMax's 3, a connection gone silent (no
// FIN, no reset: a NAT that forgot it, a cable pulled) ends the transfer within about
// 30 s, and --retries reconnects, where without it the command would hang for good.
const defaultAliveInterval = 10 * time.Second

// applyAliveInterval: ServerAliveInterval, sluice's default when unset, 0 for off.
func applyAliveInterval(l *hostLookup, hc *hostConfig) error {
	hc.aliveInterval = defaultAliveInterval
	return seconds("ServerAliveInterval", func(hc *hostConfig) *time.Duration { return &hc.aliveInterval })(l, hc)
}

func applyAliveCountMax(l *hostLookup, hc *hostConfig) error {
	hc.aliveCountMax = 3
	if v := l.get("ServerAliveCountMax"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("ssh_config: ServerAliveCountMax %q: want a positive number", v)
		}
		hc.aliveCountMax = n
	}
	return nil
}

// applyCiphers: -c wins over Ciphers.
func applyCiphers(l *hostLookup, hc *hostConfig) error {
	if l.flag(l.cfg.cipher != "") {
		hc.ciphers = []string{l.cfg.cipher}
		return nil
	}
	if v := l.get("Ciphers"); v != "" {
		var err error
		hc.ciphers, err = cipherList(v)
		return err
	}
	return nil
}
