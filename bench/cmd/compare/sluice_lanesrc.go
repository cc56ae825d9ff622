//go:build !nosluice

// Rows for lanes from more than one source: sluice.WithPipeOpener and sluice.WithDialer.

package main

import (
	"context"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

func init() {
	register(&row{id: pipeOpenerRowID, title: "sluice NewClientPipe + WithPipeOpener (`ssh -s sftp` each)", order: 85,
		sftp: true, pipe: true,
		transfer: func(ctx context.Context, _ *ssh.Client, j *job) (int64, error) {
			return sluicePipeTransfer(ctx, j, func(p *sshPipes) []sluice.Option {
				return []sluice.Option{sluice.WithPipeOpener(p.open)}
			})
		}})
	register(&row{id: "sluice-dialer", title: "sluice WithDialer", order: 55, sftp: true,
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceTransfer(ctx, conn, j, sluice.WithDialer(func(ctx context.Context) (*ssh.Client, error) {
				return dial(ctx, j)
			}))
		}})
}
