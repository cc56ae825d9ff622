package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// config holds the flags shared by every command: how to reach the server and how the
// SFTP client is tuned. Commands add their own flags to their FlagSet.
type config struct {
	identities       stringList // -i, in the order given
	knownHosts       string     // -known-hosts; "" means the OpenSSH defaults
	acceptUnknown    bool       // -insecure-accept-unknown-host
	port             int        // -P; 0 means 22 (a port in REMOTE wins)
	user             string     // -l; "" means $USER (a user in REMOTE wins)
	cipher           string     // -c
	serverCmd        string     // -D
	inflight, packet int        // 0: the library's default
	channels         int

	// set records the flags given anywhere on the command line, so that flags which
	// only make sense for SSH can be refused when there is no host.
	set map[string]bool
}

// sshOnlyFlags are meaningless without a host; giving one with a bare path almost
// always means a forgotten "host:", so it is a usage error rather than ignored.
var sshOnlyFlags = []string{"i", "known-hosts", "insecure-accept-unknown-host", "P", "l", "c"}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// positiveInt is an int flag that refuses zero and negatives at parse time, and
// values above max when max is set; otherwise the library checks the upper bound.
type positiveInt struct {
	p   *int
	max int
}

func (v positiveInt) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v positiveInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("want a positive integer")
	}
	if v.max > 0 && n > v.max {
		return fmt.Errorf("want 1 to %d", v.max)
	}
	*v.p = n
	return nil
}

// checkCipher refuses a -c that x/crypto does not implement, naming those it does,
// rather than failing later in the handshake with a list of both sides' algorithms.
func (c *config) checkCipher() error {
	if c.cipher == "" {
		return nil
	}
	known := append(ssh.SupportedAlgorithms().Ciphers, ssh.InsecureAlgorithms().Ciphers...)
	if slices.Contains(known, c.cipher) {
		return nil
	}
	return usagef("-c %s: unknown cipher; want one of %s", c.cipher, strings.Join(ssh.SupportedAlgorithms().Ciphers, ", "))
}

// register adds the shared flags to fs.
func (c *config) register(fs *flag.FlagSet) {
	fs.Var(&c.identities, "i", "private key `file` for SSH (repeatable; default ~/.ssh/id_*); ssh-agent keys are offered too")
	fs.StringVar(&c.knownHosts, "known-hosts", "", "known_hosts `file` to check the host key against (default ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts)")
	fs.BoolVar(&c.acceptUnknown, "insecure-accept-unknown-host", false, "connect to a host whose key is not in known_hosts (a changed key is still refused)")
	fs.Var(positiveInt{p: &c.port, max: 65535}, "P", "SSH `port` (default 22; a port in REMOTE wins)")
	fs.StringVar(&c.user, "l", "", "SSH `user` (default $USER; a user in REMOTE wins)")
	fs.StringVar(&c.cipher, "c", "", "SSH `cipher`, e.g. aes128-gcm@openssh.com")
	fs.StringVar(&c.serverCmd, "D", "", "run `command` locally and speak SFTP over its stdin/stdout instead of SSH;\nREMOTE is then a path on it (e.g. -D '/usr/lib/openssh/sftp-server -R')")
	fs.Var(positiveInt{p: &c.inflight}, "inflight", "requests in flight per transfer (`n`, default 64)")
	fs.Var(positiveInt{p: &c.packet}, "packet", "data bytes per READ/WRITE (`n`, default: what the server allows)")
	fs.Var(positiveInt{p: &c.channels}, "channels", "SFTP channels to stripe large transfers over (`n`, default 4)")
}

// newFlagSet returns a FlagSet for name that reports errors instead of exiting and
// writes nothing by itself: run decides where usage goes.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// recordSet adds the flags fs saw to c.set.
func (c *config) recordSet(fs *flag.FlagSet) {
	if c.set == nil {
		c.set = map[string]bool{}
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
}

const usageHead = `sluice copies files to and from SFTP servers, fast.

Usage:
  sluice [flags] put [put flags] LOCAL REMOTE   upload a file, or a directory with -r
  sluice [flags] get [get flags] REMOTE LOCAL   download a file, or a directory with -r
  sluice [flags] ls REMOTE                      list a directory or show one file
  sluice [flags] rm REMOTE                      remove a file or an empty directory
  sluice [flags] mkdir [-p] REMOTE              make a directory (-p: and its parents)

Flags go before the operands. The shared flags (listed at the end) may come before or
after the command name; a command's own flags come after it.

put and get copy into REMOTE or LOCAL when it is an existing directory. Each file is
written under a .sluice-part name and renamed into place when complete, so a file is
replaced whole or not at all, and -a can continue it after an interruption. On a
terminal a progress line is shown; a summary line follows in any case (unless -q).

put and get flags:
`

const usageShared = `
REMOTE is a path on an SSH server, in scp's syntax with an optional port:
  [user@]host[:port]:path        e.g. alice@example.com:2222:/srv/in
  [user@][ipv6][:port]:path      e.g. root@[::1]:2222:/tmp/x
Digits and ':' right after the host are the port: write host:./123:x for a path "123:x".
A path relative to the login directory is fine (host:data.bin); host:. is that directory.

Without a host (no ':' before the first '/'), or with -D, REMOTE is a plain path and no
SSH is involved: sluice starts /usr/lib/openssh/sftp-server (or the -D command) locally
and talks SFTP over its stdin and stdout. Handy for trying sluice out.

Host keys are checked against known_hosts; an unknown host is refused unless
-insecure-accept-unknown-host is given, and a changed key is always refused.

Shared flags:
`

const usageTail = `
Examples:
  sluice put big.bin alice@example.com:/srv/in/
  sluice put -r -p -j 32 photos example.com:backup/   (a tree, 32 files at a time)
  sluice get -a example.com:/srv/big.iso .            (continue an interrupted get)
  sluice -P 2222 -i ~/.ssh/id_ed25519 get example.com:logs/app.log .
  sluice -c aes128-gcm@openssh.com -inflight 128 get root@[::1]:2222:/tmp/x ./x
  sluice ls example.com:/var/tmp
  sluice mkdir -p example.com:backups/2024/06
  sluice put notes.txt /tmp/notes-copy.txt           (no host: local sftp-server)
  sluice -D '/usr/lib/openssh/sftp-server -R' ls /etc

Exit status: 0 on success, 1 when an operation failed, 2 on a usage error.
`

// printUsage writes the full help, with the shared flags' defaults.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	var x xferFlags
	xfs := newFlagSet("put")
	x.register(xfs)
	xfs.SetOutput(w)
	xfs.PrintDefaults()
	fmt.Fprint(w, usageShared)
	var c config
	fs := newFlagSet("sluice")
	c.register(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, usageTail)
}
