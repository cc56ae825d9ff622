package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sftp/internal/sshdtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// passwordUser is the account the password tests log in as, created (idempotently)
// with useradd and chpasswd when the tests run as root.
const passwordUser = "sluicetest"

// needPasswordUser creates passwordUser with a fresh random password and returns the
// password and home directory; it skips, saying why, when that is impossible.
func needPasswordUser(t *testing.T) (string, string) {
	t.Helper()
	return needUser(t, passwordUser)
}

// needUser is needPasswordUser for the account name. A test that changes the
// password while it runs uses an account of its own: the accounts are the machine's,
// shared with any other test process running at the same time.
func needUser(t *testing.T, name string) (string, string) {
	t.Helper()
	b := make([]byte, 12)
	_, err := rand.Read(b)
	require.NoError(t, err)
	pw := "pw-" + hex.EncodeToString(b)
	home, err := sshdtest.EnsureUser(name, pw)
	if errors.Is(err, sshdtest.ErrUnavailable) {
		t.Skipf("SKIPPING password login test: %v (run the tests as root)", err)
	}
	require.NoError(t, err)
	return pw, home
}

// userTempDir makes a directory in passwordUser's home that the user owns, removed
// at the end of the test.
func userTempDir(t *testing.T, home string) string {
	t.Helper()
	return userTempDirOf(t, passwordUser, home)
}

// userTempDirOf is userTempDir for the account name.
func userTempDirOf(t *testing.T, name, home string) string {
	t.Helper()
	dir, err := os.MkdirTemp(home, "sluice-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	u, err := user.Lookup(name)
	require.NoError(t, err)
	uid, err := strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(u.Gid)
	require.NoError(t, err)
	require.NoError(t, os.Chown(dir, uid, gid))
	return dir
}

// newSSHDForUser starts an sshd that lets passwordUser in with the client key too.
// sshd reads authorized_keys as the user logging in, who cannot read sshdtest's
// private directory; so the key also goes into a file anyone may read, named first.
func newSSHDForUser(t *testing.T, opts sshdtest.SSHDOptions) *sshdtest.SSHD {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	keys := filepath.Join(dir, "authorized_keys")
	opts.ExtraConfig = append(opts.ExtraConfig, "AuthorizedKeysFile "+keys)
	s := sshdtest.NewSSHD(t, opts)
	require.NoError(t, os.WriteFile(keys, ssh.MarshalAuthorizedKey(s.Signer.PublicKey()), 0o644))
	return s
}

// runWithTerminal runs the CLI with its prompts on a pty, answering each prompt in
// turn with its answer, and returns the result and everything the terminal showed.
func runWithTerminal(t *testing.T, answers [][2]string, args ...string) (result, string) {
	t.Helper()
	return runWithTerminalHook(t, nil, answers, args...)
}

// runWithTerminalHook is runWithTerminal with more of the app's test hooks set by hook.
func runWithTerminalHook(t *testing.T, hook func(a *app), answers [][2]string, args ...string) (result, string) {
	t.Helper()
	p := newTestPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		done <- runApp(t, func(a *app) {
			a.testPrompt = p.prompter()
			if hook != nil {
				hook(a)
			}
		}, args...)
	}()
	at := 0
	for _, qa := range answers {
		at = p.waitFor(ctx, t, qa[0], at)
		p.typeLine(t, qa[1])
	}
	r := <-done
	return r, p.shownText()
}

// Password login with the prompt on a terminal: nothing on the command line, no
// echo, and a wrong password gets another try, as with ssh.
func TestSSHPasswordPrompt(t *testing.T) {
	isolateEnv(t)
	pw, home := needPasswordUser(t)
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{ExtraConfig: []string{"PasswordAuthentication yes"}})
	dir := userTempDir(t, home)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o644))

	prompt := passwordUser + "@127.0.0.1's password: "
	r, shown := runWithTerminal(t, [][2]string{{prompt, "wrong-" + pw}, {prompt, pw}},
		"-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port), "ls", passwordUser+"@127.0.0.1:"+dir)
	requireOK(t, r)
	require.Equal(t, "hello.txt\n", r.stdout)
	require.Equal(t, 2, strings.Count(shown, prompt), "asked again after the wrong one: %q", shown)
	require.NotContains(t, shown, pw, "the password was echoed")
	require.Contains(t, s.Log(), "Accepted password for "+passwordUser)

	// Without a terminal there is nothing to ask with: a clear error, no hang.
	r = runCLI(t, "-known-hosts", s.KnownHostsFile, "-P", strconv.Itoa(s.Port), "ls", passwordUser+"@127.0.0.1:"+dir)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "no SSH keys and no terminal to ask for a password")
}

// An encrypted key's passphrase is asked on the terminal, and an unknown host key
// can be accepted at the prompt, which records it.
func TestSSHPassphraseAndHostKeyPrompt(t *testing.T) {
	isolateEnv(t)
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("OpenSSH's ssh-keygen is not installed")
	}
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{})
	// ssh-keygen with one KDF round: x/crypto always uses 16, which takes seconds
	// under the race detector, and the cost of the KDF is not what is tested.
	locked := filepath.Join(t.TempDir(), "locked")
	out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-a", "1", "-N", "open sesame", "-C", "locked", "-f", locked).CombinedOutput()
	require.NoError(t, err, "%s", out)
	pubText, err := os.ReadFile(locked + ".pub")
	require.NoError(t, err)
	pub, _, _, _, err := ssh.ParseAuthorizedKey(pubText)
	require.NoError(t, err)
	require.NoError(t, s.AuthorizeKey(pub))
	kh := filepath.Join(t.TempDir(), "known_hosts")
	dir := t.TempDir()

	r, shown := runWithTerminal(t, [][2]string{
		{"Are you sure you want to continue connecting (yes/no/[fingerprint])? ", "yes"},
		{"Enter passphrase for key '" + locked + "': ", "open sesame"},
	}, "-i", locked, "-P", strconv.Itoa(s.Port), "-o", "UserKnownHostsFile="+kh, "-o", "HashKnownHosts=no", "mkdir", s.User+"@127.0.0.1:"+dir+"/made")
	requireOK(t, r)
	require.DirExists(t, filepath.Join(dir, "made"))
	require.Contains(t, shown, "The authenticity of host '[127.0.0.1]:"+strconv.Itoa(s.Port)+"' can't be established.")
	require.Contains(t, shown, ssh.FingerprintSHA256(s.HostKey))
	require.NotContains(t, shown, "open sesame", "the passphrase was echoed")
	line, err := os.ReadFile(kh)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(line), "[127.0.0.1]:"+strconv.Itoa(s.Port)+" ssh-ed25519 "), "%s", line)

	// "no" at the prompt refuses, and records nothing.
	kh2 := filepath.Join(t.TempDir(), "known_hosts")
	r, _ = runWithTerminal(t, [][2]string{{"(yes/no/[fingerprint])? ", "no"}},
		"-i", s.KeyFile, "-P", strconv.Itoa(s.Port), "-o", "UserKnownHostsFile="+kh2, "ls", s.User+"@127.0.0.1:"+dir)
	require.Equal(t, exitFail, r.code)
	require.Contains(t, r.stderr, "host key of [127.0.0.1]:"+strconv.Itoa(s.Port)+" not accepted")
	require.NoFileExists(t, kh2)
}
