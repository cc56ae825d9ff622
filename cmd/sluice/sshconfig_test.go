package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// appWithConfig is an app whose ssh_config is text (written to a file and given
// as -F) plus the -o options.
func appWithConfig(t *testing.T, text string, opts ...string) *app {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	c, err := loadSSHConfig(p, opts)
	require.NoError(t, err)
	return &app{cfg: &config{}, sshCfg: c}
}

func TestSSHConfigResolve(t *testing.T) {
	isolateEnv(t)
	t.Setenv("USER", "me")
	home := os.Getenv("HOME")
	a := appWithConfig(t, `
Host box !nothere
    HostName 10.1.2.3
    Port 2200
    User alice
    IdentityFile ~/.ssh/box_%r_%h
    IdentitiesOnly yes
    ProxyJump bastion
    UserKnownHostsFile ~/kh/%n
    StrictHostKeyChecking accept-new
    HashKnownHosts yes
    ConnectTimeout 7
    ServerAliveInterval 15
    Ciphers ^aes128-gcm@openssh.com

Match host other
    Port 2201

Host *
    User fallback
    IdentityFile ~/.ssh/common
    Port 2999
`)
	hc, err := a.resolveHost(remote{Host: "box", Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, "10.1.2.3", hc.hostName)
	require.Equal(t, 2200, hc.port, "the first value wins, as in ssh")
	require.Equal(t, "alice", hc.user)
	require.Equal(t, []string{filepath.Join(home, ".ssh/box_alice_10.1.2.3"), filepath.Join(home, ".ssh/common")}, hc.identityFiles,
		"IdentityFile accumulates, with %r and %h expanded")
	require.True(t, hc.identitiesOnly)
	require.Equal(t, "bastion", hc.proxyJump)
	require.Equal(t, []string{filepath.Join(home, "kh/box")}, hc.knownHosts)
	require.Equal(t, "accept-new", hc.strict)
	require.True(t, hc.hashKnownHosts)
	require.Equal(t, 7*time.Second, hc.connectTimeout)
	require.Equal(t, 15*time.Second, hc.aliveInterval)
	require.Equal(t, "aes128-gcm@openssh.com", hc.ciphers[0])
	require.Greater(t, len(hc.ciphers), 1, "^ puts the cipher first and keeps the rest")

	// Match host applies; Host * gives the rest.
	hc, err = a.resolveHost(remote{Host: "other", Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, "other", hc.hostName)
	require.Equal(t, 2201, hc.port)
	require.Equal(t, "fallback", hc.user)
	require.Equal(t, "ask", hc.strict)
	require.Empty(t, hc.proxyJump)

	// The operand and the flags beat the file.
	a.cfg = &config{port: 4000, user: "flaguser", jump: "j2", cipher: "aes256-ctr", identities: stringList{"~/k"}}
	hc, err = a.resolveHost(remote{Host: "box", User: "opuser", Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, 4000, hc.port)
	require.Equal(t, "opuser", hc.user)
	require.Equal(t, "j2", hc.proxyJump)
	require.Equal(t, []string{"aes256-ctr"}, hc.ciphers)
	require.Equal(t, filepath.Join(home, "k"), hc.identityFiles[0])
	require.Equal(t, []string{filepath.Join(home, "k")}, hc.cliIdentities)
	hc, err = a.resolveHost(remote{Host: "box", Port: 5000, Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, 5000, hc.port, "a URI's port beats -P")
	require.Equal(t, "flaguser", hc.user)

	// A jump host takes its own settings, not the final host's flags.
	hc, err = a.resolveHost(remote{Host: "box"}, true)
	require.NoError(t, err)
	require.Equal(t, 2200, hc.port)
	require.Equal(t, "alice", hc.user)
	require.Empty(t, hc.cliIdentities)

	// -o wins over the files.
	a = appWithConfig(t, "Host box\n  Port 2200\n  StrictHostKeyChecking yes\n", "Port=2300", "StrictHostKeyChecking accept-new", "User=bob")
	hc, err = a.resolveHost(remote{Host: "box", Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, 2300, hc.port)
	require.Equal(t, "accept-new", hc.strict)
	require.Equal(t, "bob", hc.user)

	// No file at all: OpenSSH's defaults.
	c, err := loadSSHConfig("none", nil)
	require.NoError(t, err)
	a = &app{cfg: &config{}, sshCfg: c}
	hc, err = a.resolveHost(remote{Host: "h", Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, 22, hc.port)
	require.Equal(t, "me", hc.user)
	require.Equal(t, "ask", hc.strict)
	require.Equal(t, []string{filepath.Join(home, ".ssh/known_hosts"), filepath.Join(home, ".ssh/known_hosts2")}, hc.knownHosts)
	require.Equal(t, 3, hc.passwordTries)
}

func TestSSHConfigErrors(t *testing.T) {
	isolateEnv(t)
	for _, tt := range []struct{ text, want string }{
		{"Host b\n  Port none\n", `Port "none" for b`},
		{"Host b\n  StrictHostKeyChecking maybe\n", "want yes, accept-new, no or ask"},
		{"Host b\n  IdentitiesOnly perhaps\n", "IdentitiesOnly perhaps: want yes or no"},
		{"Host b\n  Ciphers rot13\n", "unknown cipher rot13"},
		{"Host b\n  ProxyJump j\n  ProxyCommand nc %h %p\n", "both ProxyJump and ProxyCommand"},
		{"Host b\n  ConnectTimeout soon\n", "ConnectTimeout"},
	} {
		a := appWithConfig(t, tt.text)
		_, err := a.resolveHost(remote{Host: "b", Path: "."}, false)
		require.ErrorContains(t, err, tt.want, tt.text)
	}
	// A parse error names the file.
	p := filepath.Join(t.TempDir(), "cfg")
	require.NoError(t, os.WriteFile(p, []byte("Match\n  Port 1\n"), 0o600))
	_, err := loadSSHConfig(p, nil)
	require.ErrorContains(t, err, "ssh_config "+p)
	// -F naming a missing file is an error; the default files may be missing.
	_, err = loadSSHConfig(filepath.Join(t.TempDir(), "absent"), nil)
	require.ErrorContains(t, err, "no such file")
	_, err = loadSSHConfig("", nil)
	require.NoError(t, err)
}

func TestCipherList(t *testing.T) {
	t.Parallel()
	def := ssh.SupportedAlgorithms().Ciphers
	got, err := cipherList("aes128-ctr,aes256-ctr")
	require.NoError(t, err)
	require.Equal(t, []string{"aes128-ctr", "aes256-ctr"}, got)
	got, err = cipherList("-aes128-ctr")
	require.NoError(t, err)
	require.NotContains(t, got, "aes128-ctr")
	require.Len(t, got, len(def)-1)
	got, err = cipherList("+arcfour")
	require.NoError(t, err)
	require.Equal(t, "arcfour", got[len(got)-1])
}

func TestParseAnywhere(t *testing.T) {
	t.Parallel()
	newFS := func() (*flag.FlagSet, *bool, *string) {
		fs := newFlagSet("t")
		return fs, fs.Bool("r", false, ""), fs.String("o", "", "")
	}
	fs, r, o := newFS()
	ops, err := parseAnywhere(fs, []string{"a", "-r", "b", "-o", "x", "c"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, ops)
	require.True(t, *r)
	require.Equal(t, "x", *o)

	fs, r, _ = newFS()
	ops, err = parseAnywhere(fs, []string{"a", "--", "-r", "--"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "-r", "--"}, ops, "-- ends the flags")
	require.False(t, *r)

	fs, _, o = newFS()
	ops, err = parseAnywhere(fs, []string{"-o", "--", "a"})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ops, "a flag's value of -- is a value")
	require.Equal(t, "--", *o)

	fs, _, _ = newFS()
	_, err = parseAnywhere(fs, []string{"a", "-z"})
	require.ErrorContains(t, err, "-z")
}

func TestParseJump(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]remote{
		"bastion":             {Host: "bastion"},
		"alice@bastion:2022":  {User: "alice", Host: "bastion", Port: 2022},
		"ssh://bob@[::1]:22/": {User: "bob", Host: "::1", Port: 22},
		"[fe80::1]":           {Host: "fe80::1"},
		" j ":                 {Host: "j"},
	} {
		got, err := parseJump(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "u@", "h:0", "h:x", "[::1"} {
		_, err := parseJump(in)
		require.Error(t, err, in)
	}
}

func TestSplitOption(t *testing.T) {
	t.Parallel()
	k, v, err := splitOption("StrictHostKeyChecking=accept-new")
	require.NoError(t, err)
	require.Equal(t, []string{"StrictHostKeyChecking", "accept-new"}, []string{k, v})
	k, v, err = splitOption(`proxycommand "nc %h %p"`)
	require.NoError(t, err)
	require.Equal(t, []string{"proxycommand", "nc %h %p"}, []string{k, v})
	_, _, err = splitOption("ForwardX11=yes")
	require.ErrorContains(t, err, "sluice does not use ForwardX11")
}

// TestSSHConfigUnsupportedMatch: a Match block sluice cannot evaluate (exec, which
// would run a command, canonical, final, user...) applies to no host, with one warning,
// instead of breaking every command; the rest of the file is in force.
func TestSSHConfigUnsupportedMatch(t *testing.T) {
	isolateEnv(t)
	dir := t.TempDir()
	a := appWithConfig(t, `
Match exec "touch `+dir+`/ran"
    Port 1
Match canonical
    Port 2
match=final all
    Port 3
Match host box user bob   # user is not evaluated
    Port 4
  Match localnetwork 10.0.0.0/8
    Port 5
Match tagged x
    Port 6
Match host box
    User alice
Host box
    Port 2200
Match all
    IdentityFile ~/id
`)
	require.Len(t, a.sshCfg.warnings, 1, "one warning per file")
	for _, want := range []string{"Match exec", "Match canonical", "match=final all", "Match host box user bob", "Match localnetwork", "Match tagged x"} {
		require.Contains(t, a.sshCfg.warnings[0], want)
	}
	require.NotContains(t, a.sshCfg.warnings[0], "user is not evaluated", "comments are not quoted")
	hc, err := a.resolveHost(remote{Host: "box", Path: "."}, false)
	require.NoError(t, err)
	require.Equal(t, 2200, hc.port, "no unsupported block applied")
	require.Equal(t, "alice", hc.user, "Match host is still evaluated")
	require.Equal(t, []string{filepath.Join(os.Getenv("HOME"), "id")}, hc.identityFiles, "Match all is still evaluated")
	require.NoFileExists(t, filepath.Join(dir, "ran"))

	// The warning reaches stderr once, and the command goes on to connect.
	cfg := filepath.Join(dir, "cfg")
	require.NoError(t, os.WriteFile(cfg, []byte("Match exec true\n  Port 1\nHost box\n  HostName 127.0.0.1\n  Port 9\n"), 0o600))
	key := filepath.Join(dir, "key")
	writeEd25519Key(t, key)
	r := runCLI(t, "-F", cfg, "-i", key, "-o", "BatchMode=yes", "ls", "box:x")
	require.Equal(t, 1, strings.Count(r.stderr, "sluice: warning: ssh_config "+cfg), r.stderr)
	require.Contains(t, r.stderr, "127.0.0.1 port 9", "the Match exec block did not set the port")
}

// Every keyword sluice acts on (the ones -o accepts) has its step in resolveHost's
// table, and the table acts on nothing -o would refuse. ProxyCommand is read by
// ProxyJump's step, which must see both.
func TestHostKeywordsCoverOptions(t *testing.T) {
	t.Parallel()
	steps := map[string]bool{"ProxyCommand": true}
	for _, s := range hostKeywords {
		require.False(t, steps[s.keyword], "%s twice", s.keyword)
		steps[s.keyword] = true
	}
	for _, k := range optionKeywords {
		require.True(t, steps[k], "no step for %s", k)
	}
	require.Len(t, steps, len(optionKeywords))
}
