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
	"syscall"

	"github.com/sluicehq/sftp"
)

// The examples in this file run against OpenSSH's sftp-server started on this machine
// (startLocalServer, below), so that each is a whole program that runs anywhere
// OpenSSH is installed; the test suite runs them and checks their output. To talk to a
// remote server, dial it with ssh.Dial and call sftp.NewClient: see NewClient's
// example (example_ssh_test.go).

// startLocalServer runs OpenSSH's sftp-server on this machine over pipes, serving a
// new temporary directory (its start directory, where relative names land). It
// returns a Client on it, and stop, which closes the Client, waits for the server to
// exit and removes the directory.
func startLocalServer(ctx context.Context) (c *sftp.Client, stop func(), err error) {
	dir, err := os.MkdirTemp("", "sftp-example-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	server := exec.Command(sftpServerPath(), "-d", dir)
	w, err := server.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	r, err := server.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := server.Start(); err != nil {
		return nil, nil, err
	}
	c, err = sftp.NewClientPipe(ctx, r, w)
	if err != nil {
		w.Close() // the server exits at the end of its input
		server.Wait()
		return nil, nil, err
	}
	stop = func() {
		c.Close() // closes the server's input: it exits
		server.Wait()
		os.RemoveAll(dir)
	}
	return c, stop, nil
}

// sftpServerPath is where OpenSSH's sftp-server is installed: Debian's path, then
// Fedora's and others'.
func sftpServerPath() string {
	for _, p := range []string{
		"/usr/lib/openssh/sftp-server",
		"/usr/libexec/openssh/sftp-server",
		"/usr/libexec/sftp-server",
		"/usr/lib/ssh/sftp-server",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "sftp-server" // looked up in $PATH
}

// Speak SFTP over any pair of pipes: here to OpenSSH's sftp-server run on this
// machine, serving a temporary directory.
func ExampleNewClientPipe() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sftp-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	server := exec.Command(sftpServerPath(), "-d", dir)
	w, err := server.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	r, err := server.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := server.Start(); err != nil {
		log.Fatal(err)
	}
	defer server.Wait() // the server exits once Close closes its input

	c, err := sftp.NewClientPipe(ctx, r, w)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	wd, err := c.Getwd(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(wd == dir)
	// Output: true
}

// Upload with io.Copy: File.ReadFrom keeps many WRITEs in flight.
func ExampleClient_Create() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

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
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
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

// Write a file and read it back through the same File. Create opens write-only
// (some servers refuse read-write opens), so reading through it fails at once with
// an error matching syscall.EBADF, as with an *os.File opened os.O_WRONLY; open with
// os.O_RDWR to do both.
func ExampleClient_OpenFile() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	f, err := c.Create(ctx, "notes.txt")
	if err != nil {
		log.Fatal(err)
	}
	_, err = io.ReadAll(f)
	fmt.Println(errors.Is(err, syscall.EBADF))
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}

	f, err = c.OpenFile(ctx, "notes.txt", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("read me back\n"); err != nil {
		log.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		log.Fatal(err)
	}
	if _, err := io.Copy(os.Stdout, f); err != nil {
		log.Fatal(err)
	}
	// Output:
	// true
	// read me back
}

// Read may return fewer bytes than asked for, as io.Reader allows (pkg/sftp's Read
// filled the buffer): io.ReadFull fills it.
func ExampleFile_Read() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	if err := c.WriteFile(ctx, "big", make([]byte, 4<<20), 0o644); err != nil {
		log.Fatal(err)
	}

	f, err := c.Open(ctx, "big")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	n, err := f.Read(buf) // one READ reply's worth at most
	fmt.Println(n < len(buf), err)
	n, err = io.ReadFull(f, buf)
	fmt.Println(n == len(buf), err)
	// Output:
	// true <nil>
	// true <nil>
}

// Copy a whole tree up and back down: Put and Get with Recursive move many files at
// once, and each file lands whole or not at all.
func ExampleClient_Put() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	local, err := os.MkdirTemp("", "sftp-example-local-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(local)
	site := filepath.Join(local, "site")
	if err := os.MkdirAll(filepath.Join(site, "css"), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte("<h1>hi</h1>\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "css", "main.css"), []byte("h1 {}\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	if err := c.Put(ctx, site, "site", sftp.Recursive()); err != nil {
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
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	for _, name := range []string{"src/a.go", "src/b.go", "src/.git/HEAD", "README"} {
		if err := c.MkdirAll(ctx, filepath.Dir(name), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := c.WriteFile(ctx, name, nil, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	err = c.WalkDir(ctx, ".", func(p string, d fs.DirEntry, err error) error {
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
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	if err := c.Mkdir(ctx, "logs", 0o755); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"logs/2024-01.log", "logs/2024-02.log", "logs/2025-01.log", "logs/notes.txt"} {
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
// standard errors where it can. os.IsNotExist and os.IsPermission do not work here:
// they predate errors.Is and recognise only the os package's own errors.
func Example_errors() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	_, err = c.Stat(ctx, "missing")
	fmt.Println(errors.Is(err, fs.ErrNotExist), os.IsNotExist(err))

	if err := c.Mkdir(ctx, "d", 0o755); err != nil {
		log.Fatal(err)
	}
	err = c.Mkdir(ctx, "d", 0o755)
	fmt.Println(errors.Is(err, fs.ErrExist))

	if err := c.WriteFile(ctx, "d/f", nil, 0o644); err != nil {
		log.Fatal(err)
	}
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
	// true false
	// true
	// true
	// true FAILURE
	// true
}

// Copy a file inside the server (copy-data): no data crosses the network. Where the
// server lacks the extension, fall back to moving the data through the client.
func ExampleClient_Copy() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	if err := c.WriteFile(ctx, "a.txt", []byte("some data\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	err = c.Copy(ctx, "a.txt", "b.txt")
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

// copyThroughClient copies the remote file src to dst by reading it down and writing
// it back up, with many requests in flight each way.
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
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	for i := range 3 {
		if err := c.WriteFile(ctx, fmt.Sprintf("f%d", i), bytes.Repeat([]byte("x"), i), 0o644); err != nil {
			log.Fatal(err)
		}
	}

	var total int64
	for de, err := range c.DirEntries(ctx, ".") {
		if err != nil {
			log.Fatal(err)
		}
		info, err := de.Info() // from the listing itself: no request
		if err != nil {
			log.Fatal(err)
		}
		total += info.Size()
	}
	fmt.Println(total, "bytes")
	// Output: 3 bytes
}

// Read a remote tree through io/fs, rooted at any remote directory.
func ExampleClient_DirFS() {
	ctx := context.Background()
	c, stop, err := startLocalServer(ctx) // or ssh.Dial and sftp.NewClient
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	if err := c.MkdirAll(ctx, "srv/www", 0o755); err != nil {
		log.Fatal(err)
	}
	if err := c.WriteFile(ctx, "srv/www/index.html", []byte("<h1>hi</h1>\n"), 0o644); err != nil {
		log.Fatal(err)
	}
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
