package sftp_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/sluicehq/sftp"
)

// remote is the one Client a service shares between all its requests (a Client is
// safe for concurrent use), replaced when it dies. The README's "Running in a
// service" shows the same code.
type remote struct {
	addr   string
	config *ssh.ClientConfig

	mu   sync.Mutex
	conn *ssh.Client
	c    *sftp.Client
}

// client returns the live Client, connecting first if there is none or the last one
// died: Done is closed once the connection is gone (reset, closed, or silent for the
// keepalive's count of intervals), and Err says why.
func (r *remote) client(ctx context.Context) (*sftp.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		select {
		case <-r.c.Done():
			log.Printf("sftp: connection lost: %v", r.c.Err())
			r.c.Close()
			r.conn.Close() // after a silence the Client leaves the SSH connection to its owner
			r.c, r.conn = nil, nil
		default:
			return r.c, nil
		}
	}
	conn, err := ssh.Dial("tcp", r.addr, r.config) // r.config.Timeout bounds the dial
	if err != nil {
		return nil, err
	}
	// The keepalive is on by default (every 10 s, given up after 3 unanswered):
	// WithKeepalive changes it, WithKeepalive(0, 0) turns it off.
	c, err := sftp.NewClient(ctx, conn, sftp.WithKeepalive(10*time.Second, 3))
	if err != nil {
		conn.Close()
		return nil, err
	}
	r.conn, r.c = conn, c
	return c, nil
}

// serveFile streams a remote file to an HTTP client. When the connection dies during
// the call, the error matches net.ErrClosed: the next request reconnects.
func (r *remote) serveFile(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	c, err := r.client(ctx)
	if err != nil {
		http.Error(w, "storage unavailable", http.StatusServiceUnavailable)
		return
	}
	f, err := c.Open(ctx, req.URL.Query().Get("name"))
	if err != nil {
		status := http.StatusNotFound
		if errors.Is(err, net.ErrClosed) {
			status = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), status)
		return
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		log.Printf("sftp: %v", err)
	}
}

// A service holds one Client for days and shares it between its requests. The
// keepalive (on by default) turns a link that went silent into a dead Client within
// about 30 s, so that no request waits on it for ever and the next one reconnects.
func Example_service() {
	config, err := sshConfig("alice", "/etc/myservice/id_ed25519", "/etc/myservice/known_hosts")
	if err != nil {
		log.Fatal(err)
	}
	r := &remote{addr: "sftp.example.com:22", config: config}
	http.HandleFunc("/file", r.serveFile)
	log.Fatal(http.ListenAndServe("localhost:8080", nil))
}
