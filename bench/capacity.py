"""Benchmark: `group-capacity` decision time on large synthetic clusters.

Builds a ClusterView with N GPU nodes (8 GPUs, 192 cpu, 2000Gi, 110 pods; four nodes per
`example.com/nvlink-domain`) and 30 pods per node — 29 small pods plus one 8-GPU pod of an
existing LWS group on 95% of the nodes — and 20 pending pods of two shapes per 1,000 nodes, then judges
`leaderworkersets/scale` scale-ups through the engine, as the webhook does. Between decisions a
pod changes, so the capacity index is exercised incrementally. Prints p50/p99 per scenario:

- same shape: leader and workers alike (8 GPUs each), size 4, +2 groups;
- mixed shape: a cpu-only leader and 8-GPU workers, size 5, +2 groups;
- exclusive: same shape with `exclusive-topology` on the NVLink domain, +2 groups;
- too big: same shape asking for more groups than fit (the deny path, message included).

Targets (issue 6): p99 <= 5 ms at 5,000 nodes and <= 50 ms at 65,000.

    python bench/capacity.py                    # 1,000 / 5,000 / 65,000 nodes (about 3 minutes)
    python bench/capacity.py --nodes 1000 --decisions 100
"""

from __future__ import annotations

import argparse
import copy
import gc
import random
import statistics
import time
from typing import Any

from guardhook.admission.engine import Engine
from guardhook.capacity import index_for
from guardhook.cluster.view.store import LEADERWORKERSETS, NODES, PODS, ClusterView

GPU = "nvidia.com/gpu"
PODS_PER_NODE = 30
PENDING_PODS_PER_1000_NODES = 20
NAMESPACE = "bench"
DOMAIN_LABEL = "example.com/nvlink-domain"


def node(i: int) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {
            "name": f"gpu-{i:05d}",
            "labels": {"kubernetes.io/hostname": f"gpu-{i:05d}", DOMAIN_LABEL: f"nvl-{i // 4}"},
        },
        "status": {
            "allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110", GPU: "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def small_pod(i: int, j: int, cpu: str = "500m") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": f"side-{i}-{j}", "namespace": "infra"},
        "spec": {
            "nodeName": f"gpu-{i:05d}",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "2Gi"}}}],
        },
        "status": {"phase": "Running"},
    }


def gpu_pod(i: int) -> dict[str, Any]:
    group = i // 4
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "fleet",
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        "leaderworkerset.sigs.k8s.io/worker-index": str(i % 4),
        "leaderworkerset.sigs.k8s.io/group-key": f"key-{group}",
    }
    return {
        "kind": "Pod",
        "metadata": {"name": f"fleet-{i}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "nodeName": f"gpu-{i:05d}",
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "90", "memory": "1500Gi", GPU: "8"}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def pending_pod(k: int) -> dict[str, Any]:
    requests = {"cpu": "4", "memory": "16Gi"} if k % 2 else {"cpu": "8", "memory": "64Gi", GPU: "1"}
    return {
        "kind": "Pod",
        "metadata": {"name": f"pending-{k}", "namespace": "batch"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": "Pending"},
    }


def template(cpu: str, gpu: int) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": "100Gi"}
    if gpu:
        requests[GPU] = str(gpu)
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}


def lws(name: str, size: int, leader: dict[str, Any], exclusive: bool = False) -> dict[str, Any]:
    annotations = {"leaderworkerset.sigs.k8s.io/exclusive-topology": DOMAIN_LABEL} if exclusive else {}
    return {
        "kind": "LeaderWorkerSet",
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": leader,
                "workerTemplate": template("8", 8),
            },
        },
    }


def scale_request(name: str, old: int, new: int) -> dict[str, Any]:
    scale = {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": name, "namespace": NAMESPACE},
    }
    return {
        "uid": "bench",
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "leaderworkerset.x-k8s.io", "version": "v1", "resource": "leaderworkersets"},
        "subResource": "scale",
        "operation": "UPDATE",
        "name": name,
        "namespace": NAMESPACE,
        "userInfo": {"username": "bench"},
        "object": {**copy.deepcopy(scale), "spec": {"replicas": new}},
        "oldObject": {**copy.deepcopy(scale), "spec": {"replicas": old}},
    }


