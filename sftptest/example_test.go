package sftptest_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	sftp "github.com/sluicehq/sftp"
	"github.com/sluicehq/sftp/sftptest"
)

// A test server with a ready Client: the code under test gets a real SFTP session
// and a real file tree.
func ExampleNewServer() {
	srv, err := sftptest.NewServer(sftptest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.Mkdir("/in", 0o755)
	srv.WriteFile("/in/report.csv", []byte("a,b\n1,2\n"), 0o644)

	ctx := context.Background()
	c, err := srv.Client(ctx)
	if err != nil {
		log.Fatal(err)
	}
	data, err := c.ReadFile(ctx, "in/report.csv")
	if err != nil {
		log.Fatal(err)
	}
	if err := c.WriteFile(ctx, "in/report.done", data, 0o644); err != nil {
		log.Fatal(err)
	}
	got, _ := srv.ReadFile("/in/report.done")
	fmt.Printf("%q\n", got)
	// Output: "a,b\n1,2\n"
}

// A directory on disk as the server's tree: what a client uploads can be checked
// with the os package.
func ExampleOptions_dir() {
	dir, _ := os.MkdirTemp("", "sftptest")
	defer os.RemoveAll(dir)
	srv, err := sftptest.NewServer(sftptest.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, _ := srv.Client(ctx)
	c.WriteFile(ctx, "hello.txt", []byte("hi"), 0o644)
	b, _ := os.ReadFile(filepath.Join(dir, "hello.txt"))
	fmt.Println(string(b))
	// Output: hi
}

// A personality: MinIO's SFTP server has no rename, so code that uploads to a
// temporary name and renames it fails there as it would in production.
func ExampleMinIO() {
	srv, _ := sftptest.NewServer(sftptest.Options{Personality: sftptest.MinIO()})
	defer srv.Close()
	srv.WriteFile("/upload.tmp", []byte("x"), 0o644)
	ctx := context.Background()
	c, _ := srv.Client(ctx)
	err := c.Rename(ctx, "upload.tmp", "upload.csv")
	fmt.Println(errors.Is(err, errors.ErrUnsupported))
	// Output: true
}

// A personality: AWS Transfer Family answers a whole directory in one NAME reply,
// however large, and refuses to open a file for reading and writing at once.
func ExampleAWSTransferS3() {
	srv, _ := sftptest.NewServer(sftptest.Options{Personality: sftptest.AWSTransferS3()})
	defer srv.Close()
	ctx := context.Background()
	c, _ := srv.Client(ctx)
	_, err := c.OpenFile(ctx, "f", os.O_RDWR|os.O_CREATE, 0o644)
	fmt.Println(errors.Is(err, errors.ErrUnsupported))
	// Output: true
}

// Fault injection: every REMOVE fails with PERMISSION_DENIED, so the test can see
// what the code under test does with the error.
func ExampleOptions_fail() {
	srv, _ := sftptest.NewServer(sftptest.Options{
		Fail: func(r sftptest.Request) uint32 {
			if r.Type == sftptest.TypeRemove {
				return sftptest.StatusPermissionDenied
			}
			return 0
		},
	})
	defer srv.Close()
	srv.WriteFile("/keep", nil, 0o644)
	ctx := context.Background()
	c, _ := srv.Client(ctx)
	err := c.Remove(ctx, "keep")
	fmt.Println(errors.Is(err, fs.ErrPermission))
	// Output: true
}

// Serving SFTP on an SSH channel: an SSH server of the test's own on 127.0.0.1,
// reached with NewClient as a program reaches a real server.
func ExampleServer_ServeChannel() {
	srv, _ := sftptest.NewServer(sftptest.Options{})
	defer srv.Close()
	srv.WriteFile("/motd", []byte("welcome"), 0o644)

	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(hostKey)
	config := &ssh.ServerConfig{NoClientAuth: true}
	config.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		_, chans, reqs, err := ssh.NewServerConn(nc, config)
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		for ch := range chans {
			go srv.ServeChannel(ch)
		}
	}()

	sshClient, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
		User:            "alice",
		HostKeyCallback: ssh.FixedHostKey(signer.PublicKey()),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sshClient.Close()
	ctx := context.Background()
	c, err := sftp.NewClient(ctx, sshClient)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	b, _ := c.ReadFile(ctx, "motd")
	fmt.Println(string(b))
	// Output: welcome
}
