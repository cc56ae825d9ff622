package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// remote is a parsed REMOTE operand. Host is empty for a bare path, which is served by
// a local sftp-server (or by the -D command).
//
// The syntax is scp's, with an optional port between host and path:
//
//	[user@]host[:port]:path
//	[user@][ipv6-address][:port]:path
//	path                      (no ':' before the first '/')
//
// A run of digits followed by ':' right after the host is always the port, so
// "host:2222:x" is port 2222 and path "x". A path that must begin that way is written
// "host:./2222:x". Likewise a local-looking path with a ':' before its first '/' is
// written "./a:b" to keep it from being read as host "a".
type remote struct {
	User string // "" when not given
	Host string // "" for a bare path; without brackets for IPv6
	Port int    // 0 when not given
	Path string // never empty for a host; "." is the login directory
}

func (r remote) hasHost() bool { return r.Host != "" }

// String gives r back in the syntax parseRemote reads.
func (r remote) String() string {
	if r.Host == "" {
		return r.Path
	}
	var b strings.Builder
	if r.User != "" {
		b.WriteString(r.User + "@")
	}
	if strings.Contains(r.Host, ":") {
		b.WriteString("[" + r.Host + "]")
	} else {
		b.WriteString(r.Host)
	}
	if r.Port != 0 {
		b.WriteString(":" + strconv.Itoa(r.Port))
	}
	return b.String() + ":" + r.Path
}

var errMissingPath = errors.New("missing path after the host (use HOST:. for the login directory)")

// parseRemote splits a REMOTE operand. Errors describe what is wrong with s; the
// caller reports them as usage errors.
func parseRemote(s string) (remote, error) {
	if s == "" {
		return remote{}, errors.New("empty REMOTE")
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

	r := remote{User: user, Host: host}
	if i := strings.IndexByte(rest, ':'); i > 0 && allDigits(rest[:i]) {
		port, err := strconv.Atoi(rest[:i])
		if err != nil || port < 1 || port > 65535 {
			return remote{}, fmt.Errorf("%q: port %s out of range 1-65535", s, rest[:i])
		}
		r.Port, rest = port, rest[i+1:]
	}
	if rest == "" {
		return remote{}, fmt.Errorf("%q: %w", s, errMissingPath)
	}
	r.Path = rest
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
