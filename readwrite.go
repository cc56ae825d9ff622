package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ReadFile reads the named file whole, like os.ReadFile. ctx bounds the whole read,
// not just the open: when it ends, the transfer stops and the ctx error is returned.
func (c *Client) ReadFile(ctx context.Context, name string) ([]byte, error) {
	f, err := c.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, f.cancel)
	var buf bytes.Buffer
	_, err = f.WriteTo(&buf)
	stop()
	// As in os.ReadFile, a failed close does not spoil data read whole.
	closeWithin(ctx, f)
	if err != nil {
		return nil, ctxErr(ctx, "read", name, err)
	}
	if buf.Len() == 0 {
		return []byte{}, nil // non-nil, as from os.ReadFile
	}
	return buf.Bytes(), nil
}

// WriteFile writes data to the named file, creating it with perm (before the server's
// umask) if needed and truncating it otherwise, like os.WriteFile. ctx bounds the whole
// write.
func (c *Client) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	f, err := c.OpenFile(ctx, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, f.cancel)
	_, err = f.Write(data)
	stop()
	// Close also reports a failure the server only notices when the handle is closed.
	if cerr := closeWithin(ctx, f); err == nil {
		err = cerr
	}
	if err != nil {
		return ctxErr(ctx, "write", name, err)
	}
	return nil
}

// closeWithin closes f, waiting for the server's answer only while ctx lasts: a
// stalled server must not hold up a call whose ctx has ended. The CLOSE then stays in
// flight; it completes, or fails with the connection, in the background.
func closeWithin(ctx context.Context, f *File) error {
	ok, err := waitWithin(ctx, f.cn, f.Close)
	if !ok {
		return f.err("close", err)
	}
	return err
}

// waitWithin runs fn, a request or two on cn, waiting for it only while ctx lasts. ok
// is false when ctx ended first: fn then goes on in the background, where closing the
// connection waits for it (and ends it, as every wait on the connection ends when it
// fails), and err is the ctx error.
func waitWithin(ctx context.Context, cn *conn, fn func() error) (ok bool, err error) {
	if ctx.Done() == nil {
		return true, fn()
	}
	done := make(chan error, 1)
	if !cn.background(func() { done <- fn() }) {
		return true, fn() // the connection is gone: fn fails at once
	}
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
		select {
		case err := <-done: // an answer that came in time still counts
			return true, err
		default:
			return false, fmt.Errorf("sftp: %w", ctx.Err())
		}
	}
}

// ctxErr reports a transfer that ctx cut short (by cancelling the file, which surfaces
// as fs.ErrClosed) as the ctx error, which is what the caller can act on.
func ctxErr(ctx context.Context, op, name string, err error) error {
	if ctx.Err() != nil && errors.Is(err, fs.ErrClosed) {
		return pathErr(op, name, fmt.Errorf("sftp: %w", ctx.Err()))
	}
	return err
}
