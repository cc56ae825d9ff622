//go:build !nosluice

package main

import (
	"context"
	"fmt"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// The rows -sluice-fixed adds: "sluice-ch8" is sluice with WithChannels(8) and nothing
// else, so one run sets the default's lane choice against each fixed count
// (sluice/row = default / fixed).
func init() {
	registerFamily(rowFamily{prefix: sluiceFixedPrefix, max: maxFixedChannels, make: func(n int) *row {
		return &row{id: fmt.Sprintf("%s%d", sluiceFixedPrefix, n), title: fmt.Sprintf("sluice WithChannels(%d)", n),
			order: 100 + n, sftp: true,
			transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
				return sluiceTransfer(ctx, conn, j, sluice.WithChannels(n))
			}}
	}})
}
