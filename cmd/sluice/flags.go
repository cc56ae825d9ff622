package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

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
	connections      int           // -connections: 0 means as many as the lanes need
	configFile       string        // -F: the ssh_config file, "none" for none
	jump             string        // -J: ProxyJump hosts
	options          stringList    // -o Keyword=value
	limit            int64         // --limit: bytes per second, 0 for none
	timeout          time.Duration // --timeout: longest wait for a reply in a metadata call
	verbose          int           // -v, repeatable: what is dialled, tried and offered
	hashCommand      bool          // --hash-command: sum, --verify and --checksum may run sha256sum on the server

	// set records the flags given anywhere on the command line, so that flags which
	// only make sense for SSH can be refused when there is no host.
	set map[string]bool
}

// sshOnlyFlags are meaningless without a host; giving one with a bare path almost
// always means a forgotten "host:", so it is a usage error rather than ignored.
var sshOnlyFlags = []string{"i", "known-hosts", "insecure-accept-unknown-host", "P", "l", "c", "F", "J", "o", "hash-command"}

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
	fs.StringVar(&c.configFile, "F", "", "ssh_config `file` (default ~/.ssh/config, then /etc/ssh/ssh_config; none for none)")
	fs.StringVar(&c.jump, "J", "", "jump through `[user@]host[:port][,...]` (ProxyJump)")
	fs.Var(&c.options, "o", "ssh_config `Keyword=value`, winning over the files (repeatable)")
	fs.Var(&c.identities, "i", "private key `file` for SSH (repeatable; default IdentityFile, ~/.ssh/id_*); ssh-agent keys are offered too")
	fs.StringVar(&c.knownHosts, "known-hosts", "", "known_hosts `file` to check the host key against (default ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts)")
	fs.BoolVar(&c.acceptUnknown, "insecure-accept-unknown-host", false, "connect to a host whose key is not in known_hosts without saving it (a changed key is still refused)")
	fs.Var(positiveInt{p: &c.port, max: 65535}, "P", "SSH `port` (default Port from ssh_config, else 22; a port in an sftp:// REMOTE wins)")
	fs.StringVar(&c.user, "l", "", "SSH `user` (default User from ssh_config, else $USER; a user in REMOTE wins); in ls, -l is the long listing")
	fs.StringVar(&c.cipher, "c", "", "SSH `cipher`, e.g. aes128-gcm@openssh.com")
	fs.StringVar(&c.serverCmd, "D", "", "run `command` locally and speak SFTP over its stdin/stdout instead of SSH;\nREMOTE is then a path on it (e.g. -D '/usr/lib/openssh/sftp-server -R')")
	fs.Var(positiveInt{p: &c.inflight}, "inflight", "requests in flight per transfer (`n`, default 64)")
	fs.Var(positiveInt{p: &c.packet}, "packet", "data bytes per READ/WRITE (`n`, default: what the server allows)")
	fs.Var(positiveInt{p: &c.channels}, "channels", "most SFTP channels to stripe a large transfer over (`n`, default 16; fewer when the link needs fewer)")
	fs.Var(positiveInt{p: &c.connections}, "connections", "most SSH connections to spread -channels over, the first included (`n`, default: as\nmany as they need, 8 channels to one or what the server allows); with -D, most server\nprocesses, one per channel; 1 keeps to one, as OpenSSH's sftp does")
	fs.Var(rateValue{&c.limit}, "limit", "cap the bandwidth at `rate` bytes/s each way, e.g. 500K, 10M (a bare number is KiB/s)")
	fs.Var(countFlag{&c.verbose, 1}, "v", "verbose: say on stderr what is dialled and how, which logins are tried and which worked,\nthe server's version, SFTP extensions and limits, and the connections used (-vv: more)")
	fs.Var(countFlag{&c.verbose, 2}, "vv", "as -v -v")
	fs.BoolVar(&c.hashCommand, "hash-command", false, "let sum, --verify and --checksum run sha256sum (sha1sum, md5sum...) on the server over SSH,\nso that only the hash crosses the network; off by default: it starts a process there")
	fs.DurationVar(&c.timeout, "timeout", defaultOpTimeout, "give up on a metadata call (ls, stat, mkdir, rm, ~ and glob expansion) when the server sends no reply for `duration`; 0 for never. Transfers are not bounded by it: a connection that goes silent is given up after ServerAliveInterval x ServerAliveCountMax (10s x 3 unless ssh_config or -o say otherwise)")
}

// defaultOpTimeout bounds a metadata call: long enough for a listing of a very large
// directory over a slow link, short enough that a server that never finishes one
// does not hold a script forever.
const defaultOpTimeout = 2 * time.Minute

// newFlagSet returns a FlagSet for name that reports errors instead of exiting and
// writes nothing by itself: run decides where usage goes.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseAnywhere parses args with fs, taking flags anywhere among the operands, as
// modern tools do; "--" ends the flags, and everything after it is an operand. It
// returns the operands in order.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && !takesValue(fs, args, used-1) {
			return append(operands, rest...), nil
		}
		if len(rest) == 0 {
			return operands, nil
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
}

// takesValue reports whether args[i] is the value of the flag before it ("-o --"),
// rather than the end of the flags.
func takesValue(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	prev := strings.TrimLeft(args[i-1], "-")
	if !strings.HasPrefix(args[i-1], "-") || strings.Contains(prev, "=") {
		return false
	}
	f := fs.Lookup(prev)
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}
