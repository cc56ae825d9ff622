#!/usr/bin/env bash
# readme-table.sh runs the comparison behind the README's speed table: sftp(1), sluice
# default and 16 parallel plain `dd` connections at RTT 0, 10, 50 and 100 ms, 256 MiB and
# 1 GiB each way, and the small-file tree, then prints every table and, last, the one
# summary table to paste into the README ("### Summary").
#
# Rounds: up to 3 per table, but no round starts once a table has taken 90 s, so the long
# tables get fewer: 1 GiB at 50 ms and the trees behind the proxy 2, 1 GiB at 100 ms 1,
# everything else 3. sftp(1) alone takes about 60 s for 1 GiB at 100 ms and about 90 s
# for the tree's get -r there. Estimated total on an idle 2-core machine about 20
# minutes (RTT 0 ~2, 10 ms ~3, 50 ms ~6, 100 ms ~5 min for the files, trees ~4 min);
# a run with -table-budget 2m on this machine at load 9-15 took 30 minutes and reached
# the 100 ms tree. -deadline 30m bounds it: no transfer starts after 30 minutes and one
# in flight is killed at -timeout 5m, so it ends by 35 minutes whatever the machine's
# load, printing the tables done so far and the summary of them.
#
# Extra arguments go to cmd/compare and override these (the last value of a flag wins):
#   scripts/readme-table.sh -v                 # one line per transfer on stderr
#   scripts/readme-table.sh -rtt 50ms,100ms    # fewer RTTs
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/compare \
	-rtt 0,10ms,50ms,100ms -size 256MiB,1GiB -case file,tree \
	-rows openssh,sluice,plain-par -plain-par 16 \
	-rounds 3 -table-budget 90s -timeout 5m -deadline 30m -summary "$@"
