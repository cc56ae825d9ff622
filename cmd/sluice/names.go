package main

import (
	"fmt"
	"strings"
)

// shellMeta are the characters a host or user name from the command line may not
// hold. They reach a shell when ProxyCommand expands %h, %n or %r, and no real host
// or account name has them (OpenSSH refuses the same set since 9.6, CVE-2023-51385).
const shellMeta = "'\"$`\\;&<>|(){}"

// checkCLIName refuses a host or user name (what is "host" or "user") typed on the
// command line or in a URI that could act on a shell or on ssh_config token
// expansion: control characters, white space, shell metacharacters, and a leading
// '-' that a command would read as an option. Names from ssh_config itself are the
// user's own and are not checked, as in OpenSSH.
func checkCLIName(what, name string) error {
	if strings.HasPrefix(name, "-") {
		return fmt.Errorf("%s name %q starts with '-'", what, name)
	}
	for _, c := range name {
		if c <= ' ' || c == 0x7f || strings.ContainsRune(shellMeta, c) {
			return fmt.Errorf("%s name %q contains %q, which no %s name has", what, name, c, what)
		}
	}
	return nil
}

// checkKnownHostsName refuses to record a host (as knownhosts.Normalize gives it:
// "host" or "[host]:port") whose name would not read back as one entry of one line:
// white space or a control character would split or end the line, a ',' would make
// two names, and shell metacharacters mark a name no host has. HostName in
// ssh_config can give such a name even when the command line's is clean.
func checkKnownHostsName(host string) error {
	name := host
	if rest, ok := strings.CutPrefix(host, "["); ok {
		if i := strings.LastIndex(rest, "]:"); i >= 0 {
			name = rest[:i]
		}
	}
	if err := checkCLIName("host", name); err != nil {
		return fmt.Errorf("not recording the host key: %v", err)
	}
	if name == "" || strings.ContainsAny(name, ",[]") {
		return fmt.Errorf("not recording the host key: host name %q is not one known_hosts name", name)
	}
	return nil
}
