"""Benchmark: what the serving process's background work does to a decision's latency at fleet
scale (printed figures, not a test).

`guardhook serve` computes two things off the request path that grow with the fleet: the
spare-group gauges (guardhook.server.spare_metrics: the capacity solver once per LWS, every 5 s)
and, on each /metrics scrape, the per-LWS group gauges (group health of every group). Both run
in Python threads of the serving process, so while they run a request thread waits for the GIL
(up to the interpreter's 5 ms switch interval each time it gives it up) or for the view's lock.

Here a synthetic cluster (bench/view_store.py's: 5,000 nodes, 500 LWS, 150,000 pods) is held in
one view with its capacity index; a pod changes every 10 ms (as watch events do), and a request
thread judges the captured reviews one every 2 ms (decode and engine, as the webhook does)
while, in turn, nothing else runs, the spare-group refresh runs every --every seconds, and a
/metrics scrape (refresh and render) runs every --every seconds. Printed per scenario: p50, p99,
p99.9 and max of the decisions' wall time, and how long one background pass took.

Run: python bench/background.py [--scale 1.0] [--seconds 15] [--every 1.0]
"""

from __future__ import annotations

import argparse
import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from view_store import Synthetic, lws, lws_layout, node, pod

from guardhook.admission.codec import decode
from guardhook.admission.engine import Engine
from guardhook.capacity import index_for
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.store import KINDS, LEADERWORKERSETS, NODES, PODS, ClusterView
from guardhook.config import load_config
from guardhook.server.app import Runtime
from guardhook.server.spare_metrics import SpareGroupsCollector

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))


def fleet(scale: float) -> tuple[ClusterView, list[dict[str, object]]]:
    """A synced view of the synthetic fleet with its capacity index, and its LWS pods."""
    nodes = int(5000 * scale)
    layout = lws_layout(max(1, int(500 * scale)), int(150_000 * scale * 0.8))
    view = ClusterView("bench")
    view.replace_kind(NODES, [node(i) for i in range(nodes)])
    view.replace_kind(LEADERWORKERSETS, [lws(*entry) for entry in layout])
    pods = []
    for namespace, name, replicas, size in layout:
        for group in range(replicas):
            pods += [
                pod(namespace, name, group, worker, size, f"node-{len(pods) % nodes:05d}")
                for worker in range(size)
            ]
    view.replace_kind(PODS, pods)
    for kind in KINDS:
        view.mark_synced(kind)
    index_for(view)
    return view, pods


def every(seconds: float, stop: threading.Event, work: Callable[[], None], took: list[float]) -> None:
    """Run `work` every `seconds` until `stop`, recording how long each pass took."""
    while not stop.wait(seconds):
        started = time.perf_counter()
        work()
        took.append(time.perf_counter() - started)


def decisions(engine: Engine, seconds: float) -> list[float]:
    """Judge the captured reviews, one due every 2 ms, for `seconds`; each decision's seconds from
    when it was due (so the time the thread waits to get the GIL back after its sleep counts, as a
    server thread waits for it after each socket read and write)."""
    bodies = [path.read_bytes() for path in sorted((FIXTURES / "reviews").glob("*.json"))]
    latencies = []
    begin = time.perf_counter()
    for sent in range(int(seconds / 0.002)):
        due = begin + sent * 0.002
        while (now := time.perf_counter()) < due:
            time.sleep(due - now)
        engine.judge(decode(bodies[sent % len(bodies)]).request, "validate")
        latencies.append(time.perf_counter() - due)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the default fleet")
    parser.add_argument("--seconds", type=float, default=15.0, help="decisions per scenario, seconds")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between background passes")
    args = parser.parse_args()
    view, pods = fleet(args.scale)
    gc.freeze()  # as serve does once the view has synced
    config = load_config(None, "deny")
    engine = Engine(view, config)
    runtime = Runtime(engine)

    def scrape() -> None:
        runtime.refresh_metrics()
        runtime.metrics.render()

    decisions(engine, 0.2)  # every review judged once: first-time costs are not the background's
    spare = SpareGroupsCollector(lambda: view, interval=3600)  # refreshed by `every` below
    spare.stop()
    print(f"fleet: {len(view.nodes())} nodes, {len(view.all_lws())} LWS, {len(pods)} pods")
    print(f"{'background':<24} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8}  one pass")

    def relist() -> None:
        Reflector(PODS, view, Synthetic({PODS: lambda: iter(pods)})).relist()

    scenarios = (("none", None), ("spare-group refresh", spare.refresh), ("/metrics scrape", scrape))
    for label, work in (*scenarios, ("pod relist", relist)):
        stop, took = threading.Event(), []
        threads = [threading.Thread(target=churn, args=(view, pods, stop), daemon=True)]
        if work is not None:
            threads.append(threading.Thread(target=every, args=(args.every, stop, work, took), daemon=True))
        for thread in threads:
            thread.start()
        latencies = sorted(decisions(engine, args.seconds))
        stop.set()
        for thread in threads:
            thread.join()
        n = len(latencies)
        figures = " ".join(f"{latencies[int(q * n)] * 1000:8.2f}" for q in (0.5, 0.99))
        tail = f"{latencies[int(0.999 * n)] * 1000:9.2f} {latencies[-1] * 1000:8.2f}"
        one = f"{sum(took) / len(took) * 1000:.0f} ms x {len(took)}" if took else ""
        print(f"{label:<24} {figures} {tail}  {one}")


def churn(view: ClusterView, pods: list[dict[str, object]], stop: threading.Event) -> None:
    """A pod event every 10 ms (the capacity index moves to a new state), until `stop`."""
    changed = 0
    while not stop.wait(0.01):
        view.upsert(PODS, pods[changed % len(pods)])
        changed += 1


if __name__ == "__main__":
    main()
