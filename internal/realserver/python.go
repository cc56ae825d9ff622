//go:build linux

package realserver

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pythonPath is Debian's interpreter, the one python3-asyncssh and python3-paramiko
// install into: a python3 earlier on PATH (pyenv, a virtualenv) may lack them.
const pythonPath = "/usr/bin/python3"

//go:embed asyncssh_server.py
var asyncsshScript []byte

//go:embed paramiko_server.py
var paramikoScript []byte

// StartAsyncSSH starts asyncssh's SFTP server (asyncssh_server.py). It serves each
// login name the directory of that name under root, as "/" (asyncssh's chroot): one
// server for many tests, which log in with DialAs. Its User is "sluice".
func StartAsyncSSH(tb testing.TB, root string) *Server {
	tb.Helper()
	return startPython(tb, "asyncssh", "python3-asyncssh", asyncsshScript, root)
}

// StartParamiko starts paramiko's SFTP server with the small disk backend in
// paramiko_server.py, serving each login name the directory of that name under root as
// "/", like StartAsyncSSH.
func StartParamiko(tb testing.TB, root string) *Server {
	tb.Helper()
	return startPython(tb, "paramiko", "python3-paramiko", paramikoScript, root)
}

// PythonModuleVersion returns module.__version__ as Debian's python3 sees it.
func PythonModuleVersion(module string) (string, error) {
	out, err := exec.Command(pythonPath, "-c", "import "+module+"; print("+module+".__version__)").Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", module, err)
	}
	return string(trimNewline(out)), nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func startPython(tb testing.TB, module, pkg string, script []byte, root string) *Server {
	tb.Helper()
	if err := exec.Command(pythonPath, "-c", "import "+module).Run(); err != nil {
		skipf(tb, "%s: cannot import %s with %s (apt-get install %s): %v", module, module, pythonPath, pkg, err)
	}
	dir := tb.TempDir()
	host, client, hostFile, clientPub := keys(tb, dir)
	scriptPath := filepath.Join(dir, module+"_server.py")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		tb.Fatal(err)
	}
	// -W ignore: Debian's asyncssh warns about deprecated ciphers on import.
	cmd := exec.Command(pythonPath, "-W", "ignore", scriptPath, "--port", "0",
		"--host-key", hostFile, "--authorized-key", clientPub, "--root", root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := start(cmd, filepath.Join(dir, module+".log"))
	if err != nil {
		tb.Fatalf("%s: starting: %v", module, err)
	}
	port := readPort(tb, module, p, out)
	s := &Server{
		Name: module, Addr: fmt.Sprintf("127.0.0.1:%d", port), User: "sluice",
		Signer: client, HostKey: host.PublicKey(), Root: root, proc: p,
	}
	register(tb, s)
	return s
}
