//go:build linux

package realserver

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// proftpdPath is where Debian's proftpd-core puts the daemon; mod_sftp comes from
// proftpd-mod-crypto.
const (
	proftpdPath    = "/usr/sbin/proftpd"
	proftpdModules = "/usr/lib/proftpd"
)

// StartProFTPD serves root with ProFTPD's mod_sftp on 127.0.0.1: a virtual user from
// its own AuthUserFile, whose home is root (chrooted there, so root is "/"), logging
// in with a key from an SFTPAuthorizedUserKeys file. It needs root: ProFTPD chroots
// each session and switches to the user's uid, here the caller's own (0).
func StartProFTPD(tb testing.TB, root string) *Server {
	tb.Helper()
	if _, err := os.Stat(proftpdPath); err != nil {
		skipf(tb, "proftpd: %v (apt-get install proftpd-core proftpd-mod-crypto)", err)
	}
	if _, err := os.Stat(filepath.Join(proftpdModules, "mod_sftp.so")); err != nil {
		skipf(tb, "proftpd: no mod_sftp: %v (apt-get install proftpd-mod-crypto)", err)
	}
	if os.Geteuid() != 0 {
		skipf(tb, "proftpd: must start as root to chroot its sessions (euid %d)", os.Geteuid())
	}
	dir := tb.TempDir()
	host, client, hostFile, _ := keys(tb, dir)
	authorized := filepath.Join(dir, "authorized_keys")
	passwd := filepath.Join(dir, "passwd")
	group := filepath.Join(dir, "group")
	const user = "sluice"
	for name, content := range map[string]string{
		authorized: rfc4716(client.PublicKey()),
		// No password: the key is the only way in.
		passwd: fmt.Sprintf("%s:*:0:0:sluice test:%s:/bin/sh\n", user, root),
		group:  user + ":*:0:\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	p, addr := listenOnFreePort(tb, "proftpd", func(port int) (*proc, error) {
		conf := filepath.Join(dir, "proftpd.conf")
		if err := os.WriteFile(conf, []byte(proftpdConfig(dir, port, hostFile, authorized, passwd, group)), 0o600); err != nil {
			return nil, err
		}
		return start(exec.Command(proftpdPath, "--nodaemon", "--config", conf), filepath.Join(dir, "proftpd.log"))
	})
	s := &Server{Name: "proftpd", Addr: addr, User: user, Signer: client, HostKey: host.PublicKey(), Root: root, proc: p}
	register(tb, s)
	return s
}

// rfc4716 is key in the SSH2 public key file format, which mod_sftp's
// SFTPAuthorizedUserKeys file: reads.
func rfc4716(key ssh.PublicKey) string {
	b64 := base64.StdEncoding.EncodeToString(key.Marshal())
	var b strings.Builder
	b.WriteString("---- BEGIN SSH2 PUBLIC KEY ----\n")
	for len(b64) > 70 {
		b.WriteString(b64[:70] + "\n")
		b64 = b64[70:]
	}
	b.WriteString(b64 + "\n---- END SSH2 PUBLIC KEY ----\n")
	return b.String()
}

// proftpdConfig is a standalone server with only SFTP on 127.0.0.1:port, every file
// it writes (pid, scoreboard, logs) in dir, and nothing from /etc/proftpd.
func proftpdConfig(dir string, port int, hostKey, authorized, passwd, group string) string {
	return fmt.Sprintf(`ServerType standalone
ServerName "sluice test"
DefaultServer on
DefaultAddress 127.0.0.1
SocketBindTight on
UseIPv6 off
Port %d
User root
Group root
PidFile %s
ScoreboardFile %s
DelayTable none
WtmpLog off
TransferLog none
SystemLog %s
UseReverseDNS off
RequireValidShell off
RootLogin on
AuthOrder mod_auth_file.c
AuthUserFile %s
AuthGroupFile %s
DefaultRoot ~
AllowOverwrite on
AllowStoreRestart on
Umask 022
ModulePath %s
LoadModule mod_sftp.c
SFTPEngine on
SFTPLog %s
SFTPHostKey %s
SFTPAuthorizedUserKeys file:%s
SFTPAuthMethods publickey
`, port, filepath.Join(dir, "proftpd.pid"), filepath.Join(dir, "scoreboard"), filepath.Join(dir, "system.log"),
		passwd, group, proftpdModules, filepath.Join(dir, "sftp.log"), hostKey, authorized)
}
