"""Builders for eviction tests: an LWS with its pods as API objects, views, engines, requests."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.config import build_config
from guardhook.ledger import Ledger, MemoryLedger

from conftest import load_review


def pod_object(lws: str, group: int, worker: int, size: int, ready: bool = True, ns: str = "serve") -> dict:
    """A running LWS pod as the API server shows it (Ready unless `ready` is False)."""
    name = f"{lws}-{group}" if worker == 0 else f"{lws}-{group}-{worker}"
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "labels": {
                NAME_LABEL: lws,
                GROUP_INDEX_LABEL: str(group),
                WORKER_INDEX_LABEL: str(worker),
                GROUP_KEY_LABEL: f"key{group}",
            },
            "annotations": {SIZE_ANNOTATION: str(size)},
        },
        "spec": {"nodeName": f"node-{group}-{worker}", "containers": [{"name": "c", "image": "i"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def lws_object(
    name: str, replicas: int, size: int, annotations: dict | None = None, ns: str = "serve"
) -> dict:
    return {
        "kind": "LeaderWorkerSet",
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-lws-{name}",
            "annotations": annotations or {},
        },
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": {}}},
    }


def lws_view(
    replicas: int, size: int, not_ready: set[int] = frozenset(), budget: int | None = None
) -> ClusterView:
    """A synced view of LWS serve/llm with `replicas` groups of `size`; groups in `not_ready` have a
    worker (or, for size 1, the leader) that is not Ready."""
    annotations = {} if budget is None else {"guardhook.io/max-disrupted-groups": str(budget)}
    objects = [lws_object("llm", replicas, size, annotations)]
    for group in range(replicas):
        for worker in range(size):
            objects.append(
                pod_object("llm", group, worker, size, ready=not (group in not_ready and worker == size - 1))
            )
    return view_from_objects(objects)


def fleet_objects() -> list[dict]:
    """A deep copy of the sample fleet (serve/llm-xl: 4 groups of 4)."""
    return copy.deepcopy(embedded_fleet_objects())


def find(objects: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def engine(
    view: ClusterView, ledger: Ledger | None = None, params: dict[str, Any] | None = None, record: bool = True
) -> Engine:
    """An engine on `view` with a memory ledger (unless given) and group-eviction `params`."""
    raw = {"policies": {"group-eviction": params}} if params else {}
    return Engine(view, build_config(raw), ledger=MemoryLedger() if ledger is None else ledger, record=record)


def eviction(name: str, namespace: str = "serve", dry_run: bool = False, v1beta1: bool = False) -> dict:
    """The request of the captured eviction s07, aimed at pod `name`."""
    request = load_review("s07-eviction-worker.validating")["request"]
    request["name"] = name
    request["namespace"] = namespace
    request["object"]["metadata"].update(name=name, namespace=namespace)
    request["dryRun"] = dry_run
    if v1beta1:
        request["object"]["apiVersion"] = "policy/v1beta1"
        request["kind"]["version"] = request["requestKind"]["version"] = "v1beta1"
    return request


def judge(eng: Engine, request: dict) -> dict:
    return dict(eng.judge(request, "validate").response)


def run_together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls` on one thread each, released at once by a barrier; results in call order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def evict_all(engines: list[Engine], pods: list[str]) -> list[bool]:
    """Evict `pods` concurrently, the i-th through engines[i % len(engines)]; allowed flags."""
    calls = [
        lambda i=i, pod=pod: judge(engines[i % len(engines)], eviction(pod))["allowed"]
        for i, pod in enumerate(pods)
    ]
    return run_together(calls)


def group_of(pod: str) -> int:
    return int(pod.split("-")[1])
