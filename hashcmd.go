package sftp

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// Hashing with a command on the SSH connection (WithHashCommand): "sha256sum PATH" in
// an exec session beside the SFTP ones, as rclone's sftp backend does. OpenSSH's sshd
// runs it through the user's login shell; SFTPGo (md5sum, sha1sum, sha256sum, sha384sum,
// sha512sum as built-in commands, md5sum and sha1sum enabled by default) and rclone
// serve sftp (md5sum, sha1sum, sha256sum) answer it themselves. Only the digest
// crosses the network.
//
// The path is made absolute (RealPath) and every byte of it a POSIX shell could read as
// syntax is escaped with a backslash, a newline as '<newline>' (a backslash before a
// newline would join the lines): so no name a caller or a server can produce runs
// anything but the one command with that one argument. Backslashes rather than single
// quotes because the built-in commands parse the line themselves: rclone removes
// backslashes but keeps quotes, SFTPGo splits like a shell (google/shlex) and then
// strips quotes at the ends of the argument, which would name another file.
//
// The answer is parsed strictly: one line, the digest in hex of exactly the algorithm's
// length, two spaces (or " *"), and the path asked for, escaped as GNU coreutils does
// when it holds a backslash, a newline or a carriage return. Anything else is an error
// that quotes what came back; the output is cut short at a bound a true answer never
// reaches, and the session closed there.
//
// A server that refuses the exec request, or whose shell finds no such command (exit
// status 126 or 127), has no such command: the Client remembers that per algorithm and
// reads instead. A session refused (sshd's MaxSessions, counting the SFTP channels a
// striping Client keeps open) is not remembered: that hash is read, and the next one
// tries again.

// WithHashCommand lets Hash and Verify run a command such as sha256sum on the server,
// over the Client's SSH connection, when the server lacks the check-file extension:
// the server reads the file and only its digest crosses the network, where otherwise
// the whole file is read back. It is off by default because it starts a process on the
// server through the login shell (an exec request), which some administrators watch
// for or forbid; a server that refuses it is just not asked again. The command must see
// the paths SFTP sees: where the SFTP server is chrooted and the shell is not, it hashes
// another file or none, and the Hash fails (Verify fails too, never passes wrongly).
// NewClientPipe has no SSH connection and ignores it.
func WithHashCommand() Option {
	return func(o *options) error {
		o.hashCommand = true
		return nil
	}
}

// commandNames are the commands that print each algorithm's digest.
var commandNames = map[HashAlgorithm]string{SHA256: "sha256sum", SHA512: "sha512sum", SHA1: "sha1sum", MD5: "md5sum"}

// errCommandUnavailable marks a command the server does not run: not remembered as an
// answer about the file, only as one about the server.
var errCommandUnavailable = errors.New("sftp: the server has no such command")

// commandConn is the caller's SSH connection, where hash commands run; nil for a pipe
// client.
func (c *Client) commandConn() *ssh.Client {
	if src, ok := c.source.(*sshChannels); ok {
		return src.links[0].sc
	}
	return nil
}

