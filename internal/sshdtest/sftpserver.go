package sshdtest

import (
	"fmt"
	"io"
	"os/exec"
)

// Command is how every test starts OpenSSH's sftp-server: `sftp-server -e -d dir
// args...`, the binary found by SFTPServerPath's rule, as the calling user. The error
// matches ErrUnavailable when sftp-server is not installed.
func Command(dir string, args ...string) (*exec.Cmd, error) {
	path := SFTPServerPath()
	if path == "" {
		return nil, fmt.Errorf("%w: sftp-server is missing (apt-get install openssh-sftp-server)", ErrUnavailable)
	}
	return exec.Command(path, append([]string{"-e", "-d", dir}, args...)...), nil
}

// StartSFTPServerCmd runs `sftp-server -e -d dir args...` as the calling user with its
// stdin and stdout as pipes: r reads the server's replies, w carries requests. stderr
// (the server's log, -e) goes to stderr, which may be nil. The server exits when w is
// closed; the caller then calls cmd.Wait, which also closes r. For benchmarks and other
// code without a testing.TB.
func StartSFTPServerCmd(dir string, stderr io.Writer, args ...string) (cmd *exec.Cmd, r io.ReadCloser, w io.WriteCloser, err error) {
	if cmd, err = Command(dir, args...); err != nil {
		return nil, nil, nil, err
	}
	cmd.Stderr = stderr
	if w, err = cmd.StdinPipe(); err != nil {
		return nil, nil, nil, fmt.Errorf("sshdtest: %w", err)
	}
	if r, err = cmd.StdoutPipe(); err != nil {
		_ = w.Close()
		return nil, nil, nil, fmt.Errorf("sshdtest: %w", err)
	}
	if err = cmd.Start(); err != nil {
		_ = w.Close()
		return nil, nil, nil, fmt.Errorf("sshdtest: starting sftp-server: %w", err)
	}
	return cmd, r, w, nil
}
