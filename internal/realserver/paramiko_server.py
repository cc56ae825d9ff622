"""An SFTP server on paramiko for sluice's tests.

paramiko supplies the protocol and leaves the file system to the application; this is
a small backend on the local disk. It listens on 127.0.0.1 and gives each user the
directory of that name under --root as "/", so one server serves many tests, each in
a directory of its own. Any user name made of letters, digits, "-" and "_" gets in with
the one authorized key. It prints "port N" once it listens and exits when its stdin
closes. Like most paramiko backends it offers no
extensions of its own: no posix-rename, hardlink, statvfs or fsync. RENAME is
os.rename, so it replaces an existing target.
"""

import argparse
import os
import posixpath
import re
import socket
import sys
import threading

import paramiko
from paramiko import SFTPAttributes, SFTPHandle, SFTPServer, SFTPServerInterface
from paramiko.sftp import SFTP_OK


def exit_when_stdin_closes():
    def watch():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


USER = re.compile(r"^[A-Za-z0-9_-]+$")


class Auth(paramiko.ServerInterface):
    def __init__(self, authorized):
        self.authorized = authorized
        self.user = None

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        if (
            USER.match(username)
            and key.get_name() == self.authorized[0]
            and key.get_base64() == self.authorized[1]
        ):
            self.user = username
            return paramiko.AUTH_SUCCESSFUL
        return paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED


def errno_status(fn):
    """Turns an OSError from fn into the SFTP status for its errno."""

    def wrapped(*args):
        try:
            return fn(*args)
        except OSError as e:
            return SFTPServer.convert_errno(e.errno)

    return wrapped


class Handle(SFTPHandle):
    @errno_status
    def stat(self):
        f = self.readfile if hasattr(self, "readfile") else self.writefile
        return SFTPAttributes.from_stat(os.fstat(f.fileno()))

    @errno_status
    def chattr(self, attr):
        SFTPServer.set_file_attr(self.path, attr)
        return SFTP_OK


def backend(base):
    class Backend(SFTPServerInterface):
        def __init__(self, server, *args, **kwargs):
            super().__init__(server, *args, **kwargs)
            self.root = os.path.join(base, server.user)

        def real(self, path):
            return self.root + self.canonicalize(path)

        def canonicalize(self, path):
            # Lexical, against the served directory as "/".
            # (normpath keeps a leading "//", which POSIX leaves to the implementation.)
            return "/" + posixpath.normpath(posixpath.join("/", path)).lstrip("/")

        @errno_status
        def list_folder(self, path):
            d = self.real(path)
            out = []
            for name in os.listdir(d):
                attr = SFTPAttributes.from_stat(os.lstat(os.path.join(d, name)))
                attr.filename = name
                out.append(attr)
            return out

        @errno_status
        def stat(self, path):
            return SFTPAttributes.from_stat(os.stat(self.real(path)))

        @errno_status
        def lstat(self, path):
            return SFTPAttributes.from_stat(os.lstat(self.real(path)))

        @errno_status
        def open(self, path, flags, attr):
            real = self.real(path)
            mode = 0o666
            if attr is not None and attr._flags & attr.FLAG_PERMISSIONS:
                mode = attr.st_mode & 0o7777
            fd = os.open(real, flags | getattr(os, "O_BINARY", 0), mode)
            acc = flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
            if acc == os.O_RDONLY:
                fmode = "rb"
            elif flags & os.O_APPEND:
                fmode = "ab" if acc == os.O_WRONLY else "a+b"
            else:
                fmode = "wb" if acc == os.O_WRONLY else "r+b"
            f = os.fdopen(fd, fmode)
            h = Handle(flags)
            h.path = real
            if acc != os.O_WRONLY:
                h.readfile = f
            if acc != os.O_RDONLY:
                h.writefile = f
            return h

        @errno_status
        def remove(self, path):
            os.remove(self.real(path))
            return SFTP_OK

        @errno_status
        def rename(self, oldpath, newpath):
            os.rename(self.real(oldpath), self.real(newpath))
            return SFTP_OK

        @errno_status
        def mkdir(self, path, attr):
            mode = 0o777
            if attr is not None and attr._flags & attr.FLAG_PERMISSIONS:
                mode = attr.st_mode & 0o7777
            os.mkdir(self.real(path), mode)
            return SFTP_OK

        @errno_status
        def rmdir(self, path):
            os.rmdir(self.real(path))
            return SFTP_OK

        @errno_status
        def chattr(self, path, attr):
            SFTPServer.set_file_attr(self.real(path), attr)
            return SFTP_OK

        @errno_status
        def readlink(self, path):
            return os.readlink(self.real(path))

        @errno_status
        def symlink(self, target_path, path):
            os.symlink(target_path, self.real(path))
            return SFTP_OK

    return Backend


def serve_conn(sock, host_key, authorized, root):
    t = paramiko.Transport(sock)
    t.add_server_key(host_key)
    t.set_subsystem_handler("sftp", SFTPServer, backend(root))
    try:
        t.start_server(server=Auth(authorized))
    except (paramiko.SSHException, EOFError, OSError):
        t.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--host-key", required=True)
    p.add_argument("--authorized-key", required=True)
    p.add_argument("--root", required=True)
    args = p.parse_args()
    exit_when_stdin_closes()
    host_key = paramiko.Ed25519Key.from_private_key_file(args.host_key)
    with open(args.authorized_key) as f:
        kind, b64 = f.read().split()[:2]
    root = os.path.realpath(args.root).rstrip("/")
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.port))
    ls.listen(16)
    print("port", ls.getsockname()[1], flush=True)
    while True:
        sock, _ = ls.accept()
        threading.Thread(target=serve_conn, args=(sock, host_key, (kind, b64), root), daemon=True).start()


if __name__ == "__main__":
    main()
