//go:build !nosluice

package main

import (
	"context"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// sluice in the small-call case: the library's own calls, with its defaults.

func init() {
	smallClients[smallSluice] = func(ctx context.Context, conn *ssh.Client) (smallClient, error) {
		c, err := sluice.NewClient(ctx, conn)
		if err != nil {
			return nil, err
		}
		return sluiceSmall{c}, nil
	}
}

type sluiceSmall struct{ c *sluice.Client }

func (s sluiceSmall) stat(ctx context.Context, name string) error {
	_, err := s.c.Stat(ctx, name)
	return err
}

func (s sluiceSmall) open(ctx context.Context, name string) (func() error, error) {
	f, err := s.c.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return f.Close, nil
}

func (s sluiceSmall) readFile(ctx context.Context, name string) ([]byte, error) {
	return s.c.ReadFile(ctx, name)
}

func (s sluiceSmall) writeFile(ctx context.Context, name string, data []byte) error {
	return s.c.WriteFile(ctx, name, data, 0o644)
}

func (s sluiceSmall) readDir(ctx context.Context, name string) (int, error) {
	es, err := s.c.ReadDir(ctx, name)
	return len(es), err
}

func (s sluiceSmall) remove(ctx context.Context, name string) error { return s.c.Remove(ctx, name) }

func (s sluiceSmall) rename(ctx context.Context, from, to string) error {
	return s.c.Rename(ctx, from, to)
}

func (s sluiceSmall) mkdir(ctx context.Context, name string) error {
	return s.c.Mkdir(ctx, name, 0o755)
}

func (s sluiceSmall) close() error { return s.c.Close() }
