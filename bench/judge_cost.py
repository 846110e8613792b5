"""What judging a review costs, in the real server and in a loop (issue 53, request path): why
`Engine.judge` takes several times more CPU a request inside `guardhook serve` than in a tight loop.

In the server: `guardhook serve` (the sample fleet, `serve`'s defaults) is started with a probe on
its import path (a `sitecustomize` written to a temporary folder) that wraps `Engine.judge`, each
policy's run, the review decode, the body read and the two metrics calls in `time.thread_time()`
(the CPU of the request thread alone: a wait for the GIL or a lock is not in it) and writes the
sums to a file. Keep-alive clients saturate it for `--seconds` at each `--threads`; printed: the
server's CPU per request (`/proc`, master and worker) and each part's thread CPU per request.

In a loop, one process, the same engine as `serve` builds (sample fleet, in-memory ledger, decision
log on): judge per review as the minimum of 20 judgements of the same review (hot), a shuffled
stream of the captured reviews, and the same stream with `--pollute` KiB read through the caches
between requests (hashed), as a request's TLS, socket, HTTP parsing and decoding do in the server.

By thread (`--by-thread`): `guardhook serve` and bench/bare.py's WSGI callable, each saturated in
turn with no probe, and each server thread's CPU a request from /proc: the main thread (the worker's
event loop: accepting, the TLS handshake and records, reading whole requests), the request pool
threads (the app: decode, judge, answer) and any other thread (guardhook's log writer), so the gap
between the two servers is split by where it is spent.

    .venv/bin/python bench/judge_cost.py [--seconds 4] [--threads 1,8] [--pollute 128,512] [--loop-only]
    .venv/bin/python bench/judge_cost.py --by-thread [--seconds 8]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import multiprocessing
import os
import random
import tempfile
import time
from pathlib import Path

import load
from servers import FIXTURES, serve, served_code

PROBE = """
import json, os, threading, time
from guardhook.admission import engine as _engine
from guardhook.server import app as _app, metrics as _metrics
_out = os.environ["GUARDHOOK_JUDGE_PROBE"]
_stats = {}
_lock = threading.Lock()
def _wrap(holder, name, key, dump=False):
    inner = getattr(holder, name)
    def timed(*args, **kwargs):
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent = time.thread_time() - started
            part = key(args) if callable(key) else key
            with _lock:
                entry = _stats.setdefault(part, [0.0, 0])
                entry[0] += spent
                entry[1] += 1
                if dump and entry[1] % 200 == 0:
                    with open(f"{_out}.{os.getpid()}", "w") as file:
                        json.dump(_stats, file)
    setattr(holder, name, timed)
_wrap(_engine.Engine, "judge", "Engine.judge")
_wrap(_engine.Engine, "_run", lambda args: "policy " + args[1].policy.id)
_wrap(_app, "decode", "decode")
_wrap(_app, "_read_body", "read body")
_wrap(_metrics.Metrics, "observe", "metrics.observe")
_wrap(_metrics.Metrics, "answered", "metrics.answered")
_wrap(_app.ReviewFastPath, "__call__", "the app (all of the above and more)", dump=True)
"""

APP = "the app (all of the above and more)"


def in_server(threads: int, seconds: float, clients: int) -> None:
    """Saturate a probed `guardhook serve` and print its CPU per request and each part's."""
    with tempfile.TemporaryDirectory(prefix="bench-judge-probe-") as tmp:
        Path(tmp, "sitecustomize.py").write_text(PROBE)
        out = Path(tmp, "stats")
        before = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tmp, before) if p)
        os.environ["GUARDHOOK_JUDGE_PROBE"] = str(out)
        try:
            with serve("guardhook", threads=threads) as server, multiprocessing.Pool(clients) as pool:
                [result] = load.run_phase(pool, [server], "saturated", "keepalive", clients, seconds, 0.0)
        finally:
            os.environ["PYTHONPATH"] = before
            os.environ.pop("GUARDHOOK_JUDGE_PROBE", None)
        [dump] = Path(tmp).glob("stats.*")
        stats = json.loads(dump.read_text())
    requests = stats[APP][1]
    cpu = result.cpu_seconds / max(1, len(result.latencies)) * 1e6
    print(
        f"\n--threads {threads}: {result.rate:.0f} req/s,"
        f" server CPU {cpu:.0f} us a request ({requests} probed)"
    )
    print(f"  {'part':<40} {'us a call':>10} {'calls a request':>16} {'us a request':>13}")
    for part, (spent, calls) in sorted(stats.items(), key=lambda kv: -kv[1][0]):
        print(
            f"  {part:<40} {spent / calls * 1e6:10.1f} {calls / requests:16.2f}"
            f" {spent / requests * 1e6:13.1f}"
        )


