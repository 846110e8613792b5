"""Probes at the connection ceiling on 127.0.0.1 (bounded): how long `/healthz` and `/readyz` take
on a new connection, as the kubelet asks them, while `--idle` (1,000) kept-alive connections are
open to the webhook port.

It starts `guardhook serve` (with `--health-port` on a free port unless `--no-health-port`), opens
`--idle` TLS connections to the webhook port that each have one request answered and then stay
open and silent (as an API server's kept-alive connections between reviews), and then, every
`--every` seconds for `--seconds`, asks `/healthz` and `/readyz` on a new connection (one thread
a port, so a slow answer on one does not delay the other's probes): over HTTPS on the webhook
port (where the probes went before issue 53) and over plain HTTP on the health port (where the
manifests and the chart send the kubelet's probes now). Each probe is timed from the
connect to the answer's last byte; a probe that fails or takes over 5 s counts as failed. Keeping
the idle connections open, a connection the server closes (to make room at --max-connections) is
counted and opened again, so `--idle` stay open all run long.

Goal (issue 53): every probe within 0.1 s, or 0.5 s on a busy machine (the kubelet's default probe
timeout is 1 s).

    .venv/bin/python bench/probes.py [--idle 1000] [--seconds 20] [--every 0.25] [--no-health-port]
"""

from __future__ import annotations

import argparse
import http.client
import os
import selectors
import socket
import ssl
import threading
import time

from servers import Connections, Running, free_port, percentile, serve

GOAL_SECONDS = 0.1
BUSY_GOAL_SECONDS = 0.5
PROBE_TIMEOUT_SECONDS = 5.0


def open_idle(server: Running, context: ssl.SSLContext) -> ssl.SSLSocket:
    """A kept-alive TLS connection to the webhook port with one request answered behind it."""
    raw = socket.create_connection((server.host, server.port), timeout=30)
    tls = context.wrap_socket(raw, server_hostname=server.host)
    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    answer = b""
    while b"\r\n\r\nok\n" not in answer:
        chunk = tls.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the answer")
        answer += chunk
    return tls


def hold_idle(server: Running, count: int, tally: Connections, ready: threading.Event) -> None:
    """Keep `count` idle kept-alive connections open until `tally.stop`, reopening those the
    server closes."""
    context = server.context()
    socks: list[ssl.SSLSocket | None] = [None] * count
    watch = selectors.DefaultSelector()  # epoll: select() stops at fd 1024
    while not tally.stop.is_set():
        for i in range(count):
            if socks[i] is None:
                try:
                    sock = socks[i] = open_idle(server, context)
                    watch.register(sock, selectors.EVENT_READ, i)
                    tally.opened += 1
                except OSError:
                    tally.connect_failures += 1
        ready.set()
        for key, _ in watch.select(0.2):  # an idle connection is readable only when the server closes it
            tally.closed_by_server += 1
            watch.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
            socks[key.data] = None
    for sock in socks:
        if sock is not None:
            sock.close()
    watch.close()


def probe(host: str, port: int, path: str, context: ssl.SSLContext | None) -> float | None:
    """Seconds from connect to the whole answer of GET `path` on a new connection (HTTPS with
    `context`, else plain HTTP), or None when it failed or was not a 200."""
    started = time.perf_counter()
    connection: http.client.HTTPConnection
    if context is not None:
        connection = http.client.HTTPSConnection(host, port, context=context, timeout=PROBE_TIMEOUT_SECONDS)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=PROBE_TIMEOUT_SECONDS)
    try:
        connection.request("GET", path, headers={"Connection": "close"})
        answer = connection.getresponse()
        answer.read()
        ok = answer.status == 200
    except (OSError, http.client.HTTPException):
        ok = False
    finally:
        connection.close()
    return time.perf_counter() - started if ok else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=int, default=1000, help="idle kept-alive connections (default 1000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long probes are asked (default 20)")
    parser.add_argument("--every", type=float, default=0.25, help="seconds between probes (default 0.25)")
    parser.add_argument("--threads", type=int, default=8, help="server request threads (default 8)")
    parser.add_argument(
        "--no-health-port", action="store_true", help="serve without --health-port (code before issue 53)"
    )
    parser.add_argument("serve_args", nargs="*", help="extra `guardhook serve` flags (after --)")
    args = parser.parse_args()
    health_port = None if args.no_health_port else free_port()
    extra = [*args.serve_args, *(["--health-port", str(health_port)] if health_port else [])]
    results: dict[str, list[float | None]] = {}
    with serve("guardhook", threads=args.threads, extra=extra) as server:
        tally, ready = Connections(), threading.Event()
        holder = threading.Thread(target=hold_idle, args=(server, args.idle, tally, ready), daemon=True)
        opening = time.monotonic()
        holder.start()
        ready.wait(timeout=300)
        opened_in = time.monotonic() - opening
        time.sleep(1.0)  # let the server settle (closes to make room, if any)
        context = server.context()
        ports: list[tuple[str, int, ssl.SSLContext | None]] = [("webhook port (HTTPS)", server.port, context)]
        if health_port:
            ports.append(("health port (HTTP)", health_port, None))
        end = time.monotonic() + args.seconds

        def keep_probing(name: str, port: int, tls: ssl.SSLContext | None) -> None:
            # one thread a port: a slow probe on one port does not delay the other's
            while time.monotonic() < end:
                for path in ("/healthz", "/readyz"):
                    results[f"{path} on the {name}"].append(probe(server.host, port, path, tls))
                time.sleep(args.every)

        for name, _, _ in ports:
            for path in ("/healthz", "/readyz"):
                results[f"{path} on the {name}"] = []
        probers = [threading.Thread(target=keep_probing, args=port) for port in ports]
        for prober in probers:
            prober.start()
        for prober in probers:
            prober.join()
        tally.stop.set()
        holder.join(timeout=60)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load} (1, 5, 15 min; other jobs on the cores slow every probe)")
    print(
        f"idle kept-alive connections: {args.idle} held open ({opened_in:.1f} s to open them);"
        f" {tally.opened} opened in all, {tally.closed_by_server} closed by the server, "
        f"{tally.connect_failures} failed to connect"
    )
    print(
        f"{'probe (new connection each)':<42} {'n':>5}"
        f" {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'failed':>6}"
    )
    for name, times in results.items():
        ok = [t * 1000 for t in times if t is not None]
        failed = len(times) - len(ok)
        print(
            f"{name:<42} {len(times):5d} {percentile(ok, 0.5):8.1f} {percentile(ok, 0.99):8.1f}"
            f" {max(ok, default=float('nan')):8.1f} {failed:6d}"
        )
    for name, times in results.items():
        worst = max((t for t in times if t is not None), default=float("inf"))
        if any(t is None for t in times):
            worst = float("inf")
        verdict = (
            "met" if worst <= GOAL_SECONDS else ("met (busy)" if worst <= BUSY_GOAL_SECONDS else "MISSED")
        )
        print(
            f"{name}: worst {worst * 1000:.1f} ms (goal <= {GOAL_SECONDS * 1000:.0f} ms,"
            f" <= {BUSY_GOAL_SECONDS * 1000:.0f} ms on a busy machine): {verdict}"
        )


if __name__ == "__main__":
    main()