// commandSum hashes the whole of name with alg's command on the server. ok is false
// when the Client may not or cannot run it: then the next means is tried.
func (c *Client) commandSum(ctx context.Context, name string, alg HashAlgorithm) (sum []byte, ok bool, err error) {
	sc := c.commandConn()
	if !c.opts.hashCommand || sc == nil || c.hashes.command(alg) == refused {
		return nil, false, nil
	}
	abs := name
	if !path.IsAbs(name) {
		// REALPATH, not RealPath: a name starting with "~" is a name here, as it is to
		// every other SFTP request, not a home directory to expand.
		abs, err = c.nameCall(ctx, "REALPATH", func(dst []byte, id uint32) []byte {
			return appendString1(dst, sshfx.TypeRealpath, id, name)
		})
		if err != nil {
			return nil, false, err
		}
	}
	if strings.IndexByte(abs, 0) >= 0 {
		return nil, false, fmt.Errorf("sftp: %s: a name with a NUL byte cannot be an argument", commandNames[alg])
	}
	out, err := runCommand(ctx, sc, commandNames[alg]+" "+shellEscape(abs), commandOutputMax(abs))
	switch {
	case errors.Is(err, errCommandUnavailable):
		c.hashes.setCommand(alg, refused)
		return nil, false, nil
	case errors.Is(err, errNoSession):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	c.hashes.setCommand(alg, offered)
	sum, err = parseSumLine(out, alg, abs)
	return sum, err == nil, err
}

// probeCommand learns whether the server runs alg's command, by hashing nothing: the
// command reads its empty standard input and prints the empty digest (GNU coreutils,
// SFTPGo and rclone all do). It reports offered, refused, or unknown when it could not
// tell (no session now).
func (c *Client) probeCommand(ctx context.Context, alg HashAlgorithm) learned {
	sc := c.commandConn()
	if !c.opts.hashCommand || sc == nil {
		return refused
	}
	if l := c.hashes.command(alg); l != unknown {
		return l
	}
	out, err := runCommand(ctx, sc, commandNames[alg], commandOutputMax("-"))
	switch {
	case errors.Is(err, errCommandUnavailable):
		c.hashes.setCommand(alg, refused)
		return refused
	case err != nil:
		return unknown
	}
	sum, err := parseSumLine(out, alg, "-")
	if err != nil || !bytes.Equal(sum, alg.emptySum()) {
		c.hashes.setCommand(alg, refused) // runs, but answers nothing this client can use
		return refused
	}
	c.hashes.setCommand(alg, offered)
	return offered
}

// commandOutputMax bounds what a command hashing name may print: the digest (at most
// 128 hex digits and a backslash), two spaces, the name escaped (at most twice as
// long) and a newline, with room to spare.
func commandOutputMax(name string) int { return 2*len(name) + 256 }

// shellEscape quotes s as one word for a POSIX shell, and for the servers that parse
// the command line themselves (see above): a backslash before every ASCII byte but
// letters, digits and "/._-", a newline as '<newline>'. Bytes from 0x80 up are no
// syntax to a shell and pass as they are.
func shellEscape(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\n':
			b.WriteString("'\n'")
		case ch >= 0x80, 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9',
			ch == '/', ch == '.', ch == '_', ch == '-':
			b.WriteByte(ch)
		default:
			b.WriteByte('\\')
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// parseSumLine reads a hash command's output, which must be exactly one line naming
// want: the digest of alg, two spaces or " *", the name (escaped as GNU coreutils does
// when the line starts with a backslash), a newline.
func parseSumLine(out []byte, alg HashAlgorithm, want string) ([]byte, error) {
	bad := func(why string) error {
		return fmt.Errorf("sftp: %s printed %q: %s", commandNames[alg], clip(string(out), 200), why)
	}
	line, ok := bytes.CutSuffix(out, []byte("\n"))
	if !ok || bytes.IndexByte(line, '\n') >= 0 {
		return nil, bad("want one line")
	}
	escaped := len(line) > 0 && line[0] == '\\'
	if escaped {
		line = line[1:]
	}
	n := 2 * alg.size()
	if len(line) < n+2 {
		return nil, bad(fmt.Sprintf("want a %s digest of %d hex digits and a name", alg, n))
	}
	sum := make([]byte, alg.size())
	if _, err := hex.Decode(sum, line[:n]); err != nil {
		return nil, bad(fmt.Sprintf("want a %s digest of %d hex digits", alg, n))
	}
	sep := string(line[n : n+2])
	if sep != "  " && sep != " *" {
		return nil, bad("want two spaces after the digest")
	}
	name := string(line[n+2:])
	if escaped {
		var err error
		if name, err = unescapeSumName(name); err != nil {
			return nil, bad(err.Error())
		}
	}
	if name != want {
		return nil, bad(fmt.Sprintf("it names %q, not %q", clip(name, 100), clip(want, 100)))
	}
	return sum, nil
}

// unescapeSumName undoes GNU coreutils' escaping of a name in a checksum line: \\, \n
// and \r; any other backslash is an error.
func unescapeSumName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch {
		case i == len(s):
			return "", errors.New("a lone backslash ends the name")
		case s[i] == '\\':
			b.WriteByte('\\')
		case s[i] == 'n':
			b.WriteByte('\n')
		case s[i] == 'r':
			b.WriteByte('\r')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

// errNoSession is runCommand's error when the server would not open a session (sshd's
// MaxSessions, say): nothing is learned about the command.
var errNoSession = errors.New("sftp: the server opened no session for the command")

// runCommand runs cmd in an exec session on sc and returns its standard output, at
// most outMax bytes: past that the session is closed and the call fails. It returns
// when the command has exited, or at once when ctx ends, closing the session. x/crypto's
// session calls take no ctx, so they run on a goroutine, which a server that never
// confirms the close keeps until the SSH connection closes.
func runCommand(ctx context.Context, sc *ssh.Client, cmd string, outMax int) ([]byte, error) {
	out := &cappedBuffer{max: outMax, over: make(chan struct{})}
	errOut := &cappedBuffer{max: 512}
	var mu sync.Mutex
	var sess *ssh.Session
	stopped := false
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if sess != nil {
			sess.Close()
		}
	}
	done := make(chan error, 1)
	go func() {
		s, err := sc.NewSession()
		if err != nil {
			done <- fmt.Errorf("%w: %w", errNoSession, err)
			return
		}
		mu.Lock()
		if stopped {
			mu.Unlock()
			s.Close()
			done <- errNoSession
			return
		}
		sess = s
		mu.Unlock()
		s.Stdout, s.Stderr = out, errOut
		if err := s.Start(cmd); err != nil {
			s.Close()
			done <- fmt.Errorf("%w: %w", errCommandUnavailable, err)
			return
		}
		err = s.Wait()
		s.Close()
		done <- err
	}()
	select {
	case err := <-done:
		if out.overflowed() {
			return nil, errTooLong(cmd, outMax, out)
		}
		return out.bytes(), commandErr(cmd, err, errOut.bytes())
	case <-out.over:
		stop()
		return nil, errTooLong(cmd, outMax, out)
	case <-ctx.Done():
		stop()
		return nil, ctxError(ctx, commandWord(cmd))
	}
}

// commandErr makes the error of a command that ran (nil when it exited with status 0):
// exit status 126 or 127, the shell's "cannot run" and "not found", means the server
// has no such command.
func commandErr(cmd string, err error, stderr []byte) error {
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && (ee.ExitStatus() == 126 || ee.ExitStatus() == 127):
		return fmt.Errorf("%w: %s exited with status %d: %q", errCommandUnavailable, commandWord(cmd), ee.ExitStatus(), clip(string(stderr), 200))
	case errors.As(err, &ee):
		return fmt.Errorf("sftp: %s exited with status %d: %q", commandWord(cmd), ee.ExitStatus(), clip(string(stderr), 200))
	case errors.Is(err, errNoSession), errors.Is(err, errCommandUnavailable):
		return err
	}
	return fmt.Errorf("sftp: %s: %w", commandWord(cmd), err)
}

func errTooLong(cmd string, outMax int, out *cappedBuffer) error {
	return fmt.Errorf("sftp: %s printed more than %d bytes (it began %q)", commandWord(cmd), outMax, clip(string(out.bytes()), 200))
}

func commandWord(cmd string) string {
	w, _, _ := strings.Cut(cmd, " ")
	return w
}

// cappedBuffer keeps the first max bytes written to it and drops the rest, closing
// over (when not nil) at the first byte past max. It never fails a write, so the
// session's copy goes on draining the channel.
type cappedBuffer struct {
	mu   sync.Mutex
	b    []byte
	max  int
	over chan struct{}
	past bool
}

func (w *cappedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.max - len(w.b)
	w.b = append(w.b, p[:min(max(room, 0), len(p))]...)
	if len(p) > room && !w.past {
		w.past = true
		if w.over != nil {
			close(w.over)
		}
	}
	return len(p), nil
}

func (w *cappedBuffer) overflowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.past
}

func (w *cappedBuffer) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.b)
}