def build(nodes: int, rng: random.Random) -> tuple[ClusterView, float, float]:
    """The view, seconds to fill it, seconds to build the capacity index afterwards."""
    view = ClusterView(source="bench")
    started = time.perf_counter()
    for i in range(nodes):
        view.upsert(NODES, node(i))
    domains = nodes // 4  # whole NVLink domains are busy or free, as a topology-aware scheduler leaves them
    busy_domains = set(rng.sample(range(domains), int(domains * 0.95)))
    busy = {i for i in range(nodes) if i // 4 in busy_domains}
    for i in range(nodes):
        for j in range(PODS_PER_NODE - 1):
            view.upsert(PODS, small_pod(i, j))
        view.upsert(PODS, gpu_pod(i) if i in busy else small_pod(i, PODS_PER_NODE))
    # a backlog the scheduler has not placed: claimed before new groups
    for k in range(nodes * PENDING_PODS_PER_1000_NODES // 1000):
        view.upsert(PODS, pending_pod(k))
    view.upsert(LEADERWORKERSETS, lws("same", 4, template("8", 8)))
    view.upsert(LEADERWORKERSETS, lws("mixed", 5, template("16", 0)))
    view.upsert(LEADERWORKERSETS, lws("exclusive", 4, template("8", 8), exclusive=True))
    for kind in ("nodes", "pods", "leaderworkersets", "statefulsets", "services", "poddisruptionbudgets"):
        view.mark_synced(kind)
    filled = time.perf_counter()
    index_for(view)
    indexed = time.perf_counter()
    # A long-lived heap of millions of records: keep the cyclic GC from rescanning it on every
    # full collection (what a server does after its initial sync; see README "Performance").
    gc.collect()
    gc.freeze()
    return view, filled - started, indexed - filled


def percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def measure(engine: Engine, request: dict[str, Any], decisions: int, churn: Any) -> tuple[list[float], bool]:
    """Wall and CPU milliseconds per decision (p50, p99 each), and the last answer."""
    wall, cpu = [], []
    allowed = True
    for n in range(decisions):
        churn(n)
        started, started_cpu = time.perf_counter(), time.thread_time()
        response = engine.judge(request, "validate").response
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - started_cpu) * 1000)
        allowed = bool(response["allowed"])
    return [*percentiles(wall), *percentiles(cpu)], allowed


def run(nodes: int, decisions: int) -> None:
    rng = random.Random(nodes)
    view, fill_s, index_s = build(nodes, rng)
    engine = Engine(view, record=False)

    def churn(n: int) -> None:  # a pod comes and goes on some node: the index follows incrementally
        i = rng.randrange(nodes)
        view.upsert(PODS, small_pod(i, 999, cpu=f"{100 + n % 7}m"))

    scenarios = {
        "same shape +2": scale_request("same", 1, 3),
        "mixed shape +2": scale_request("mixed", 1, 3),
        "exclusive +2": scale_request("exclusive", 1, 3),
        "too big (deny)": scale_request("same", 1, nodes),
    }
    print(
        f"\n{nodes:,} nodes, {nodes * PODS_PER_NODE:,} pods: view filled in {fill_s:.1f} s, "
        f"capacity index built in {index_s:.2f} s"
    )
    print(f"  {'scenario':<16} {'p50 ms':>8} {'p99 ms':>8} {'cpu p50':>8} {'cpu p99':>8}  answer")
    for label, request in scenarios.items():
        figures, allowed = measure(engine, request, decisions, churn)
        print(
            f"  {label:<16} "
            + " ".join(f"{f:>8.2f}" for f in figures)
            + f"  {'allowed' if allowed else 'denied'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nodes", type=int, action="append", help="cluster sizes (default 1000, 5000, 65000)"
    )
    parser.add_argument("--decisions", type=int, default=200, help="decisions per scenario (default 200)")
    args = parser.parse_args()
    for nodes in args.nodes or [1000, 5000, 65000]:
        run(nodes, args.decisions)


if __name__ == "__main__":
    main()
