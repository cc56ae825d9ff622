"""An SFTP server on asyncssh for sluice's tests.

It listens on 127.0.0.1 and gives each user the directory of that name under --root
as "/" (asyncssh's chroot), so one server serves many tests, each in a directory of
its own. Any user name made of letters, digits, "-" and "_" gets in with the one
authorized key. It prints "port N" once it listens and exits when its stdin closes, so
a test that dies cannot leave it behind.
"""

import argparse
import asyncio
import os
import re
import sys
import threading

import asyncssh


def exit_when_stdin_closes():
    def watch():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


USER = re.compile(r"^[A-Za-z0-9_-]+$")


class Server(asyncssh.SSHServer):
    def __init__(self, authorized):
        self.authorized = authorized

    def begin_auth(self, username):
        return True  # authentication is required

    def public_key_auth_supported(self):
        return True

    def validate_public_key(self, username, key):
        return bool(USER.match(username)) and key.public_data == self.authorized.public_data


def user_sftp(root):
    def make(chan):
        return asyncssh.SFTPServer(chan, chroot=os.path.join(root, chan.get_extra_info("username")))

    return make


async def serve(args):
    authorized = asyncssh.read_public_key(args.authorized_key)
    server = await asyncssh.listen(
        "127.0.0.1",
        args.port,
        server_host_keys=[args.host_key],
        server_factory=lambda: Server(authorized),
        sftp_factory=user_sftp(args.root),
        allow_scp=False,
    )
    port = server.sockets[0].getsockname()[1]
    print("port", port, flush=True)
    await asyncio.Event().wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--host-key", required=True)
    p.add_argument("--authorized-key", required=True)
    p.add_argument("--root", required=True)
    args = p.parse_args()
    exit_when_stdin_closes()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
