package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// sshConfig is the ssh_config files in force (-F, or ~/.ssh/config then
// /etc/ssh/ssh_config) and the -o options, which win over them. Lookups follow
// OpenSSH: for most keywords the first value found wins, the command line first;
// IdentityFile accumulates.
//
// The parsing is github.com/kevinburke/ssh_config's: it matches Host patterns
// (with negation), Match host and Match all, and Include as OpenSSH does. Other Match
// criteria (exec, which would run commands from the file, user, canonical, final,
// localnetwork, tagged...) it refuses; neutralizeMatch turns those blocks into ones
// that never match, so one of them does not break every command.
type sshConfig struct {
	files   []*ssh_config.Config
	options map[string][]string // -o, by lower-case keyword, in the order given
	// warnings are said once on stderr when the files are first used.
	warnings []string
}

// optionKeywords are the ssh_config keywords sluice acts on, in their usual spelling.
// Others in a file are ignored, as a file written for ssh has many; given with -o they
// are refused, since the user asked for something that would not happen.
var optionKeywords = []string{
	"HostName", "Port", "User", "IdentityFile", "IdentitiesOnly", "ProxyJump",
	"ProxyCommand", "UserKnownHostsFile", "GlobalKnownHostsFile", "StrictHostKeyChecking",
	"HashKnownHosts", "ConnectTimeout", "ServerAliveInterval", "ServerAliveCountMax",
	"Ciphers", "BatchMode", "PasswordAuthentication", "KbdInteractiveAuthentication",
	"PubkeyAuthentication", "NumberOfPasswordPrompts", "KexAlgorithms", "MACs",
	"HostKeyAlgorithms", "HostKeyAlias",
}

// loadSSHConfig reads the files: path alone when -F gave one ("none" for no file),
// else the user's and the system's. A missing default file is no error.
func loadSSHConfig(path string, opts []string) (*sshConfig, error) {
	c := &sshConfig{options: map[string][]string{}}
	for _, o := range opts {
		k, v, err := splitOption(o)
		if err != nil {
			return nil, usagef("-o %s: %v", o, err)
		}
		c.options[strings.ToLower(k)] = append(c.options[strings.ToLower(k)], v)
	}
	var names []string
	explicit := path != ""
	switch {
	case path == "none":
	case explicit:
		names = []string{expandHome(path)}
	default:
		if home, err := os.UserHomeDir(); err == nil {
			names = append(names, filepath.Join(home, ".ssh", "config"))
		}
		names = append(names, "/etc/ssh/ssh_config")
	}
	for _, n := range names {
		f, err := os.Open(n)
		if errors.Is(err, fs.ErrNotExist) && !explicit {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ssh_config: %w", err)
		}
		text, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("ssh_config: %w", err)
		}
		text, skipped := neutralizeMatch(text)
		if len(skipped) > 0 {
			c.warnings = append(c.warnings, fmt.Sprintf("%s: treating as never matching the Match line(s) sluice cannot evaluate: %s",
				n, strings.Join(skipped, "; ")))
		}
		cfg, err := ssh_config.DecodeBytes(text)
		if err != nil {
			return nil, fmt.Errorf("ssh_config %s: %v", n, err)
		}
		c.files = append(c.files, cfg)
	}
	return c, nil
}

// neverMatch is a Host line no name matches: a negated pattern that matches
// everything excludes every host.
const neverMatch = "Host !*"

// neutralizeMatch rewrites each Match line the parser cannot evaluate into
// neverMatch, so its block applies to no host, and returns the lines it rewrote.
// The parser evaluates "Match all" and "Match host PATTERNS" alone; any other
// criterion, or host combined with another, could only be guessed at. Never
// matching is OpenSSH's own answer for a criterion it cannot evaluate for a host,
// and unlike an error it leaves the rest of the file in force.
func neutralizeMatch(text []byte) ([]byte, []string) {
	lines := strings.SplitAfter(string(text), "\n")
	var skipped []string
	for i, line := range lines {
		body := strings.TrimSpace(line)
		if c := strings.IndexByte(body, '#'); c >= 0 {
			body = strings.TrimSpace(body[:c])
		}
		fields := strings.FieldsFunc(body, func(r rune) bool { return r == ' ' || r == '\t' || r == '=' })
		if len(fields) == 0 || !strings.EqualFold(fields[0], "Match") || matchSupported(fields[1:]) {
			continue
		}
		skipped = append(skipped, body)
		end := line[len(strings.TrimRight(line, "\r\n")):]
		lines[i] = neverMatch + end
	}
	return []byte(strings.Join(lines, "")), skipped
}

