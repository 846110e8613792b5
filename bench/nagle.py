"""Show that a kept-alive request/response round trip takes about a millisecond, not the ~40 ms of a
Nagle/delayed-ACK stall (issue 2): `guardhook serve` on 127.0.0.1, one HTTPS connection, N round
trips each to /validate (a captured review) and /healthz, printing p50/p90/p99/max. It also reads
TCP_NODELAY off the server's accepted socket (duplicated with pidfd_getfd, Linux >= 5.6, when
permitted); gunicorn sets it on the listener and Linux accepted sockets inherit it.

    .venv/bin/python bench/nagle.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import statistics
import time
from pathlib import Path

from servers import FIXTURES, Running, percentile, serve

SYS_PIDFD_GETFD = 438


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def socket_inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the server-side TCP socket 127.0.0.1:local_port <-> 127.0.0.1:remote_port."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
            return int(fields[9])
    return None


def server_nodelay(server: Running, client_port: int) -> str:
    """TCP_NODELAY of the server's socket for our connection, read via pidfd_getfd."""
    inode = socket_inode(server.port, client_port)
    if inode is None:
        return "not observable (socket not found in /proc/net/tcp)"
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in [server.pid, *children(server.pid)]:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            entries = list(fd_dir.iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                if os.readlink(entry) != f"socket:[{inode}]":
                    continue
            except OSError:
                continue
            pidfd = os.pidfd_open(pid)
            try:
                fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(entry.name), 0)
                if fd < 0:
                    return f"not observable (pidfd_getfd: {os.strerror(ctypes.get_errno())})"
                dup = socket.socket(fileno=fd)
                try:
                    value = dup.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                finally:
                    dup.detach()
                    os.close(fd)
                return f"{'set' if value else 'NOT set'} (worker pid {pid}, fd {entry.name})"
            finally:
                os.close(pidfd)
    return "not observable (no process holds the socket)"


def round_trips(server: Running, requests: int) -> None:
    body = (FIXTURES / "reviews" / "s01-worker-delete.validating.json").read_bytes()
    connection = server.connection()
    connection.connect()
    first_socket = connection.sock
    assert first_socket is not None
    client_port = first_socket.getsockname()[1]
    timings: dict[str, list[float]] = {"/validate": [], "/healthz": []}
    for _ in range(requests):
        for path, times in timings.items():
            started = time.perf_counter()
            if path == "/validate":
                connection.request("POST", path, body, {"Content-Type": "application/json"})
            else:
                connection.request("GET", path)
            answer = connection.getresponse()
            answer.read()
            times.append(time.perf_counter() - started)
            assert answer.status == 200, answer.status
    assert connection.sock is first_socket, "the connection was not kept alive"
    print(f"{requests} round trips per endpoint over one kept-alive TLS connection (port {client_port})")
    print(f"{'endpoint':<10} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} {'>= 35 ms':>9}")
    for path, times in timings.items():
        ms = [t * 1000 for t in times]
        stalls = sum(1 for t in ms if t >= 35)
        print(
            f"{path:<10} {statistics.median(ms):8.2f} {percentile(ms, 0.9):8.2f} {percentile(ms, 0.99):8.2f}"
            f" {max(ms):8.2f} {stalls:9d}"
        )
    print(f"TCP_NODELAY on the server's accepted socket: {server_nodelay(server, client_port)}")
    connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    with serve("guardhook") as server:
        round_trips(server, args.requests)


if __name__ == "__main__":
    main()
