package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// usage is "sluice -h": one screen. Each command's -h lists its own flags, and
// "sluice -h all" (or any command's -h) the rest.
const usage = `sluice copies files to and from SFTP servers, fast.

Usage: sluice [flags] COMMAND [flags] OPERANDS...     (flags anywhere; -- ends them)
  put [-r] [-p] [-a] [--sync] SRC... REMOTE    upload (a directory with -r; - is stdin)
  get [-r] [-p] [-a] [--sync] REMOTE... DEST   download (REMOTE may be a glob; -: stdout)
  ls [-l] REMOTE...                            list (-l: modes, sizes, link targets)
  rm [-r] REMOTE...  mkdir [-p] REMOTE...      remove (-r: trees), make directories
  mv REMOTE... REMOTE  chmod MODE REMOTE...    rename, set modes (644 or u+x,go-w)
  df [-h] REMOTE...  cat REMOTE...             free space, print files
  sum [-a sha256] REMOTE...                    hashes, as sha256sum prints them
  help COMMAND  completion bash|zsh            a command's page, a completion script

REMOTE is [user@]host:path (host may be an ssh_config alias) or
sftp://[user@]host[:port]/path; ~ and ~/x are the remote home. A bare path with no
host uses a local sftp-server. Hosts, users, ports, keys, jump hosts and known_hosts
come from ~/.ssh/config as with ssh; unknown host keys are asked about on a terminal.

Common flags:
  -F file  -J jump  -o Key=value  -P port  -l user  -i keyfile   (as in ssh)
  -r recurse  -p preserve modes/times  -a resume  -j n files at once  -q quiet
  --sync       skip files whose size and mtime match (use with -p, like rclone copy)
  --verify     check hashes end to end   --checksum  skip files whose hashes match
  --hash-command  let the server hash with sha256sum over SSH (sum, --verify, --checksum)
  --retries n  reconnect and go on after a dropped connection (n failures in a row)
  --limit rate cap bandwidth (500K, 10M)   --timeout d  no-reply limit on metadata (2m)
  --fail-fast  stop a tree at its first failed file   -v  say what is dialled and tried

A directory lands inside DEST under its name (-r photos box:b lands as b/photos, run
after run); with a trailing slash (photos/) or as ~, its contents land in DEST.

Examples:
  sluice put -r photos box:/backup/            (box: a Host in ~/.ssh/config)
  sluice get -p --sync 'box:~/logs/*.log' ./logs/
  sluice get --retries 5 sftp://alice@example.com:2222/srv/big.iso .
  sluice -J bastion ls -l box:/var/tmp
  sluice rm -r box:old-build
  sluice put notes.txt /tmp/copy.txt           (no host: local sftp-server)

Run 'sluice help COMMAND' for a command's page, 'sluice -h all' for every flag.
Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted.
`

// printUsage writes the one-screen help.
func printUsage(w io.Writer) { fmt.Fprint(w, usage) }

// printAllFlags writes every flag with its default: "sluice -h all".
func printAllFlags(w io.Writer) {
	fmt.Fprint(w, "Shared flags (before or after the command):\n")
	var c config
	fs := newFlagSet("sluice")
	c.register(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nput and get flags:\n")
	var x xferFlags
	xfs := newFlagSet("put")
	x.register(xfs)
	xfs.SetOutput(w)
	xfs.PrintDefaults()
	fmt.Fprint(w, `
Files land under a .sluice-part name and are renamed into place when complete; -a and
--retries continue them. -D 'command' speaks SFTP with a local command instead of SSH.
`)
}

// version is set at build time with -ldflags "-X main.version=v1.2.3"; otherwise the
// module version the binary was built from is used (go install pkg@version).
var version = ""

func versionString() string {
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("sluice %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
