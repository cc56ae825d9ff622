package sftp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/sluicehq/sftp"
)

// The examples in this file connect to a remote server, so the test suite compiles
// them but cannot run them as shown; TestExampleSSHConfig runs sshConfig and the same
// calls as ExampleNewClient against a private OpenSSH server.

// sshConfig logs in as user with the private key in keyFile, and accepts only a server
// whose host key knownHostsFile lists for the address dialled, as OpenSSH's client
// does with StrictHostKeyChecking. The key must have no passphrase (for one that has,
// see ssh.ParsePrivateKeyWithPassphrase; for an agent, golang.org/x/crypto/ssh/agent).
func sshConfig(user, keyFile, knownHostsFile string) (*ssh.ClientConfig, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, err
	}
	hostKeys, err := knownhosts.New(knownHostsFile)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys,
		Timeout:         10 * time.Second, // for the TCP connection and the handshake
	}, nil
}

// Connect over SSH: dial with golang.org/x/crypto/ssh, then start SFTP on the
// connection. The Client does not own the SSH connection: close both.
func ExampleNewClient() {
	ctx := context.Background()
	home, err := os.UserHomeDir()
	if err != nil {
		log.Fatal(err)
	}
	config, err := sshConfig("alice",
		filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, ".ssh", "known_hosts"))
	if err != nil {
		log.Fatal(err)
	}
	conn, err := ssh.Dial("tcp", "sftp.example.com:22", config)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c, err := sftp.NewClient(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	wd, err := c.Getwd(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the session starts in", wd)
}

// sshDialer returns a function that dials an SSH connection to addr within its ctx,
// the handshake included: what WithDialer and NewReconnecting take.
func sshDialer(addr string, config *ssh.ClientConfig) func(ctx context.Context) (*ssh.Client, error) {
	return func(ctx context.Context) (*ssh.Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		// The handshake takes no context: end it when ctx ends.
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		conn, chans, reqs, err := ssh.NewClientConn(nc, addr, config)
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
}

// Let a Client dial more SSH connections to the same server: for servers that allow
// few sessions per connection, and to spread a large transfer's lanes so that
// encryption runs on several cores at both ends. The Client closes the connections
// it dialled; the one given to NewClient stays the caller's.
func ExampleWithDialer() {
	ctx := context.Background()
	home, err := os.UserHomeDir()
	if err != nil {
		log.Fatal(err)
	}
	config, err := sshConfig("alice",
		filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, ".ssh", "known_hosts"))
	if err != nil {
		log.Fatal(err)
	}
	dial := sshDialer("sftp.example.com:22", config)
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
		cmd := exec.Command("ssh", "-s", "alice@sftp.example.com", "sftp")
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

// A Reconnecting dials again when its connection dies and lets the work that may be
// repeated go on: the Put continues from what the server acknowledged, over as many
// connections as it takes; the Rename is not repeated once it went out, and a lost
// reply is an error matching ErrOutcomeUnknown, after which the program looks.
func ExampleNewReconnecting() {
	ctx := context.Background()
	home, err := os.UserHomeDir()
	if err != nil {
		log.Fatal(err)
	}
	config, err := sshConfig("alice",
		filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, ".ssh", "known_hosts"))
	if err != nil {
		log.Fatal(err)
	}
	dial := sshDialer("sftp.example.com:22", config) // see ExampleWithDialer
	r, err := sftp.NewReconnecting(ctx, dial, sftp.ReconnectPolicy{
		MaxFailures: 5,
		OnRetry: func(err error, pause time.Duration, failures int) {
			log.Printf("sftp: %v; retrying in %v", err, pause)
		},
	})
	if err != nil {
		log.Fatal(err) // the first connection is not retried
	}
	defer r.Close()
	if err := r.Put(ctx, "backup.tar", "incoming/backup.tar"); err != nil {
		log.Fatal(err)
	}
	err = r.Rename(ctx, "incoming/backup.tar", "done/backup.tar")
	if errors.Is(err, sftp.ErrOutcomeUnknown) {
		_, err = r.Stat(ctx, "done/backup.tar") // the reply was lost: did it happen?
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d reconnects", r.Reconnects())
}
