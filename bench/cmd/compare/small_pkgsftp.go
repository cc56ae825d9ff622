package main

import (
	"context"
	"io"
	"os"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// pkg/sftp in the small-call case, with the options of the pkgsftp-tuned row. None of
// them changes a small call (they size and parallelise one file's transfer), so
// "tuned" and default make the same requests here. pkg/sftp has no ReadFile or
// WriteFile: they are written the way its documentation suggests for a whole file,
// Open + io.ReadAll + Close, and OpenFile(O_WRONLY|O_CREATE|O_TRUNC) + Write + Close.
// Its calls take no ctx.

func init() {
	smallClients[smallPkgSFTP] = func(_ context.Context, conn *ssh.Client) (smallClient, error) {
		c, err := sftp.NewClient(conn,
			sftp.MaxConcurrentRequestsPerFile(64),
			sftp.UseConcurrentWrites(true),
			sftp.MaxPacketUnchecked(261120),
		)
		if err != nil {
			return nil, err
		}
		return pkgSmall{c}, nil
	}
}

type pkgSmall struct{ c *sftp.Client }

func (p pkgSmall) stat(_ context.Context, name string) error {
	_, err := p.c.Stat(name)
	return err
}

func (p pkgSmall) open(_ context.Context, name string) (func() error, error) {
	f, err := p.c.Open(name)
	if err != nil {
		return nil, err
	}
	return f.Close, nil
}

func (p pkgSmall) readFile(_ context.Context, name string) ([]byte, error) {
	f, err := p.c.Open(name)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b, err
}

func (p pkgSmall) writeFile(_ context.Context, name string, data []byte) error {
	f, err := p.c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (p pkgSmall) readDir(_ context.Context, name string) (int, error) {
	es, err := p.c.ReadDir(name)
	return len(es), err
}

func (p pkgSmall) remove(_ context.Context, name string) error { return p.c.Remove(name) }

func (p pkgSmall) rename(_ context.Context, from, to string) error { return p.c.Rename(from, to) }

func (p pkgSmall) mkdir(_ context.Context, name string) error { return p.c.Mkdir(name) }

func (p pkgSmall) close() error { return p.c.Close() }
