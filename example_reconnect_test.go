package sftp_test

import (
	"context"
	"errors"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp"
)

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
	const addr = "sftp.example.com:22"
	dial := func(ctx context.Context) (*ssh.Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { nc.Close() }) // the handshake takes no ctx
		conn, chans, reqs, err := ssh.NewClientConn(nc, addr, config)
		if !stop() && err == nil {
			conn.Close()
			err = ctx.Err()
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		return ssh.NewClient(conn, chans, reqs), nil
	}
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
