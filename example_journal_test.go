package sftp_test

import (
	"context"
	"errors"
	"log"
	"net"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp"
)

// login is the SSH login to the server: see ExampleNewClient for how to make one.
var login *ssh.ClientConfig

// An upload that goes on through dropped connections: each try connects again and
// calls Put with Resume and the same Journal, so the part file continues from what the
// server had acknowledged before the drop (a part whose connection dropped could not be
// cut, and without the Journal would continue 64 MiB before its end). A failure the
// server reports on a live connection is not retried. The example connects to a
// remote server, so the test suite compiles it but does not run it.
func ExampleKeepJournal() {
	ctx := context.Background()
	journal := sftp.NewJournal()
	var err error
	for try := 0; try < 5; try++ {
		var retry bool
		if retry, err = putOnce(ctx, journal); !retry {
			break // done, or a failure a new connection would not mend
		}
	}
	if err != nil {
		log.Fatal(err)
	}
}

// putOnce connects and uploads backup.tar, continuing what an earlier try left. retry
// reports a failure of the connection: one that dropped (the calls on it fail
// matching net.ErrClosed), or one that could not be made.
func putOnce(ctx context.Context, journal *sftp.Journal) (retry bool, err error) {
	conn, err := ssh.Dial("tcp", "sftp.example.com:22", login)
	if err != nil {
		return true, err
	}
	defer conn.Close()
	c, err := sftp.NewClient(ctx, conn)
	if err != nil {
		return true, err
	}
	defer c.Close()
	err = c.Put(ctx, "backup.tar", "backup.tar", sftp.Resume(), sftp.KeepJournal(journal))
	return errors.Is(err, net.ErrClosed), err
}