// matchSupported reports whether the parser evaluates the Match criteria as OpenSSH
// would: "all" alone, or "host" and patterns none of which is another criterion.
func matchSupported(criteria []string) bool {
	if len(criteria) == 0 {
		return true // the parser's own error says what is missing
	}
	switch strings.ToLower(criteria[0]) {
	case "all":
		return len(criteria) == 1
	case "host":
		for _, c := range criteria[1:] {
			switch strings.ToLower(c) {
			case "all", "canonical", "final", "exec", "localnetwork", "host", "originalhost",
				"tagged", "user", "localuser", "version", "sessiontype", "command":
				return false
			}
		}
		return true
	}
	return false
}

// splitOption splits "Keyword=value" or "Keyword value", as ssh -o takes them.
func splitOption(o string) (string, string, error) {
	o = strings.TrimSpace(o)
	i := strings.IndexAny(o, "= \t")
	if i <= 0 {
		return "", "", errors.New("want Keyword=value")
	}
	k, v := o[:i], strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(o[i:]), "="))
	v = strings.Trim(v, `"`)
	if !slices.ContainsFunc(optionKeywords, func(s string) bool { return strings.EqualFold(s, k) }) {
		return "", "", fmt.Errorf("sluice does not use %s (it uses %s)", k, strings.Join(optionKeywords, ", "))
	}
	return k, v, nil
}

// get returns the first value of keyword for alias: -o first, then the files in order.
func (c *sshConfig) get(alias, keyword string) string {
	if v := c.options[strings.ToLower(keyword)]; len(v) > 0 {
		return v[0]
	}
	for _, f := range c.files {
		if v, err := f.Get(alias, keyword); err == nil && v != "" {
			return v
		}
	}
	return ""
}

// getAll returns every value of keyword for alias, the command line's first.
func (c *sshConfig) getAll(alias, keyword string) []string {
	out := slices.Clone(c.options[strings.ToLower(keyword)])
	for _, f := range c.files {
		if v, err := f.GetAll(alias, keyword); err == nil {
			out = append(out, v...)
		}
	}
	return out
}

// hostConfig is everything needed to reach one host, resolved from the command line,
// ssh_config and the defaults.
type hostConfig struct {
	alias          string // as typed
	hostName       string // where to connect
	port           int
	user           string
	identityFiles  []string // -i first, then IdentityFile
	cliIdentities  []string // the -i ones, which must exist
	identitiesOnly bool
	proxyJump      string
	proxyCommand   string
	knownHosts     []string // the user's files; new keys go into the first
	globalKnown    []string
	strict         string // yes, no, accept-new or ask
	insecure       bool   // -insecure-accept-unknown-host: accept unknown keys unsaved
	hashKnownHosts bool
	connectTimeout time.Duration
	aliveInterval  time.Duration
	aliveCountMax  int
	ciphers        []string
	batch          bool // BatchMode: never prompt
	password       bool // PasswordAuthentication
	kbdInteractive bool // KbdInteractiveAuthentication
	pubkey         bool // PubkeyAuthentication
	passwordTries  int

	// The algorithm keywords (algorithms.go), nil for x/crypto's defaults (ciphers,
	// above, is Ciphers or -c), and HostKeyAlias: the name known_hosts knows the host by.
	kexAlgos, macs, hostKeyAlgos []string
	hostKeyAlias                 string
}

// expandTokens replaces ssh_config's %-tokens and a leading ~ in s: %h host name,
// %p port, %r remote user, %n the name as typed, %u local user, %d local home, %%.
// extra adds tokens.
func expandTokens(s string, hc *hostConfig, extra map[byte]string) string {
	s = expandHome(s)
	if !strings.Contains(s, "%") {
		return s
	}
	home, _ := os.UserHomeDir()
	lu, _ := localUser()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch t := s[i]; t {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(hc.hostName)
		case 'p':
			b.WriteString(strconv.Itoa(hc.port))
		case 'r':
			b.WriteString(hc.user)
		case 'n':
			b.WriteString(hc.alias)
		case 'u':
			b.WriteString(lu)
		case 'd':
			b.WriteString(home)
		default:
			if v, ok := extra[t]; ok {
				b.WriteString(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(t)
			}
		}
	}
	return b.String()
}

// localUser is $USER, else the account this process runs as.
func localUser() (string, error) {
	if u := os.Getenv("USER"); u != "" {
		return u, nil
	}
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.Username, nil
}
