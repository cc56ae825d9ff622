//go:build linux

package realserver

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

var launchers = []struct {
	name  string
	start func(tb testing.TB, root string) *Server
}{
	{"proftpd", StartProFTPD},
	{"asyncssh", StartAsyncSSH},
	{"paramiko", StartParamiko},
	{"dropbear", StartDropbear},
}

// Each server lets in its one client key, starts the sftp subsystem for it, and
// refuses any other key.
func TestServersAuthorizeOneKey(t *testing.T) {
	for _, l := range launchers {
		t.Run(l.name, func(t *testing.T) {
			srv := l.start(t, t.TempDir())
			user := srv.User
			if user == "" {
				user = "u1" // the Python servers: a directory per user
			}
			sc, err := srv.DialAs(user)
			require.NoError(t, err)
			defer sc.Close()
			sess, err := sc.NewSession()
			require.NoError(t, err)
			defer sess.Close()
			require.NoError(t, sess.RequestSubsystem("sftp"))

			_, other, err := ed25519.GenerateKey(rand.Reader)
			require.NoError(t, err)
			signer, err := ssh.NewSignerFromKey(other)
			require.NoError(t, err)
			cfg := srv.clientConfig(user)
			cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
			_, err = ssh.Dial("tcp", srv.Addr, cfg)
			require.ErrorContains(t, err, "unable to authenticate")
		})
	}
}

// The Python servers map a user name to a directory under their root, so a name
// that could leave it is refused.
func TestPythonServersRefuseUnsafeUserNames(t *testing.T) {
	for _, start := range []func(testing.TB, string) *Server{StartAsyncSSH, StartParamiko} {
		srv := start(t, t.TempDir())
		for _, user := range []string{"..", "a/b", ""} {
			_, err := srv.DialAs(user)
			require.Error(t, err, "%s: user %q", srv.Name, user)
		}
	}
}

func TestRFC4716(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := ssh.NewSignerFromKey(priv)
	require.NoError(t, err)
	got := rfc4716(signer.PublicKey())
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Equal(t, "---- BEGIN SSH2 PUBLIC KEY ----", lines[0])
	require.Equal(t, "---- END SSH2 PUBLIC KEY ----", lines[len(lines)-1])
	body := strings.Join(lines[1:len(lines)-1], "")
	for _, l := range lines[1 : len(lines)-1] {
		require.LessOrEqual(t, len(l), 72, "RFC 4716 lines are at most 72 bytes")
	}
	blob, err := base64.StdEncoding.DecodeString(body)
	require.NoError(t, err)
	require.Equal(t, signer.PublicKey().Marshal(), blob)
}

func TestParseAuthorizedLine(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := ssh.NewSignerFromKey(priv)
	require.NoError(t, err)
	out := "Public key portion is:\n" + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " root@host\nFingerprint: sha256:xyz\n"
	k, err := parseAuthorizedLine([]byte(out))
	require.NoError(t, err)
	require.Equal(t, signer.PublicKey().Marshal(), k.Marshal())
	_, err = parseAuthorizedLine([]byte("Generating key\n"))
	require.Error(t, err)
}
