"""Benchmark the group-readiness reconciler's latency (printed figures, not a test).

The fake API server (tests/fake_apiserver.py) holds `--lws` opted-in LeaderWorkerSets of
`--replicas` groups of `--size` pods (leaders gated); the reconciler runs on its own live view
through the real `kubernetes` client, as in `guardhook group-readiness`. Each trial flips one random
worker's Ready condition (False, then True again) with a write to the fake, and times:

- view -> condition: from the moment the cluster view applies the worker's change (a view
  listener stamps it) to the moment the fake stores the leader's new `guardhook.io/group-ready`
  condition. Target: within 1 s.
- write -> condition: from the write to the fake (watch delivery included).

Run: python bench/group_readiness.py [--lws 20] [--replicas 4] [--size 4] [--trials 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kubernetes import config  # noqa: E402

from guardhook.cluster.kube_transport import live_view  # noqa: E402
from guardhook.cluster.sources import KUBECONFIG, Source  # noqa: E402
from guardhook.groups.ready import GATE, OPT_IN_ANNOTATION  # noqa: E402
from guardhook.readiness.runner import start_background_sync  # noqa: E402

from fake_apiserver import FakeApiServer, running_fake  # noqa: E402

P = "leaderworkerset.sigs.k8s.io/"


def lws(name: str, replicas: int, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "serve", "annotations": {OPT_IN_ANNOTATION: "true"}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size}},
    }


def pod(lws_name: str, group: int, worker: int, size: int) -> dict[str, Any]:
    name = f"{lws_name}-{group}" if worker == 0 else f"{lws_name}-{group}-{worker}"
    labels = {P + "name": lws_name, P + "group-index": str(group), P + "worker-index": str(worker)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "example.com/c:1"}]}
    if worker == 0:
        spec["readinessGates"] = [{"conditionType": GATE}]
    conditions = [{"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "serve",
            "labels": labels,
            "annotations": {P + "size": str(size)},
        },
        "spec": spec,
        "status": {"phase": "Running", "conditions": conditions},
    }


def gate_status(fake: FakeApiServer, name: str) -> str | None:
    found = fake.objects["pods"].get(("serve", name))
    for condition in (found or {}).get("status", {}).get("conditions", []):
        if condition["type"] == GATE:
            return str(condition["status"])
    return None


def wait_gate(fake: FakeApiServer, leader: str, status: str, timeout: float = 30.0) -> float:
    """Block until the fake stores `leader`'s condition with `status`; the monotonic time then."""
    with fake.cond:
        if not fake.cond.wait_for(lambda: gate_status(fake, leader) == status, timeout):
            raise SystemExit(f"{leader}: condition {status} not written within {timeout}s")
        return time.monotonic()


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    q = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else ordered * 99
    return (
        f"p50 {q[49] * 1000:7.1f} ms  p90 {q[89] * 1000:7.1f} ms  p99 {q[98] * 1000:7.1f} ms  "
        f"max {ordered[-1] * 1000:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lws", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--trials", type=int, default=50)
    args = parser.parse_args()
    rng = random.Random(16)
    with running_fake(max_page=500) as fake:
        names = [f"llm-{i}" for i in range(args.lws)]
        for name in names:
            fake.put("leaderworkersets", lws(name, args.replicas, args.size))
            for g in range(args.replicas):
                for w in range(args.size):
                    fake.put("pods", pod(name, g, w, args.size))
        kubeconfig = fake.write_kubeconfig(Path(fake_home()) / "kubeconfig")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        live = live_view(Source(KUBECONFIG, (str(kubeconfig),)), 60.0)
        seen: dict[tuple[str, bool], float] = {}

        def stamp(kind: str, old: Any, new: Any) -> None:
            if kind == "pods" and new is not None and (old is None or old.ready != new.ready):
                seen[(new.name, new.ready)] = time.monotonic()

        live.view.subscribe(stamp)
        stop = threading.Event()
        start_background_sync(api, "guardhook-system", live.view, interval=10.0, elect=False, stop=stop)
        live.start()
        leaders = [f"{n}-{g}" for n in names for g in range(args.replicas)]
        started = time.monotonic()
        for leader in leaders:
            wait_gate(fake, leader, "True")
        print(
            f"{args.lws} LWS x {args.replicas} groups x {args.size} pods = {len(leaders) * args.size} pods; "
            f"all {len(leaders)} leaders True {time.monotonic() - started:.2f}s after start"
        )
        from_view: list[float] = []
        from_write: list[float] = []
        for _ in range(args.trials):
            name, group = rng.choice(names), rng.randrange(args.replicas)
            worker = f"{name}-{group}-{rng.randrange(1, args.size)}"
            for ready, status in ((False, "False"), (True, "True")):
                current = fake.get("pods", "serve", worker)
                assert current is not None
                for condition in current["status"]["conditions"]:
                    if condition["type"] == "Ready":
                        condition["status"] = "True" if ready else "False"
                seen.pop((worker, ready), None)
                written = time.monotonic()
                fake.put("pods", current)
                done = wait_gate(fake, f"{name}-{group}", status)
                from_write.append(done - written)
                from_view.append(done - seen.get((worker, ready), written))
        stop.set()
        live.stop()
    print(f"{len(from_view)} transitions (a worker NotReady, then Ready again)")
    print(f"  view -> condition : {percentiles(from_view)}")
    print(f"  write -> condition: {percentiles(from_write)}")
    print(f"  within 1 s of the view: {sum(s <= 1.0 for s in from_view)}/{len(from_view)}")


def fake_home() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="guardhook-bench-")


if __name__ == "__main__":
    main()
