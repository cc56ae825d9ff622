#!/usr/bin/env bash
# The one test command: installs what the tests need on a fresh Debian machine, then
# checks formatting, vets, lints and runs every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
command -v sftp >/dev/null || need+=(openssh-client)
command -v rclone >/dev/null || need+=(rclone)
[ -x /usr/bin/time ] || need+=(time) # GNU time: the bench harness reads peak RSS from it
# The other real servers of the cross-server suite (see docs/servers.md).
[ -x /usr/libexec/gesftpserver ] || need+=(gesftpserver)
[ -x /usr/sbin/proftpd ] || need+=(proftpd-core)
[ -f /usr/lib/proftpd/mod_sftp.so ] || need+=(proftpd-mod-crypto)
[ -x /usr/sbin/dropbear ] || need+=(dropbear-bin)
/usr/bin/python3 -c 'import asyncssh' 2>/dev/null || need+=(python3-asyncssh)
/usr/bin/python3 -c 'import paramiko' 2>/dev/null || need+=(python3-paramiko)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		apt-get update -qq
		# One by one: a package this distribution lacks must not keep the others out.
		for pkg in "${need[@]}"; do
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null ||
				echo "WARNING: could not install $pkg: the tests that need it will be SKIPPED" >&2
		done
	else
		echo "WARNING: missing ${need[*]}: the tests that need them will be SKIPPED; install them (apt-get install -y ${need[*]}) or run as root" >&2
	fi
fi

export PATH="$PATH:$(go env GOPATH)/bin"
if ! command -v staticcheck >/dev/null; then
	(cd /tmp && GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@v0.8.2)
fi

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt needed:"; echo "$bad"; exit 1; fi

# Each module on its own: the library (.), the command (cmd/sluice, its own module so
# that the library's go.mod carries only what the library imports) and the benchmarks.
modules=(. cmd/sluice bench)
for mod in "${modules[@]}"; do
	[ -f "$mod/go.mod" ] || continue
	echo "== go vet ($mod)"
	(cd "$mod" && go vet ./...)
	# Everything, tests included, must build where users run it: 32-bit (int is 32
	# bits there), ARM, and the OSes without Linux's syscalls.
	for target in linux/386 linux/arm windows/amd64 darwin/arm64; do
		echo "== go vet ($mod, $target)"
		(cd "$mod" && GOOS="${target%/*}" GOARCH="${target#*/}" go vet ./...)
	done
	echo "== staticcheck ($mod)"
	(cd "$mod" && staticcheck ./...)
done

echo "== go test -race"
# -v, into a log, so that skips are visible: a real server that could not run must
# not pass for one that was tested. The log is shown without the per-test noise.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
go test -race -count=1 -timeout 12m -v ./... >"$log" 2>&1 || status=$?
(cd cmd/sluice && go test -race -count=1 -timeout 12m -v ./...) >>"$log" 2>&1 || status=$?
if [ "$status" != 0 ]; then
	grep -v -E '^\s*(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|SKIP))' "$log"
else
	grep -E '^(ok|FAIL|\?)\s' "$log"
fi
if grep -q 'SKIPPED, real server unavailable' "$log"; then
	echo "WARNING: tests against these real servers were SKIPPED:"
	grep -o 'SKIPPED, real server unavailable: .*' "$log" | sed 's/^SKIPPED, real server unavailable: /WARNING:   /' | sort | uniq -c
fi
[ "$status" = 0 ] || exit "$status"
(cd bench && go test -race -count=1 -timeout 5m ./...)
if [ "$(uname -m)" = x86_64 ]; then
	# The wire format where int has 32 bits: a status code or length >= 1<<31 from a
	# server is where such a target would break.
	echo "== go test (linux/386: internal/sshfx, internal/testserver)"
	GOARCH=386 go test -count=1 ./internal/sshfx ./internal/testserver
fi

echo "== hostile-server suite, repeated (a flaky defence is a hole)"
go test -race -count=5 -timeout 5m -run '^(TestHostile|TestDecodeHandleLength)' .

echo "== fuzz (a bounded run per target; crashers land in testdata/fuzz and become regression tests)"
# Budgets are execution counts, not durations: Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" when a -fuzztime duration expires on a busy machine
# (golang/go#75804, fixed in Go 1.27). Each count is about 10 s here. Minimising a new
# input may otherwise take a minute (the default -fuzzminimizetime), so it is bounded too.
fuzz_count() {
	case "$1" in
	FuzzClientReplies) echo 2000 ;; # every input drives real calls with 25 ms deadlines
	*) echo 200000 ;;
	esac
}
for pkg in ./internal/sshfx ./internal/testserver .; do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		echo "-- $pkg $target"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$(fuzz_count "$target")x" -fuzzminimizetime 1000x "$pkg"
	done
done
echo "== all checks passed"
