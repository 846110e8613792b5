"""A rolling upgrade of guardhook under a concurrent drain (issue 42 item 1), on a real cluster only
(`GUARDHOOK_E2E_KUBECONFIG`, see e2e/run.sh; skipped in bare API server mode and without a
cluster): while `kubectl rollout restart deployment/guardhook` replaces every guardhook pod, client
threads keep sending evictions of the fleet's pods, as `kubectl drain` does. The eviction entry
fails closed, so a webhook call cut by a stopping pod (a reset, an EOF) would be an error that
stops a drain; the shutdown sequence (guardhook.server.readahead: preStop delay, stop accepting,
answer what was read with `Connection: close`, idle connections closed last) must leave only
answers: 201 (allowed, a dry run) or 429 (a budget denial, which drain retries). Bounded: the
rollout's own timeout (300 s) and EVICTORS threads.

    GUARDHOOK_E2E_KUBECONFIG=... .venv/bin/pytest -q e2e/test_rolling_upgrade.py
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from cluster import Cluster, eventually

EVICTORS = 4
SHUTDOWN_BOUND_SECONDS = 60.0
"""Evictions go on after the rollout is complete until the last old pod has shut down (its pod
object gone: preStop delay, stop accepting, answer what was read), at most this long (its
terminationGracePeriodSeconds is 45), then AFTER_SECONDS more."""
AFTER_SECONDS = 2.0
GUARDHOOK = ("-n", "guardhook-system")


def evict_dry_run(cluster: Cluster, pod: str) -> str:
    """One dry-run eviction through the API server (the webhook is called as for a real one);
    its outcome: "allowed", "429", or the error text."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": cluster.namespace},
    }
    path = f"/api/v1/namespaces/{cluster.namespace}/pods/{pod}/eviction?dryRun=All"
    done = cluster.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(body), timeout=60)
    if done.returncode == 0:
        return "allowed"
    if "TooManyRequests" in done.stderr or "(429)" in done.stderr:
        return "429"
    return done.stderr.strip()[:400] or f"exit {done.returncode}"


def terminating(cluster: Cluster) -> list[str]:
    """The guardhook pods being deleted (the rollout's old ones still shutting down)."""
    listed = cluster.must("get", "pods", *GUARDHOOK, "-l", "app.kubernetes.io/name=guardhook", "-o", "json")
    pods = json.loads(listed)
    return [p["metadata"]["name"] for p in pods["items"] if p["metadata"].get("deletionTimestamp")]


def test_a_rolling_upgrade_under_a_concurrent_drain_has_no_non_429_eviction_error(cluster: Cluster) -> None:
    if cluster.mode != "cluster":
        pytest.skip("needs guardhook installed in a real cluster (GUARDHOOK_E2E_KUBECONFIG)")
    pods = [cluster.worker(group) for group in range(cluster.groups)] + [
        cluster.leader(group) for group in range(cluster.groups)
    ]
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def drain(offset: int) -> None:
        n = offset
        while not stop.is_set():
            outcome = evict_dry_run(cluster, pods[n % len(pods)])
            with lock:
                outcomes[outcome] += 1
            n += 1

    threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(EVICTORS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(5)  # evictions flowing before the first pod is replaced
        cluster.must("rollout", "restart", "deployment/guardhook", *GUARDHOOK)
        cluster.must("rollout", "status", "deployment/guardhook", *GUARDHOOK, "--timeout=300s", timeout=320)
        eventually(lambda: not terminating(cluster), SHUTDOWN_BOUND_SECONDS, "the old pods to be gone")
        time.sleep(AFTER_SECONDS)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    errors = {outcome: n for outcome, n in outcomes.items() if outcome not in ("allowed", "429")}
    assert outcomes["allowed"] + outcomes["429"] >= 20, outcomes  # the drain really ran
    assert errors == {}, f"non-429 eviction errors during the rollout: {errors}"
