"""`guardhook drain` against a real kube-apiserver + etcd (KUBEBUILDER_ASSETS; skipped with the
reason when they are absent, required in CI by GUARDHOOK_REQUIRE_API_SERVER=1).

A bare API server runs no controllers, so a thread plays them through the API as the real ones
would: the garbage collector deletes the workers of a leader deleted with foreground cascade
(its worker StatefulSet's pods) before the leader, the kubelet finishes a terminating pod (its
foregroundDeletion finalizer dropped, then deleted for good), the LWS controller and its
StatefulSets recreate a group whose leader is gone (leader first, then the workers), the
scheduler binds each new pod to a schedulable node with room for its GPUs, and the kubelet marks
it Ready one round later. The thread also watches every round how many groups of each LWS are
broken.

The drain runs as the command (`python -m guardhook drain`), is killed mid-wave and run again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drain_standin import pod_gpus, pod_ready
from test_drain import NODE, two_lws

from guardhook.cluster.lws import GROUP_INDEX_LABEL, NAME_LABEL, WORKER_INDEX_LABEL
from guardhook.wire import KubeObject

from envtest import ApiServer, api_server, requires_api_server

pytestmark = [pytest.mark.envtest, requires_api_server]

PODS = "/api/v1/namespaces/serve/pods"
LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets"
GPU = "nvidia.com/gpu"


def _strip(obj: KubeObject) -> dict[str, Any]:
    """`obj` as a client creates it: no uid, version, timestamps or status."""
    meta = obj["metadata"]
    kept = {
        k: meta[k] for k in ("name", "namespace", "labels", "annotations", "ownerReferences") if k in meta
    }
    body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": kept}
    if "spec" in obj:
        body["spec"] = obj["spec"]
    return body


class Controllers(threading.Thread):
    """The controllers, scheduler and kubelet of a real cluster, played through the API (see the
    module's docstring). `restarts`: per (LWS, group), how many times its leader was seen deleted
    with foreground cascade; `most_broken`: per LWS, the most groups seen broken at once."""

    def __init__(self, api: ApiServer, objects: list[KubeObject]) -> None:
        super().__init__(daemon=True)
        self.api = api
        self.templates = {
            _slot(o): _strip(o)
            for o in objects
            if o["kind"] == "Pod" and NAME_LABEL in o["metadata"]["labels"]
        }
        self.sizes = {
            o["metadata"]["name"]: (
                int(o["spec"]["leaderWorkerTemplate"]["size"]),
                int(o["spec"]["replicas"]),
            )
            for o in objects
            if o["kind"] == "LeaderWorkerSet"
        }
        self.restarts: Counter[tuple[str, str]] = Counter()
        self.most_broken: Counter[str] = Counter()
        self.seen_deleting: set[str] = set()
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.round()
                time.sleep(0.05)
        except BaseException as exc:  # the test reads it: a dead thread must not pass silently
            self.failure = exc

    def round(self) -> None:
        pods = self._pods()
        self._observe(pods)
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                self._finish(pod)
            elif not pod_ready(pod):
                self._ready(pod)
        self._recreate(self._pods())

    def _pods(self) -> list[KubeObject]:
        return list(self.api.get(PODS)["items"])

    def _finish(self, pod: KubeObject) -> None:
        meta = pod["metadata"]
        leader = meta["labels"].get(WORKER_INDEX_LABEL) == "0"
        foreground = "foregroundDeletion" in (meta.get("finalizers") or [])
        if leader and foreground and meta["uid"] not in self.seen_deleting:
            self.seen_deleting.add(meta["uid"])
            group = (meta["labels"][NAME_LABEL], meta["labels"][GROUP_INDEX_LABEL])
            self.restarts[group] += 1
            # the garbage collector: the worker StatefulSet the leader owns, and its pods, go first
            for worker in self._pods():
                labels = worker["metadata"]["labels"]
                mine = (labels.get(NAME_LABEL), labels.get(GROUP_INDEX_LABEL)) == group
                if mine and labels.get(WORKER_INDEX_LABEL) != "0":
                    self.api.request("DELETE", f"{PODS}/{worker['metadata']['name']}?gracePeriodSeconds=0")
        if meta.get("finalizers"):
            _merge(self.api, f"{PODS}/{meta['name']}", {"metadata": {"finalizers": None}})
        self.api.request("DELETE", f"{PODS}/{meta['name']}?gracePeriodSeconds=0")

    def _ready(self, pod: KubeObject) -> None:
        conditions = [
            {"type": t, "status": "True"} for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        path = f"{PODS}/{pod['metadata']['name']}/status"
        _merge(self.api, path, {"status": {"phase": "Running", "conditions": conditions}})

    def _recreate(self, pods: list[KubeObject]) -> None:
        present = {_slot(p): p for p in pods if NAME_LABEL in p["metadata"].get("labels", {})}
        for slot, template in sorted(self.templates.items()):
            if slot in present:
                continue
            namespace, lws, group, worker = slot
            members = [p for s, p in present.items() if s[1:3] == (lws, group)]
            if any(p["metadata"].get("deletionTimestamp") for p in members):
                continue  # the foreground delete is still under way
            if worker != "0" and not any(s[3] == "0" for s in present if s[1:3] == (lws, group)):
                continue  # the leader pod makes the worker StatefulSet
            node = self._schedule(pods, template)
            if node is None:
                continue
            body = json.loads(json.dumps(template))
            body["spec"]["nodeName"] = node
            answer = self.api.request("POST", PODS, body)
            if answer.status_code == 201:
                made = answer.json()
                present[slot] = made
                pods.append(made)

    def _schedule(self, pods: list[KubeObject], pod: KubeObject) -> str | None:
        want = pod_gpus(pod)
        for node in sorted(self.api.get("/api/v1/nodes")["items"], key=lambda n: n["metadata"]["name"]):
            if node["spec"].get("unschedulable"):
                continue
            name = node["metadata"]["name"]
            used = sum(pod_gpus(p) for p in pods if p["spec"].get("nodeName") == name)
            if int(node["status"]["allocatable"].get(GPU, 0)) - used >= want:
                return name
        return None

    def _observe(self, pods: list[KubeObject]) -> None:
        for lws, (size, replicas) in self.sizes.items():
            groups: dict[str, list[KubeObject]] = {}
            for pod in pods:
                labels = pod["metadata"].get("labels", {})
                if labels.get(NAME_LABEL) == lws:
                    groups.setdefault(labels[GROUP_INDEX_LABEL], []).append(pod)
            broken = replicas - len(groups)
            broken += sum(
                not (
                    len(members) == size
                    and all(pod_ready(p) and not p["metadata"].get("deletionTimestamp") for p in members)
                )
                for members in groups.values()
            )
            self.most_broken[lws] = max(self.most_broken[lws], broken)


def _merge(api: ApiServer, path: str, body: dict[str, Any]) -> int:
    """A JSON merge patch; its status (404 or 409: the pod went or changed meanwhile, next round)."""
    headers = {"Content-Type": "application/merge-patch+json"}
    answer = api.session.patch(api.url + path, data=json.dumps(body), headers=headers, timeout=30)
    assert answer.status_code in (200, 404, 409), answer.text
    return answer.status_code


def _slot(pod: KubeObject) -> tuple[str, str, str, str]:
    labels = pod["metadata"]["labels"]
    return (
        pod["metadata"]["namespace"],
        labels[NAME_LABEL],
        labels[GROUP_INDEX_LABEL],
        labels[WORKER_INDEX_LABEL],
    )


def _create(api: ApiServer, objects: list[KubeObject]) -> None:
    """The two-LWS state (test_drain.two_lws) made object by object, statuses through /status."""
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serve"}})
    for node in (o for o in objects if o["kind"] == "Node"):
        name = node["metadata"]["name"]
        api.create("/api/v1/nodes", _strip(node))
        api.merge_patch(f"/api/v1/nodes/{name}/status", {"status": node["status"]})
        # TaintNodesAtCreation added node.kubernetes.io/not-ready; no node controller lifts it here
        api.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    for lws in (o for o in objects if o["kind"] == "LeaderWorkerSet"):
        api.create(LWS_PATH, _strip(lws))
    for pod in (o for o in objects if o["kind"] == "Pod"):
        api.create(PODS, _strip(pod))
        api.merge_patch(f"{PODS}/{pod['metadata']['name']}/status", {"status": pod["status"]})


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ApiServer, Controllers]]:
    objects = two_lws()
    with api_server(tmp_path / "envtest") as api:
        _create(api, objects)
        controllers = Controllers(api, objects)
        controllers.start()
        try:
            yield api, controllers
        finally:
            controllers.stopping.set()
            controllers.join(10)


def _drain(api: ApiServer, stderr: Path, *extra: str) -> subprocess.Popen[str]:
    """`python -m guardhook drain` on the API server; its stderr to a file (never a pipe nobody
    reads, which would block it once full)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    kubeconfig = str(api.kubeconfig)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "guardhook",
            "drain",
            "--kubeconfig",
            kubeconfig,
            "--poll-interval",
            "0.2",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=stderr.open("w"),
        text=True,
        env=env,
    )


