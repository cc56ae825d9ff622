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
	echo "== staticcheck ($mod)"
	(cd "$mod" && staticcheck ./...)
done

echo "== go test -race"
go test -race -count=1 -timeout 12m ./...
(cd bench && go test -race -count=1 -timeout 5m ./...)

echo "== fuzz (10 s per target; crashers land in testdata/fuzz and become regression tests)"
for pkg in ./internal/sshfx ./internal/testserver .; do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		echo "-- $pkg $target"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime 10s "$pkg"
	done
done
echo "== all checks passed"
