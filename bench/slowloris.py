"""Slow-client benchmark on 127.0.0.1 (bounded): normal reviews while hostile clients trickle.

It starts `guardhook serve` (8 request threads unless --threads), opens --slow TLS connections
(64) that each send a request line and then one header line per second and never finish, and
meanwhile posts the captured s01 worker delete to /validate from one client at --rate reviews per
second for --seconds, over a kept-alive connection (as the API server does) and, every fourth
review, over a new connection. When the server closes a slow connection the attacker opens a new
one at once, so --slow connections stay open all run long. It prints the latency percentiles of
the normal reviews (counted from each review's scheduled send time, so a stall also delays the
reviews queued behind it), how many slow connections the server closed, and how many reviews failed.

Target (issue 15): p99 under 1 s with 64 slow connections open.

    .venv/bin/python bench/slowloris.py [--slow 64] [--seconds 20] [--rate 20] [--threads 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import select
import socket
import ssl
import threading
import time

from servers import FIXTURES, Connections, Running, percentile, serve

HEADERS = {"Content-Type": "application/json"}
BODY = json.dumps(
    json.loads((FIXTURES / "reviews" / "s01-worker-delete.validating.json").read_text())
).encode()


def open_slow(server: Running, context: ssl.SSLContext) -> ssl.SSLSocket:
    """A TLS connection that sent a request line and one header, and will trickle the rest."""
    raw = socket.create_connection((server.host, server.port), timeout=10)
    tls = context.wrap_socket(raw, server_hostname=server.host)
    tls.sendall(b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return tls


def closed(sock: ssl.SSLSocket) -> bool:
    """Whether the server closed `sock` (readable with EOF, an alert, or an error)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        sock.setblocking(False)
        sock.recv(1)  # EOF, or any answer to half a request: the server gave up on it
        return True
    except ssl.SSLWantReadError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def attack(server: Running, count: int, tally: Connections) -> None:
    """Keep `count` slow connections open until `tally.stop`: one header line each per second."""
    context = server.context()
    socks: list[ssl.SSLSocket | None] = [None] * count
    line = 0
    while not tally.stop.is_set():
        for i in range(count):
            sock = socks[i]
            if sock is not None and closed(sock):
                tally.closed_by_server += 1
                sock.close()
                sock = socks[i] = None
            try:
                if sock is None:
                    sock = socks[i] = open_slow(server, context)
                    tally.opened += 1
                sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
            except OSError:
                if sock is None:
                    tally.connect_failures += 1
                else:
                    tally.closed_by_server += 1
                    sock.close()
                    socks[i] = None
        line += 1
        tally.stop.wait(1.0)
    for sock in socks:
        if sock is not None:
            sock.close()


def reviews(server: Running, seconds: float, rate: float) -> tuple[list[float], list[str]]:
    """Post reviews at `rate`/s for `seconds`; (latencies in seconds, failures)."""
    latencies: list[float] = []
    failures: list[str] = []
    kept: http.client.HTTPSConnection | None = None
    begin = time.perf_counter()
    sent = 0
    while (scheduled := begin + sent / rate) < begin + seconds:
        while time.perf_counter() < scheduled:
            time.sleep(min(0.005, max(0.0, scheduled - time.perf_counter())))
        sent += 1
        fresh = sent % 4 == 0
        connection = server.connection(timeout=30) if fresh else kept or server.connection(timeout=30)
        try:
            connection.request("POST", "/validate", BODY, HEADERS)
            answer = connection.getresponse()
            payload = answer.read()
            if answer.status != 200 or json.loads(payload)["response"]["allowed"] is not False:
                failures.append(f"HTTP {answer.status}")
            latencies.append(time.perf_counter() - scheduled)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            failures.append(repr(exc))
            connection.close()
            if not fresh:
                kept = None
            continue
        if fresh:
            connection.close()
        else:
            kept = connection
    if kept is not None:
        kept.close()
    return latencies, failures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slow", type=int, default=64, help="slow connections kept open (default 64)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the run (default 20)")
    parser.add_argument("--rate", type=float, default=20.0, help="normal reviews per second (default 20)")
    parser.add_argument("--threads", type=int, default=8, help="server request threads (default 8)")
    parser.add_argument("serve_args", nargs="*", help="extra `guardhook serve` flags (after --)")
    args = parser.parse_args()
    with serve("guardhook", threads=args.threads, extra=args.serve_args) as server:
        tally = Connections()
        attacker = threading.Thread(target=attack, args=(server, args.slow, tally), daemon=True)
        attacker.start()
        time.sleep(2.0)  # every slow connection open and trickling before the first review
        latencies, failures = reviews(server, args.seconds, args.rate)
        tally.stop.set()
        attacker.join(timeout=30)
    ms = [x * 1000 for x in latencies]
    print(f"slow connections: {args.slow} kept open; {tally.opened} opened, {tally.closed_by_server} closed")
    print(f"  by the server, {tally.connect_failures} failed to connect; server threads: {args.threads}")
    print(f"normal reviews: {len(latencies)} answered, {len(failures)} failed {failures[:3]}")
    print(
        f"latency ms: p50 {percentile(ms, 0.5):.1f}  p90 {percentile(ms, 0.9):.1f}"
        f"  p99 {percentile(ms, 0.99):.1f}  max {max(ms, default=float('nan')):.1f}"
    )
    p99 = percentile(latencies, 0.99)
    print(f"target p99 < 1 s: {'met' if p99 < 1.0 and not failures else 'NOT met'}")


if __name__ == "__main__":
    main()
