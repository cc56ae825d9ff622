package sftp

// Done returns a channel that is closed when the Client's main SFTP channel has
// ended: the server closed it or exited, the SSH connection dropped, the connection
// went silent (no answer to the keepalive for its count of intervals, see
// WithKeepalive), the server broke the protocol, the server stopped taking data (a
// request stayed stuck in the SSH channel's Write after a call waiting on it gave
// up), or Close was called. It lets a
// program learn that the connection died without making a call, for example to
// reconnect at once:
//
//	for {
//		c, err := connect(ctx) // ssh.Dial + sftp.NewClient
//		if err != nil { /* back off, retry */ }
//		select {
//		case <-c.Done():
//			log.Print("sftp connection lost: ", c.Err())
//			c.Close()
//		case <-ctx.Done():
//			c.Close()
//			return
//		}
//	}
//
// A Client never reconnects by itself: the server forgets open handles with the
// session, so a File cannot be carried over, and whether a half-done operation may be
// repeated is the program's decision. Make a new *ssh.Client and a new Client, and
// reopen what was open (Reconnecting does all of that for the operations that may be
// repeated). Close the old *ssh.Client too: after a silence the Client
// gives up its channels but leaves the connection it was given to its owner. Striping channels that die leave the Client working on the
// main channel; Done concerns the main channel only.
func (c *Client) Done() <-chan struct{} { return c.main.done }

// Err returns nil while Done is open. After, it returns why the main channel ended: an
// error matching net.ErrClosed, which unwraps to the cause ("server closed the
// connection" when the server went away between requests, io.ErrUnexpectedEOF when it
// went away with requests outstanding, a read error, a *ProtocolError when it broke
// the protocol, "the server stopped answering" when the keepalive went unanswered
// (WithKeepalive), or "the server stopped taking data" when a write to it stayed
// blocked for a grace period, about 2 s, after a call waiting on it gave up).
// Every call made after that fails with the same error.
func (c *Client) Err() error { return c.main.failed() }
