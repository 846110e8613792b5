"""Load (issue #21, bounded, 127.0.0.1 only): the real `guardhook serve` (gunicorn, TLS, a live view
fed by the fake API server, the Lease ledger on it) gets parallel drains of several LWSs — every
pod's eviction at once, denied ones retried like `kubectl drain` does — while the test, playing
the API server, marks each allowed pod terminating (its watch event reaches the view while the
other evictions are in flight). At no point may more than B groups of an LWS be broken."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from eviction_helpers import eviction, lws_object, pod_object

from guardhook.cluster.view.static import embedded_fleet_objects

from conftest import Server, free_port
from fake_apiserver import FakeApiServer

LWSS = ("a", "b", "c")
GROUPS, SIZE, BUDGET = 3, 2, 1
ROUNDS = 6  # each denied eviction is sent again, up to this many rounds (kubectl drain retries 429)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer(max_page=50)
    nodes = [o for o in embedded_fleet_objects() if o["kind"] == "Node"]
    objects: list[dict[str, Any]] = copy.deepcopy(nodes)
    for name in LWSS:
        objects.append(lws_object(name, GROUPS, SIZE))
        for group in range(GROUPS):
            objects += [pod_object(name, group, worker, SIZE) for worker in range(SIZE)]
    server.load(objects)
    server.port = free_port()
    server.start()
    yield server
    server.stop()


def evict(server: Server, pod: str) -> bool:
    answer = server.post(
        "/validate",
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": eviction(pod)},
    )
    assert answer.status_code == 200, answer.text
    return bool(answer.json()["response"]["allowed"])


def test_parallel_drains_of_several_lwss_never_break_more_than_b_groups(
    fake: FakeApiServer, fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    server = fresh_server(
        "--kubeconfig", str(kubeconfig), "--namespace", "guardhook-system", "--threads", "8"
    )
    pods = [
        f"{lws}-{g}" if w == 0 else f"{lws}-{g}-{w}"
        for lws in LWSS
        for g in range(GROUPS)
        for w in range(SIZE)
    ]
    broken: dict[str, set[int]] = {lws: set() for lws in LWSS}
    left = list(pods)

    def one(pod: str) -> tuple[str, bool]:
        allowed = evict(server, pod)
        if allowed:  # the API server deletes it: the pod starts terminating, its watch event follows
            stored = fake.get("pods", "serve", pod)
            assert stored is not None
            stored["metadata"]["deletionTimestamp"] = "2026-12-01T12:00:00Z"
            fake.put("pods", stored)
        return pod, allowed

    with ThreadPoolExecutor(max_workers=len(pods)) as pool:
        for _ in range(ROUNDS):
            for pod, allowed in pool.map(one, left):
                if allowed:
                    lws, group = pod.split("-")[0], int(pod.split("-")[1])
                    broken[lws].add(group)
            assert all(len(groups) <= BUDGET for groups in broken.values()), broken
            left = [p for p in left if int(p.split("-")[1]) not in broken[p.split("-")[0]]]
            time.sleep(0.2)
    assert all(len(groups) == BUDGET for groups in broken.values()), broken  # each drain did progress
    leases = fake.objects["leases"]
    assert len(leases) == len(LWSS)  # one Lease ledger per LWS, written through the real server
    for lease in leases.values():
        # every allowed eviction is recorded, also a second one from a group already broken
        # (docs/policies.md, Ledger): the entries name B groups, not B pods
        entries = json.loads(lease["metadata"]["annotations"]["guardhook.io/disruptions"])
        assert len({entry["group"] for entry in entries}) == BUDGET, entries
