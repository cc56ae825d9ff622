//go:build pipeopener && !nosluice

// The pipe opener row needs sftp.WithPipeOpener, which is not on main yet: build with
// -tags pipeopener until it is.

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
}