def in_loop(pollute: list[int], requests: int) -> None:
    """Judge in one process: hot (min of 20 per review), a shuffled stream, and the stream with
    caches flushed by reading `pollute` KiB between requests."""
    from guardhook.admission.codec import decode
    from guardhook.admission.engine import Engine
    from guardhook.cluster.view.static import embedded_fleet_view
    from guardhook.ledger import MemoryLedger

    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))  # noqa: SIM115 (lives as long as the run)
    reviews = [
        ("mutate" if path.name.endswith(".mutating.json") else "validate", path.read_bytes())
        for path in sorted((FIXTURES / "reviews").glob("*.json"))
    ]
    engine = Engine(embedded_fleet_view(), ledger=MemoryLedger(), log_decisions=True)
    hot = []
    for endpoint, body in reviews:
        request = decode(body).request
        for _ in range(3):
            engine.judge(request, endpoint)
        best = float("inf")
        for _ in range(20):
            started = time.thread_time()
            engine.judge(request, endpoint)
            best = min(best, time.thread_time() - started)
        hot.append(best)
    print(
        f"\nin a loop: hot, min of 20 per review, mean over {len(reviews)} reviews:"
        f" {sum(hot) / len(hot) * 1e6:.1f} us"
    )
    chooser = random.Random(1)
    stream = [chooser.choice(reviews) for _ in range(requests)]
    for kib in [0, *pollute]:
        junk = bytes(kib << 10)
        decoded = [(endpoint, decode(body).request) for endpoint, body in stream]
        spent = 0.0
        for endpoint, request in decoded:
            if kib:
                hashlib.sha256(junk).digest()
            started = time.thread_time()
            engine.judge(request, endpoint)
            spent += time.thread_time() - started
        label = "a shuffled stream" if not kib else f"the stream, {kib} KiB read between requests"
        print(f"in a loop: {label}: {spent / len(decoded) * 1e6:.1f} us a request")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of process `pid` and of its children (gunicorn's
    master and its worker), by thread id, from /proc."""
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        pids = [pid, *map(int, children.read().split())]
    spent = {}
    for each in pids:
        for tid in os.listdir(f"/proc/{each}/task"):
            try:
                with open(f"/proc/{each}/task/{tid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended between the listing and the read
                continue
            spent[int(tid)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return spent


def by_thread(seconds: float, clients: int) -> None:
    """Saturate `guardhook serve` and the WSGI callable in turn (no probe) and print each one's CPU
    a request by thread role: main (the worker's first thread, its event loop), pool (threads that
    answered requests: at least a quarter of the busiest other thread's CPU), other (the gunicorn
    master, guardhook's log writer and background threads)."""
    print(f"\nby thread, {clients} keep-alive clients saturating each server for {seconds:g} s:")
    print(f"  {'server':<10} {'req/s':>7} {'main':>7} {'pool':>7} {'other':>7} {'total':>7}  (us a request)")
    for kind in ("guardhook", "wsgi"):
        with serve(kind) as server, multiprocessing.Pool(clients) as pool:
            load.run_phase(pool, [server], "saturated", "keepalive", clients, 1.0, 0.0)  # warm
            before = thread_cpu(server.pid)
            [result] = load.run_phase(pool, [server], "saturated", "keepalive", clients, seconds, 0.0)
            after = thread_cpu(server.pid)
            with open(f"/proc/{server.pid}/task/{server.pid}/children") as children:
                worker = int(children.read().split()[0])
        spent = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
        requests = max(1, len(result.latencies))
        main_thread = spent.pop(worker, 0.0)
        busiest = max(spent.values(), default=0.0)
        pool_threads = sum(cpu for cpu in spent.values() if cpu >= busiest / 4)
        other = sum(spent.values()) - pool_threads
        figures = [main_thread, pool_threads, other, main_thread + pool_threads + other]
        columns = " ".join(f"{cpu / requests * 1e6:7.1f}" for cpu in figures)
        print(f"  {kind:<10} {result.rate:7.0f} {columns}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="saturated seconds per --threads")
    parser.add_argument("--threads", default="1,8", help="server request threads to try, comma-separated")
    parser.add_argument("--clients", type=int, default=4, help="client processes (connections)")
    parser.add_argument("--pollute", default="128,512", help="KiB read between requests in the loop")
    parser.add_argument("--requests", type=int, default=4000, help="requests in each loop stream")
    parser.add_argument("--loop-only", action="store_true", help="skip the server")
    parser.add_argument("--by-thread", action="store_true", help="only each server's CPU by thread")
    args = parser.parse_args()
    print(f"guardhook code: {served_code()}")
    if args.by_thread:
        by_thread(args.seconds, args.clients)
        return
    if not args.loop_only:
        for threads in (int(t) for t in args.threads.split(",")):
            in_server(threads, args.seconds, args.clients)
    in_loop([int(k) for k in args.pollute.split(",") if k], args.requests)


if __name__ == "__main__":
    main()
