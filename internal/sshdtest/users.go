package sshdtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// validUserName is what EnsureUser accepts: a plain, portable login name, so that
// nothing odd reaches useradd or chpasswd.
var validUserName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,30}$`)

// EnsureUser makes sure a local account name exists with a home directory and the
// given password, for tests of password logins and of paths under a home that is not
// root's. It is idempotent: an existing account only gets its password set again. It
// needs root (useradd, chpasswd); otherwise it returns an error wrapping
// ErrUnavailable. The private sshd's AuthorizedKeysFile is shared by every user, so the
// account can also log in with the SSHD's client key. It returns the home directory.
func EnsureUser(name, password string) (string, error) {
	if !validUserName.MatchString(name) {
		return "", fmt.Errorf("sshdtest: user name %q is not a plain login name", name)
	}
	if strings.ContainsAny(password, ":\n\r") || password == "" {
		return "", errors.New("sshdtest: the password must be non-empty without ':' or newlines")
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: creating user %s needs root", ErrUnavailable, name)
	}
	if _, err := user.Lookup(name); err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return "", fmt.Errorf("sshdtest: looking up %s: %w", name, err)
		}
		out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", name).CombinedOutput()
		// Another test process may have created it meanwhile (exit 9: name in use).
		if err != nil && !strings.Contains(string(out), "already exists") {
			return "", fmt.Errorf("%w: useradd %s: %v: %s", ErrUnavailable, name, err, out)
		}
	}
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(name + ":" + password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("sshdtest: chpasswd for %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("sshdtest: %w", err)
	}
	if err := os.MkdirAll(u.HomeDir, 0o755); err != nil {
		return "", fmt.Errorf("sshdtest: %w", err)
	}
	return u.HomeDir, nil
}

// loginAs makes name the account ClientConfig logs in as (SSHDOptions.LoginUser). sshd
// reads authorized_keys as that user, so Dir becomes traversable (the private keys in
// it stay 0600) and authorized_keys readable. The account gets a random password: with
// UsePAM off, sshd refuses a locked account even for key logins, and password logins
// are off on this server.
func (s *SSHD) loginAs(name string) error {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return fmt.Errorf("sshdtest: %w", err)
	}
	if _, err := EnsureUser(name, hex.EncodeToString(pw)); err != nil {
		return err
	}
	if err := os.Chmod(s.Dir, 0o711); err != nil {
		return fmt.Errorf("sshdtest: %w", err)
	}
	s.User = name
	return nil
}

// KillSessions kills every process under the listening sshd (the per-connection sshd
// processes and the sftp-servers they started) with SIGKILL, as a crash or a dropped
// network path would end them: the clients see their connections die mid-request.
// The listener stays up, so new connections are served. It returns how many
// processes were signalled.
func (s *SSHD) KillSessions() int {
	kids := descendants(s.cmd.Process.Pid)
	signalAll(kids, syscall.SIGKILL)
	return len(kids)
}

// WaitSessionsGone waits, at most timeout, until every process under the listening
// sshd now (each connection's sshd and the sftp-servers it started) has exited, and
// reports whether they all have. Once a client's connections are closed or killed,
// that is when the server stops touching its files. Processes are another program's
// state: it polls.
func (s *SSHD) WaitSessionsGone(timeout time.Duration) bool {
	return len(waitGone(descendants(s.cmd.Process.Pid), timeout)) == 0
}

// AuthorizeKey lets the client key pub log in too, as any user: it is appended to the
// server's authorized_keys, which sshd reads at each login.
func (s *SSHD) AuthorizeKey(pub ssh.PublicKey) error {
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("sshdtest: %w", err)
	}
	_, err = f.Write(ssh.MarshalAuthorizedKey(pub))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sshdtest: %w", err)
	}
	return nil
}