def test_a_drain_killed_mid_wave_resumes_restarting_each_group_once_within_the_budget(
    cluster: tuple[ApiServer, Controllers], tmp_path: Path
) -> None:
    api, controllers = cluster
    first = _drain(api, tmp_path / "first.err", "-o", "json", "--timeout", "60s", NODE)
    assert first.stdout is not None
    taken = 0
    for line in first.stdout:
        event = json.loads(line)
        taken += event["event"] == "group" and event["action"] == "restart"
        if taken == 2:  # the second group's restart is under way: kill it there
            first.kill()
            break
    first.wait(30)
    assert taken == 2, (tmp_path / "first.err").read_text()
    second = _drain(api, tmp_path / "second.err", "--timeout", "60s", NODE)
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 0, out + (tmp_path / "second.err").read_text()
    assert controllers.failure is None, controllers.failure
    assert controllers.restarts == {
        ("llm-b", "0"): 1,
        ("llm-b", "1"): 1,
        ("llm-xl", "0"): 1,
        ("llm-xl", "1"): 1,
    }
    assert controllers.most_broken == {"llm-xl": 1, "llm-b": 1}
    node = api.get(f"/api/v1/nodes/{NODE}")
    assert node["spec"]["unschedulable"] is True
    on_node = [p["metadata"]["name"] for p in api.get(PODS)["items"] if p["spec"].get("nodeName") == NODE]
    assert on_node == []
    assert "drained: " in out
