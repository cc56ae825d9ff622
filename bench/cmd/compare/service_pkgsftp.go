package main

import (
	"context"
	"io"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// pkg/sftp in the service case: one *sftp.Client shared by every transfer, with its
// defaults and with the pkgsftp-tuned row's options (64 requests in flight per file,
// concurrent writes, 255 KiB packets). Its calls take no ctx.

func init() {
	serviceClients[servicePkgSFTP] = pkgServiceClient()
	serviceClients[servicePkgSFTPTune] = pkgServiceClient(
		sftp.MaxConcurrentRequestsPerFile(64),
		sftp.UseConcurrentWrites(true),
		sftp.MaxPacketUnchecked(261120),
	)
}

func pkgServiceClient(opts ...sftp.ClientOption) func(context.Context, *ssh.Client) (serviceClient, error) {
	return func(_ context.Context, conn *ssh.Client) (serviceClient, error) {
		c, err := sftp.NewClient(conn, opts...)
		if err != nil {
			return nil, err
		}
		return pkgService{c}, nil
	}
}

type pkgService struct{ c *sftp.Client }

func (p pkgService) download(_ context.Context, remote string, w io.Writer) (int64, error) {
	f, err := p.c.Open(remote)
	if err != nil {
		return 0, err
	}
	return copyThenClose(w, f, f)
}

func (p pkgService) upload(_ context.Context, remote string, r io.Reader) (int64, error) {
	f, err := p.c.Create(remote)
	if err != nil {
		return 0, err
	}
	return copyThenClose(f, r, f)
}

func (p pkgService) close() error { return p.c.Close() }
