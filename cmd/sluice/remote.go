package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// remote is a parsed REMOTE operand. Host is empty for a bare path, which is served by
// a local sftp-server (or by the -D command).
//
// Two syntaxes are read, those of OpenSSH's scp and sftp:
//
//	[user@]host:[path]               scp's form; host may be [ipv6] or an ssh_config alias;
//	                                 no path is the login directory
//	sftp://[user@]host[:port][/path] a URI; /~/x is x in the login directory
//	path                             no ':' before the first '/': a bare path
//
// The older host:port:path form is refused with a message saying what to write: it
// cannot be told apart from a path that begins with digits and a colon, which scp
// reads as a path.
type remote struct {
	User string // "" when not given
	Host string // "" for a bare path; without brackets for IPv6
	Port int    // 0 when not given (only a URI gives one)
	Path string // never empty for a host; "." is the login directory
}

func (r remote) hasHost() bool { return r.Host != "" }

// String gives r back in a syntax parseRemote reads.
func (r remote) String() string {
	if r.Host == "" {
		return r.Path
	}
	host := r.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	user := ""
	if r.User != "" {
		user = r.User + "@"
	}
	if r.Port != 0 {
		p := r.Path
		switch {
		case p == ".":
			p = ""
		case strings.HasPrefix(p, "/"):
		default:
			p = "/~/" + p
		}
		u := url.URL{Scheme: "sftp", Host: host + ":" + strconv.Itoa(r.Port), Path: p}
		if r.User != "" {
			u.User = url.User(r.User)
		}
		return u.String()
	}
	return user + host + ":" + r.Path
}

// parseRemote splits a REMOTE operand. Errors describe what is wrong with s; the
// caller reports them as usage errors.
func parseRemote(s string) (remote, error) {
	if s == "" {
		return remote{}, errors.New("empty REMOTE")
	}
	if strings.HasPrefix(strings.ToLower(s), "sftp://") {
		return parseURI(s)
	}
	// The user part ends at the first '@' that comes before anything else with a
	// meaning here; an '@' after the host or in a bare path is part of the path.
	user, rest := "", s
	if i := strings.IndexAny(s, "@:/["); i >= 0 && s[i] == '@' {
		user, rest = s[:i], s[i+1:]
	}

	var host string
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return remote{}, fmt.Errorf("%q: missing ']' after the IPv6 address", s)
		}
		host, rest = rest[1:end], rest[end+1:]
		if host == "" {
			return remote{}, fmt.Errorf("%q: empty host in []", s)
		}
		if !strings.HasPrefix(rest, ":") {
			return remote{}, fmt.Errorf("%q: want ':' and a path after ']'", s)
		}
		rest = rest[1:]
	default:
		i := strings.IndexAny(rest, ":/")
		if i < 0 || rest[i] == '/' {
			// No host: the whole operand, '@' and all, is a path.
			return remote{Path: s}, nil
		}
		if i == 0 {
			return remote{}, fmt.Errorf("%q: missing host before ':'", s)
		}
		host, rest = rest[:i], rest[i+1:]
	}
	if user == "" && strings.HasPrefix(s, "@") {
		return remote{}, fmt.Errorf("%q: empty user before '@'", s)
	}
	if i := strings.IndexByte(rest, ':'); i > 0 && allDigits(rest[:i]) {
		port, p := rest[:i], rest[i+1:]
		if p == "" {
			p = "/"
		}
		alt := remote{User: user, Host: host, Path: p}
		if n, err := strconv.Atoi(port); err == nil && n >= 1 && n <= 65535 {
			alt.Port = n
		} else {
			alt.Port = 22 // only for the message
		}
		return remote{}, fmt.Errorf("%q: host:port:path is not read (scp would take %q as part of the path); "+
			"give the port with -P %s or write %s; a path that really starts that way is %s:./%s",
			s, port+":", port, alt.String(), host, rest)
	}
	if rest == "" {
		rest = "." // "host:" is the login directory, as with scp
	}
	return remote{User: user, Host: host, Path: rest}, nil
}

// parseURI reads sftp://[user[;params]@]host[:port][/path] as OpenSSH's sftp does: the
// path is absolute, "/~/x" (or "/~") names the login directory, and no path means the
// login directory.
func parseURI(s string) (remote, error) {
	u, err := url.Parse(s)
	if err != nil {
		return remote{}, fmt.Errorf("%q: not a valid sftp:// URI: %v", s, err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return remote{}, fmt.Errorf("%q: an sftp:// URI takes no ?query or #fragment", s)
	}
	r := remote{Host: u.Hostname()}
	if r.Host == "" {
		return remote{}, fmt.Errorf("%q: missing host", s)
	}
	if u.User != nil {
		// The draft allows ";fingerprint=..." connection parameters after the user;
		// like OpenSSH, take the user and ignore them.
		r.User, _, _ = strings.Cut(u.User.Username(), ";")
		if r.User == "" {
			return remote{}, fmt.Errorf("%q: empty user before '@'", s)
		}
		if _, has := u.User.Password(); has {
			return remote{}, fmt.Errorf("%q: a password in the URI is not accepted (it would show in the process list); sluice asks for it", s)
		}
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return remote{}, fmt.Errorf("%q: port %s out of range 1-65535", s, p)
		}
		r.Port = n
	}
	switch p := u.Path; {
	case p == "" || p == "/~" || p == "/~/":
		r.Path = "."
	case strings.HasPrefix(p, "/~/"):
		r.Path = p[3:]
	default:
		r.Path = p
	}
	return r, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
