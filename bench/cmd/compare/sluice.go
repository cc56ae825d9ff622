//go:build !nosluice

// The sluice rows live in their own file so that `-tags nosluice` still builds the
// harness (with the peer rows only) while the client package is broken or mid-change.

package main

import (
	"context"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

func init() {
	register(&row{id: sluiceDefaultID, title: "sluice default", order: 50, sftp: true,
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceTransfer(ctx, conn, j, dialOption(j)...)
		},
		tree: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceTree(ctx, conn, j, nil, dialOption(j)...)
		}})
	register(&row{id: "sluice-tuned", title: "sluice tuned", order: 60, sftp: true,
		detail: func(c *config, bc benchCase) string { return c.sluice.describe(bc) },
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceTransfer(ctx, conn, j, tunedOptions(j)...)
		},
		tree: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			var topts []sluice.TransferOption
			if j.Sluice.Parallel > 0 {
				topts = append(topts, sluice.Parallel(j.Sluice.Parallel))
			}
			return sluiceTree(ctx, conn, j, topts, tunedOptions(j)...)
		}})
}

// dialOption is WithDialer when -sluice-dial is set: the Client may dial more SSH
// connections like the child's own.
func dialOption(j *job) []sluice.Option {
	if !j.Sluice.Dial {
		return nil
	}
	return []sluice.Option{sluice.WithDialer(func(ctx context.Context) (*ssh.Client, error) { return dial(ctx, j) })}
}

// tunedOptions are the client options of the "sluice tuned" row.
func tunedOptions(j *job) []sluice.Option {
	opts := dialOption(j)
	if j.Sluice.Channels > 0 {
		opts = append(opts, sluice.WithChannels(j.Sluice.Channels))
	}
	if j.Sluice.Inflight > 0 {
		opts = append(opts, sluice.WithMaxInflight(j.Sluice.Inflight))
	}
	if j.Sluice.Packet > 0 {
		opts = append(opts, sluice.WithMaxPacket(j.Sluice.Packet))
	}
	return opts
}

// sluiceTree copies a tree with Get or Put and Recursive, as a user would. Without
// OnProgress there is no byte count to return, and adding one would measure the
// callback too; the harness counts and compares the copy instead.
func sluiceTree(ctx context.Context, conn *ssh.Client, j *job, topts []sluice.TransferOption, opts ...sluice.Option) (int64, error) {
	c, err := sluice.NewClient(ctx, conn, opts...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	topts = append(topts, sluice.Recursive())
	if j.Dir == download {
		err = c.Get(ctx, j.Remote, j.Local, topts...)
	} else {
		err = c.Put(ctx, j.Local, j.Remote, topts...)
	}
	if err != nil {
		return 0, err
	}
	return j.Size, nil
}

// sluiceTransfer is the plain io.Copy path a user would write: no Get/Put helpers, so the
// row measures File.WriteTo and File.ReadFrom.
func sluiceTransfer(ctx context.Context, conn *ssh.Client, j *job, opts ...sluice.Option) (int64, error) {
	c, err := sluice.NewClient(ctx, conn, opts...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return copyWithClient(ctx, c, j)
}

// copyWithClient is sluiceTransfer's copy on a client already made.
func copyWithClient(ctx context.Context, c *sluice.Client, j *job) (int64, error) {
	return copyFile(j,
		func(name string) (*sluice.File, error) { return c.Open(ctx, name) },
		func(name string) (*sluice.File, error) { return c.Create(ctx, name) })
}
