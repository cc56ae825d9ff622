//go:build linux

package realserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshdtest"
)

// dropbearPath is where Debian's dropbear-bin puts the server.
const dropbearPath = "/usr/sbin/dropbear"

// StartDropbear serves root with dropbear running OpenSSH's sftp-server, as on small
// systems that pair the two: dropbear is the SSH layer (its 24 KiB receive window and
// 32759-byte packets), sftp-server the SFTP one.
//
// dropbear reads authorized keys only from ~/.ssh of the login user and runs the
// subsystem in that user's home. So it runs in a private mount namespace (unshare)
// where a temporary directory is mounted over the home: the real home is untouched
// and invisible to it. A forced command (-c) runs sftp-server with -d root, so
// relative paths start at root, as with the other servers. It needs root for the
// mount namespace.
func StartDropbear(tb testing.TB, root string) *Server {
	tb.Helper()
	if _, err := os.Stat(dropbearPath); err != nil {
		skipf(tb, "dropbear: %v (apt-get install dropbear-bin)", err)
	}
	sftpServer := sshdtest.SFTPServerPath()
	if sftpServer == "" {
		skipf(tb, "dropbear: OpenSSH's sftp-server is missing (apt-get install openssh-sftp-server)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		skipf(tb, "dropbear: unshare is missing (apt-get install util-linux): %v", err)
	}
	if os.Geteuid() != 0 {
		skipf(tb, "dropbear: must start as root to mount its private home (euid %d)", os.Geteuid())
	}
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	hostFile := filepath.Join(dir, "host_ed25519")
	// dropbear reads only its own key format; dropbearkey prints the public half.
	out, err := exec.Command("dropbearkey", "-t", "ed25519", "-f", hostFile).Output()
	if err != nil {
		tb.Fatalf("dropbearkey: %v", err)
	}
	hostKey, err := parseAuthorizedLine(out)
	if err != nil {
		tb.Fatalf("dropbearkey output %q: %v", out, err)
	}
	client, err := sshdtest.NewKeyFile(filepath.Join(dir, "client_ed25519"), "realserver client")
	if err != nil {
		tb.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := exec.Command(unshare, "--mount", "--propagation", "private", "true").Run(); err != nil {
		skipf(tb, "dropbear: cannot make a mount namespace here (unshare --mount): %v", err)
	}
	p, addr := listenOnFreePort(tb, "dropbear", func(port int) (*proc, error) {
		// sh mounts the home and then becomes dropbear (exec), so the process started
		// is the one stopped.
		cmd := exec.Command(unshare, "--mount", "--propagation", "private",
			"sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`, home, u.HomeDir,
			dropbearPath, "-F", "-E", "-s", "-m", "-j", "-k",
			"-p", fmt.Sprintf("127.0.0.1:%d", port), "-r", hostFile, "-P", filepath.Join(dir, "dropbear.pid"),
			"-c", sftpServer+" -d '"+root+"'")
		return start(cmd, filepath.Join(dir, "dropbear.log"))
	})
	s := &Server{Name: "dropbear", Addr: addr, User: u.Username, Signer: client, HostKey: hostKey, Root: root, proc: p}
	register(tb, s)
	return s
}

// parseAuthorizedLine finds the "ssh-... AAAA..." line in dropbearkey's output.
func parseAuthorizedLine(out []byte) (ssh.PublicKey, error) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("ssh-")) {
			k, _, _, _, err := ssh.ParseAuthorizedKey(line)
			return k, err
		}
	}
	return nil, fmt.Errorf("no public key line")
}

// DropbearVersion is what `dropbear -V` reports.
func DropbearVersion() (string, error) {
	out, err := exec.Command(dropbearPath, "-V").CombinedOutput()
	return string(bytes.TrimSpace(out)), err
}
