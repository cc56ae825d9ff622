package sftp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp"
)

// Connect over SSH: dial with golang.org/x/crypto/ssh, then start SFTP on the
// connection. The Client does not own the SSH connection; close both.
func ExampleNewClient() {
	addr, config, stop := exampleSSHD() // a private sshd; use your own host and config
	defer stop()
	ctx := context.Background()

	conn, err := ssh.Dial("tcp", addr, config)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c, err := sftp.NewClient(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	fi, err := c.Stat(ctx, "/")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fi.IsDir())
	// Output: true
}

// Speak SFTP over any pair of pipes: here to OpenSSH's sftp-server run locally.
func ExampleNewClientPipe() {
	dir, cleanup := exampleLocal()
	defer cleanup()
	cmd := exec.Command("/usr/lib/openssh/sftp-server", "-d", dir)
	w, err := cmd.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer cmd.Wait() // the server exits once Close closes its stdin

	c, err := sftp.NewClientPipe(context.Background(), r, w)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	wd, err := c.Getwd(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(wd == dir)
	// Output: true
}

// Stripe a pipe Client, the way programs that run `ssh host -s sftp` start SFTP:
// WithPipeOpener starts another ssh process for each extra lane, so a large transfer
// on a long link moves over several SSH connections at once. The opener may be
// called from several goroutines at once.
func ExampleWithPipeOpener() {
	ctx := context.Background()
	var mu sync.Mutex
	var procs []*exec.Cmd
	sshSFTP := func(ctx context.Context) (io.Reader, io.WriteCloser, error) {
		// ctx only bounds the start: the process must outlive it.
		cmd := exec.Command("ssh", "-s", "user@host.example", "sftp")
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		r, err := cmd.StdoutPipe()
		if err != nil {
			w.Close()
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		mu.Lock()
		procs = append(procs, cmd)
		mu.Unlock()
		return r, w, nil
	}
	// Reap the processes once the Client has closed their pipes (deferred first,
	// so it runs after Close).
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, cmd := range procs {
			cmd.Wait()
		}
	}()

	r, w, err := sshSFTP(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := sftp.NewClientPipe(ctx, r, w, sftp.WithPipeOpener(sshSFTP))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Get(ctx, "big.iso", "big.iso"); err != nil {
		log.Fatal(err)
	}
}

// Let a Client dial more SSH connections to the same server: for servers that allow
// few sessions per connection, and to spread a large transfer's lanes so that
// encryption runs on several cores at both ends. The Client closes the connections
// it dialled; the one given to NewClient stays the caller's.
func ExampleWithDialer() {
	ctx := context.Background()
	config := &ssh.ClientConfig{ /* user, auth, host key check */ }
	dial := func(ctx context.Context) (*ssh.Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", "host.example:22")
		if err != nil {
			return nil, err
		}
		// The handshake takes no context: end it when ctx ends.
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		conn, chans, reqs, err := ssh.NewClientConn(nc, "host.example:22", config)
		if !stop() && err == nil { // ctx ended just as the handshake did
			conn.Close()
			err = ctx.Err()
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		return ssh.NewClient(conn, chans, reqs), nil
	}
	conn, err := dial(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c, err := sftp.NewClient(ctx, conn, sftp.WithDialer(dial), sftp.WithChannels(16))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, "big.iso", "big.iso"); err != nil {
		log.Fatal(err)
	}
}

// Upload with io.Copy: File.ReadFrom keeps many WRITEs in flight.
func ExampleClient_Create() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	f, err := c.Create(ctx, "hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	n, err := io.Copy(f, strings.NewReader("hello, world\n"))
	if err != nil {
		f.Close()
		log.Fatal(err)
	}
	// A write error can surface only at Close: check it.
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "bytes uploaded")
	// Output: 13 bytes uploaded
}

// Download with io.Copy: File.WriteTo keeps many READs in flight.
func ExampleClient_Open() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	if err := c.WriteFile(ctx, "hello.txt", []byte("hello, world\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	f, err := c.Open(ctx, "hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(os.Stdout, f); err != nil {
		log.Fatal(err)
	}
	// Output: hello, world
}

// Copy a whole tree up and back down: Put and Get with Recursive move many files at
// once, and each file lands whole or not at all.
func ExampleClient_Put() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	local, cleanup := exampleLocal()
	defer cleanup()
	writeExampleFile(filepath.Join(local, "site", "index.html"), "<h1>hi</h1>\n")
	writeExampleFile(filepath.Join(local, "site", "css", "main.css"), "h1 {}\n")

	if err := c.Put(ctx, filepath.Join(local, "site"), "site", sftp.Recursive()); err != nil {
		log.Fatal(err)
	}
	if err := c.Get(ctx, "site", filepath.Join(local, "copy"), sftp.Recursive()); err != nil {
		log.Fatal(err)
	}
	css, err := os.ReadFile(filepath.Join(local, "copy", "css", "main.css"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", css)
	// Output: h1 {}
}

// Walk a remote tree in lexical order; fs.SkipDir prunes a directory.
func ExampleClient_WalkDir() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	for _, name := range []string{"src/a.go", "src/b.go", "src/.git/HEAD", "README"} {
		if err := c.MkdirAll(ctx, filepath.Dir(name), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := c.WriteFile(ctx, name, nil, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	err := c.WalkDir(ctx, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		fmt.Println(p)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// .
	// README
	// src
	// src/a.go
	// src/b.go
}

// Match remote names with path.Match patterns.
func ExampleClient_Glob() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	for _, name := range []string{"logs/2024-01.log", "logs/2024-02.log", "logs/2025-01.log", "logs/notes.txt"} {
		c.MkdirAll(ctx, "logs", 0o755)
		if err := c.WriteFile(ctx, name, nil, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	matches, err := c.Glob(ctx, "logs/2024-*.log")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(matches)
	// Output: [logs/2024-01.log logs/2024-02.log]
}

// Branch on errors with errors.Is: the client maps what the server says onto the
// standard errors where it can.
func Example_errors() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()

	_, err := c.Stat(ctx, "missing")
	fmt.Println(errors.Is(err, fs.ErrNotExist))

	c.Mkdir(ctx, "d", 0o755)
	err = c.Mkdir(ctx, "d", 0o755)
	fmt.Println(errors.Is(err, fs.ErrExist))

	c.WriteFile(ctx, "d/f", nil, 0o644)
	err = c.Remove(ctx, "d")
	fmt.Println(errors.Is(err, syscall.ENOTEMPTY))

	// The server's own answer is there too.
	var se *sftp.StatusError
	fmt.Println(errors.As(err, &se), se.Code)

	// Once the connection is gone, every call says so, and Done is closed.
	c.Close()
	_, err = c.Stat(ctx, ".")
	<-c.Done()
	fmt.Println(errors.Is(err, net.ErrClosed))
	// Output:
	// true
	// true
	// true
	// true FAILURE
	// true
}

// Copy a file inside the server (copy-data): no data crosses the network. Where the
// server lacks the extension, fall back to moving the data through the client.
func ExampleClient_Copy() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	if err := c.WriteFile(ctx, "a.txt", []byte("some data\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	err := c.Copy(ctx, "a.txt", "b.txt")
	if errors.Is(err, errors.ErrUnsupported) {
		err = copyThroughClient(ctx, c, "a.txt", "b.txt")
	}
	if err != nil {
		log.Fatal(err)
	}
	data, err := c.ReadFile(ctx, "b.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", data)
	// Output: some data
}

func copyThroughClient(ctx context.Context, c *sftp.Client, src, dst string) error {
	in, err := c.Open(ctx, src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := c.Create(ctx, dst)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// List a directory of any size a page at a time.
func ExampleClient_DirEntries() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	for i := range 3 {
		c.WriteFile(ctx, fmt.Sprintf("f%d", i), bytes.Repeat([]byte("x"), i), 0o644)
	}

	var total int64
	for de, err := range c.DirEntries(ctx, ".") {
		if err != nil {
			log.Fatal(err)
		}
		info, _ := de.Info() // from the listing itself: no request
		total += info.Size()
	}
	fmt.Println(total, "bytes")
	// Output: 3 bytes
}

// Read a remote tree through io/fs, rooted at any remote directory.
func ExampleClient_DirFS() {
	c, done := exampleClient()
	defer done()
	ctx := context.Background()
	c.MkdirAll(ctx, "srv/www", 0o755)
	c.WriteFile(ctx, "srv/www/index.html", []byte("<h1>hi</h1>\n"), 0o644)
	root, err := c.RealPath(ctx, "srv")
	if err != nil {
		log.Fatal(err)
	}

	fsys := c.DirFS(root) // an absolute path
	matches, err := fs.Glob(fsys, "*/*.html")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(matches)
	// Output: [www/index.html]
}
