package sftp_test

import (
	"context"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// Tests of the examples themselves: that each reads as a whole program, and that the
// SSH set-up the examples show (which they cannot run: it needs a server) works
// against a real OpenSSH server.

// Every example must be a program a reader can copy from the documentation as shown:
// go/doc (and so pkg.go.dev) renders an example as a whole program, with the helpers
// it calls, only when everything it uses is declared in its own file or imported.
// An example calling a helper from another file is shown as a bare body that does not
// compile.
func TestExamplesArePlayable(t *testing.T) {
	names, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		// The package clause first: most test files are the internal package's.
		f, err := parser.ParseFile(fset, name, nil, parser.PackageClauseOnly)
		require.NoError(t, err)
		if f.Name.Name != "sftp_test" {
			continue
		}
		f, err = parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	examples := doc.Examples(files...)
	require.NotEmpty(t, examples)
	for _, ex := range examples {
		require.NotNil(t, ex.Play, "Example%s cannot be shown as a whole program: it uses a name declared in another file", exampleName(ex))
	}
}

func exampleName(ex *doc.Example) string {
	if ex.Suffix == "" {
		return ex.Name
	}
	return strings.TrimSuffix(ex.Name, "_"+ex.Suffix) + "_" + ex.Suffix
}

// ExampleNewClient's set-up, run against a private sshd: sshConfig's key login and
// host key check, ssh.Dial, sftp.NewClient and a call. And the host key check holds:
// a known_hosts that lists another key for the address refuses the server.
func TestExampleSSHConfig(t *testing.T) {
	s := sshdtest.NewSSHD(t, sshdtest.SSHDOptions{}) // skips where sshd cannot run (not root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	config, err := sshConfig(s.User, s.KeyFile, s.KnownHostsFile)
	require.NoError(t, err)
	conn, err := ssh.Dial("tcp", s.Addr, config)
	require.NoError(t, err)
	defer conn.Close()
	c, err := sftp.NewClient(ctx, conn)
	require.NoError(t, err)
	defer c.Close()
	wd, err := c.Getwd(ctx)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(wd, "/"), "the start directory %q", wd)

	other := s.Signer.PublicKey() // the client's key: any key but the host's
	wrong := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{s.Addr}, other) + "\n"
	require.NoError(t, os.WriteFile(wrong, []byte(line), 0o600))
	config, err = sshConfig(s.User, s.KeyFile, wrong)
	require.NoError(t, err)
	_, err = ssh.Dial("tcp", s.Addr, config)
	var keyErr *knownhosts.KeyError
	require.ErrorAs(t, err, &keyErr, "a host key known_hosts does not list is refused")
}
