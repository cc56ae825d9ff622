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
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "missing ${need[*]}: install them (apt-get install -y ${need[*]}) or run as root" >&2
	fi
fi

export PATH="$PATH:$(go env GOPATH)/bin"
if ! command -v staticcheck >/dev/null; then
	(cd /tmp && GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@v0.8.2)
fi

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt needed:"; echo "$bad"; exit 1; fi

for mod in . bench; do
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
go test -race -count=1 -timeout 12m ./...
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
