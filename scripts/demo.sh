#!/usr/bin/env bash
# The main job: a real transfer against a real server started on the spot. It starts a
# private OpenSSH sshd on 127.0.0.1 (its own keys and config in a temporary directory),
# then uploads and downloads a file with sluice over SSH and checks the bytes match.
#   SIZE=1G bash scripts/demo.sh      # default 256M; any size head -c accepts
# Needs root (sshd's privilege separation); installs OpenSSH with apt-get if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "demo.sh starts a private sshd, which needs root" >&2
	exit 1
fi
if [ ! -x /usr/sbin/sshd ] || [ ! -x /usr/lib/openssh/sftp-server ] || ! command -v ssh-keygen >/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-sftp-server openssh-client >/dev/null
fi

base=/tmp
[ -d /dev/shm ] && base=/dev/shm # tmpfs keeps the disk out of the figures
work=$(mktemp -d "$base/sluice-demo.XXXXXX")
cleanup() {
	[ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N '' -f "$work/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$work/id"
cp "$work/id.pub" "$work/authorized_keys"
mkdir -p /run/sshd

# A port nobody listens on: try a few random high ones.
for _ in $(seq 20); do
	port=$((20000 + RANDOM % 20000))
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
cat >"$work/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $port
HostKey $work/hostkey
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
MaxSessions 10
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
/usr/sbin/sshd -f "$work/sshd_config" -E "$work/sshd.log"
for i in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	[ "$i" = 100 ] && { echo "sshd did not start:" >&2; cat "$work/sshd.log" >&2; exit 1; }
	sleep 0.1
done
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$work/hostkey.pub")" >"$work/known_hosts"

go -C cmd/sluice build -o "$work/sluice" . # its own module
size=${SIZE:-256M}
head -c "$size" /dev/urandom >"$work/data.bin"
ssh=(-i "$work/id" -known-hosts "$work/known_hosts" -c aes128-gcm@openssh.com)
remote="sftp://$(id -un)@127.0.0.1:$port$work/remote.bin"

echo "sshd on 127.0.0.1:$port; moving $size each way"
"$work/sluice" "${ssh[@]}" put "$work/data.bin" "$remote"
"$work/sluice" "${ssh[@]}" get "$remote" "$work/back.bin"
"$work/sluice" "${ssh[@]}" ls -l "sftp://$(id -un)@127.0.0.1:$port$work"
cmp "$work/data.bin" "$work/remote.bin"
cmp "$work/data.bin" "$work/back.bin"
echo "ok: uploaded and downloaded copies are byte-identical"
