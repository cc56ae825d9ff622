//go:build !nosluice

package main

import (
	"context"
	"io"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// sluice in the service case: NewClient with its defaults, shared by every transfer.

func init() {
	serviceClients[serviceSluice] = func(ctx context.Context, conn *ssh.Client) (serviceClient, error) {
		c, err := sluice.NewClient(ctx, conn)
		if err != nil {
			return nil, err
		}
		return sluiceService{c}, nil
	}
}

type sluiceService struct{ c *sluice.Client }

func (s sluiceService) download(ctx context.Context, remote string, w io.Writer) (int64, error) {
	f, err := s.c.Open(ctx, remote)
	if err != nil {
		return 0, err
	}
	return copyThenClose(w, f, f)
}

func (s sluiceService) upload(ctx context.Context, remote string, r io.Reader) (int64, error) {
	f, err := s.c.Create(ctx, remote)
	if err != nil {
		return 0, err
	}
	return copyThenClose(f, r, f)
}

func (s sluiceService) close() error { return s.c.Close() }
