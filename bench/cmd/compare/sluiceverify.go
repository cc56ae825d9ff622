//go:build !nosluice

package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	sluice "github.com/sluicehq/sftp"
	"golang.org/x/crypto/ssh"
)

// The rows of Verify and Hash. Verify belongs to Get and Put (part files, rename), so
// its baseline is Get and Put without it ("sluice Get/Put"), not the io.Copy of the
// default row: "sluice/row" of those rows is read against that one. Downloads go to
// a file beside the source, in the same tmpfs, removed after the transfer (inside the
// timed run, the same for each of these rows).
//
//   - sluice-getput: Get or Put, nothing else;
//   - sluice-verify: the same with Verify and WithHashCommand, so sshd's sha256sum
//     hashes the server's side and only the digest crosses back;
//   - sluice-verify-read: Verify without the command: the server's hash is had by
//     reading the file again (a second transfer);
//   - sluice-verify-sha512, sluice-verify-sha1: VerifyWith and the command, for the
//     cost of each algorithm (coreutils hashes SHA-512 and SHA-1 faster than SHA-256
//     where it has no SHA extensions, as here);
//   - sluice-hash: Client.Hash by reading (downloads only), against a plain download.
func init() {
	register(&row{id: "sluice-getput", title: "sluice Get/Put", order: 70, remoteFile: true,
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceGetPut(ctx, conn, j, nil)
		}})
	register(&row{id: "sluice-verify", title: "sluice Get/Put, Verify + WithHashCommand", order: 71, remoteFile: true,
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceGetPut(ctx, conn, j, []sluice.TransferOption{sluice.Verify()}, sluice.WithHashCommand())
		}})
	for i, alg := range []sluice.HashAlgorithm{sluice.SHA512, sluice.SHA1} {
		register(&row{id: "sluice-verify-" + string(alg), title: "sluice Get/Put, VerifyWith(" + string(alg) + ") + WithHashCommand",
			order: 74 + i, remoteFile: true,
			transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
				return sluiceGetPut(ctx, conn, j, []sluice.TransferOption{sluice.VerifyWith(alg)}, sluice.WithHashCommand())
			}})
	}
	register(&row{id: "sluice-verify-read", title: "sluice Get/Put, Verify reading back", order: 72, remoteFile: true,
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			return sluiceGetPut(ctx, conn, j, []sluice.TransferOption{sluice.Verify()})
		}})
	register(&row{id: "sluice-hash", title: "sluice Hash by reading (downloads)", order: 73, sftp: true, downloadOnly: true,
		transfer: func(ctx context.Context, conn *ssh.Client, j *job) (int64, error) {
			if j.Dir != download {
				return 0, errors.New("sluice-hash hashes a remote file: run it with -dir down")
			}
			c, err := sluice.NewClient(ctx, conn)
			if err != nil {
				return 0, err
			}
			defer c.Close()
			if _, err := c.Hash(ctx, j.Remote, sluice.SHA256); err != nil {
				return 0, err
			}
			return j.Size, nil
		}})
}

// sluiceGetPut copies j's file with Get or Put and topts.
func sluiceGetPut(ctx context.Context, conn *ssh.Client, j *job, topts []sluice.TransferOption, opts ...sluice.Option) (int64, error) {
	c, err := sluice.NewClient(ctx, conn, opts...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if j.Dir == upload {
		if err := c.Put(ctx, j.Local, j.Remote, topts...); err != nil {
			return 0, err
		}
		return j.Size, nil
	}
	dst := fmt.Sprintf("%s.get-%d", j.Remote, os.Getpid())
	defer os.Remove(dst)
	if err := c.Get(ctx, j.Remote, dst, topts...); err != nil {
		return 0, err
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
