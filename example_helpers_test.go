package sftp_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// The examples run against OpenSSH's sftp-server: each starts one in a fresh
// temporary directory (its start directory, so relative paths land there) and closes
// it when done. Examples cannot take a *testing.T, so failures to set up panic.

const exampleServer = "/usr/lib/openssh/sftp-server"

// exampleEnv is a running sftp-server over pipes and a Client on it.
type exampleEnv struct {
	dir string // the server's start directory, on this machine
	cmd *exec.Cmd
	c   *sftp.Client
}

// exampleClient starts sftp-server in a new temporary directory and returns a Client
// on it, as ExampleNewClientPipe shows, and a function that closes both.
func exampleClient() (*sftp.Client, func()) {
	e := startExample()
	return e.c, e.close
}

func startExample() *exampleEnv {
	dir, err := os.MkdirTemp("", "sluice-example-")
	must(err)
	cmd := exec.Command(exampleServer, "-e", "-d", dir)
	w, err := cmd.StdinPipe()
	must(err)
	r, err := cmd.StdoutPipe()
	must(err)
	must(cmd.Start())
	c, err := sftp.NewClientPipe(context.Background(), r, w)
	must(err)
	return &exampleEnv{dir: dir, cmd: cmd, c: c}
}

func (e *exampleEnv) close() {
	e.c.Close()
	e.cmd.Wait()
	os.RemoveAll(e.dir)
}

// exampleLocal makes a local directory for an example and returns its name and a
// cleanup.
func exampleLocal() (string, func()) {
	dir, err := os.MkdirTemp("", "sluice-example-local-")
	must(err)
	return dir, func() { os.RemoveAll(dir) }
}

func writeExampleFile(name, data string) {
	must(os.MkdirAll(filepath.Dir(name), 0o755))
	must(os.WriteFile(name, []byte(data), 0o644))
}

// exampleSSHD starts a private sshd on 127.0.0.1 for ExampleNewClient and returns
// its address, a client configuration that trusts it, and a cleanup.
func exampleSSHD() (string, *ssh.ClientConfig, func()) {
	s, err := sshdtest.StartSSHD(sshdtest.SSHDOptions{})
	must(err)
	return s.Addr, s.ClientConfig(), func() { s.Close() }
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("example setup: %v", err))
	}
}
