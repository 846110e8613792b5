"""A drain scene on a real cluster (issue 52): fake GPU nodes, the kubelet they lack, and a pod watch
that counts group restarts and broken groups. Used by e2e/test_drain_command.py and bench/drain.py.

- `FakeNodes` registers kubelet-less nodes (as ../shared/realcluster/fake-node.sh does for node-2):
  Ready, their Lease renewed every 5 s so the node lifecycle controller keeps them Ready, tainted
  `example.com/e2e-fake-node:NoSchedule` so only pods that tolerate it go there, with
  `nvidia.com/gpu` capacity a test sets and changes. A thread plays their kubelet: a pod bound to
  one is marked Running and Ready (Ready also waits for the pod's readiness gates, as the kubelet
  does), and a terminating one is deleted for good (grace 0, uid precondition) `stop_seconds` (1 s)
  after it is first seen terminating, about what a kubelet takes to stop a pod, as the node itself,
  `system:node:<name>` in `system:nodes` by impersonation, as the kubelet finishes a pod; the
  webhook's matchConditions skip nodes, as they skip the real kubelet.
- `GroupWatch` watches the pods of a namespace (a pod watch, event by event) and keeps, since its
  last `reset()`: per (LWS, group) the leader pods created (a group restart creates a new leader:
  lws pod_controller.go), per LWS the most groups broken at once (a group is broken with fewer than
  `size` pods that are Ready and not terminating, design.md §1).
- `lws_manifest` is an LWS of pause pods that each want one GPU and tolerate the fake nodes' taint,
  so they run on the fake nodes only.

Everything else is the real cluster's: the API server, guardhook's webhook, the scheduler, the
garbage collector, the LWS controller.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

FAKE_LABEL = "example.com/e2e-fake-node"
GPU = "nvidia.com/gpu"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
LEASE_SECONDS = 40
HEARTBEAT_SECONDS = 5.0
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
"""What the node lifecycle controller (and, on a new node, TaintNodesByCondition) puts on a node not
Ready; a cordon's node.kubernetes.io/unschedulable is not one of them."""


def now() -> str:
    """The time as the API writes it (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(response: Any) -> Any:
    return json.loads(response.data or b"null")


def lws_manifest(name: str, groups: int, size: int, image: str) -> dict[str, Any]:
    """LWS `name`: `groups` groups of `size` pause pods of one GPU each, tolerating the fake nodes'
    taint (so they go to the fake nodes: the real node has no GPU), RecreateGroupOnPodRestart."""
    spec = {
        "terminationGracePeriodSeconds": 1,
        "tolerations": [{"key": FAKE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {FAKE_LABEL: "true"},
        "containers": [
            {
                "name": "c",
                "image": image,
                "resources": {"requests": {"cpu": "10m", GPU: "1"}, "limits": {GPU: "1"}},
            }
        ],
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": groups,
            "leaderWorkerTemplate": {
                "size": size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {"metadata": {"labels": {"app": name}}, "spec": spec},
            },
        },
    }


def _absent_ok(call: Any) -> None:
    """Run a DELETE; a 404 (gone already) is what it wanted."""
    try:
        call()
    except ApiException as exc:
        if exc.status != 404:
            raise


def api_for(kubeconfig: Path, node: str | None = None) -> client.ApiClient:
    """An ApiClient for `kubeconfig`, acting as node `node` (impersonated) when given."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    if node is not None:
        api.set_default_header("Impersonate-User", f"system:node:{node}")
        api.set_default_header("Impersonate-Group", "system:nodes")
    return api


class FakeNodes(threading.Thread):
    """Kubelet-less nodes `names` and their kubelet (see the module's docstring), until `stop()`.
    `failure`: what stopped the thread, for the test to raise."""

    def __init__(
        self, kubeconfig: Path, names: Iterable[str], gpus: int = 0, stop_seconds: float = 1.0
    ) -> None:
        super().__init__(daemon=True)
        # At least a second: guardhook's ledger sees an evicted pod's replacement by a creation time
        # later than the eviction's record, and creationTimestamp has whole seconds.
        self.stop_seconds = stop_seconds
        self.stopping_since: dict[str, float] = {}
        self.names = list(names)
        self.core = client.CoreV1Api(api_for(kubeconfig))
        self.leases = client.CoordinationV1Api(self.core.api_client)
        self.as_node = {n: client.CoreV1Api(api_for(kubeconfig, n)) for n in self.names}
        self.gpus = dict.fromkeys(self.names, gpus)
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.finished: Counter[str] = Counter()  # pods deleted for good, per node
        self._beat = 0.0

    # ---- the nodes -----------------------------------------------------------------------------

    def register(self, cordoned: Iterable[str] = ()) -> None:
        """Create the nodes (`cordoned` ones unschedulable), Ready, with their leases; start the kubelet."""
        down = set(cordoned)
        for name in self.names:
            body: Any = {  # the client sends a dict as it is
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, FAKE_LABEL: "true"}},
                "spec": {
                    "unschedulable": name in down,
                    "taints": [{"key": FAKE_LABEL, "value": "true", "effect": "NoSchedule"}],
                },
            }
            self.core.create_node(body, _preload_content=False)
        self.heartbeat()
        self.start()
        self.wait_schedulable()

    def wait_schedulable(self, seconds: float = 120) -> None:
        """Until the node lifecycle controller has taken the `not-ready` taint off every node (the
        API server's TaintNodesByCondition puts it on a new node); RuntimeError after `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.failure is not None:
                raise self.failure
            taints = [
                t["key"]
                for name in self.names
                for t in (
                    _read(self.core.read_node(name, _preload_content=False))["spec"].get("taints") or []
                )
            ]
            if not any(key in NOT_READY_TAINTS for key in taints):
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"fake nodes {', '.join(self.names)} still tainted not-ready after {seconds:.0f} s"
        )

    def set_gpus(self, name: str, gpus: int) -> None:
        """Give node `name` `gpus` GPUs (capacity and allocatable), as a device plugin would."""
        self.gpus[name] = gpus
        self._status(name)

    def cordon(self, name: str, cordoned: bool) -> None:
        self.core.patch_node(
            name, {"spec": {"unschedulable": cordoned}}, _content_type=MERGE, _preload_content=False
        )

    def heartbeat(self) -> None:
        """Every node's Ready condition and Lease renewed, as a kubelet does."""
        for name in self.names:
            self._status(name)
            self._lease(name)
        self._beat = time.monotonic()

    def _status(self, name: str) -> None:
        resources = {"cpu": "16", "memory": "64Gi", "pods": "40", GPU: str(self.gpus[name])}
        condition = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "e2e fake node",
            "lastHeartbeatTime": now(),
        }
        body = {"status": {"conditions": [condition], "capacity": resources, "allocatable": resources}}
        self.core.patch_node_status(name, body, _content_type=STRATEGIC, _preload_content=False)

    def _lease(self, name: str) -> None:
        renew = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body: Any = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renew},
        }
        try:
            self.leases.patch_namespaced_lease(
                name, "kube-node-lease", body, _content_type=MERGE, _preload_content=False
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.leases.create_namespaced_lease("kube-node-lease", body, _preload_content=False)

    def remove(self) -> None:
        """Stop the kubelet, then delete the nodes and their leases."""
        self.stop()
        for name in self.names:
            _absent_ok(lambda name=name: self.core.delete_node(name, _preload_content=False))
            _absent_ok(
                lambda name=name: self.leases.delete_namespaced_lease(
                    name, "kube-node-lease", _preload_content=False
                )
            )

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=10)

    # ---- the kubelet ---------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                if time.monotonic() - self._beat > HEARTBEAT_SECONDS:
                    self.heartbeat()
                self.round()
                self.stopping.wait(0.25)
        except BaseException as exc:  # the test raises it: a dead kubelet must not pass silently
            self.failure = exc

    def pods(self, node: str | None = None) -> list[dict[str, Any]]:
        """The pods bound to the fake nodes now (to `node` only, when given)."""
        items = _read(self.core.list_pod_for_all_namespaces(_preload_content=False))["items"]
        mine = set(self.names) if node is None else {node}
        return [p for p in items if p["spec"].get("nodeName") in mine]

    def round(self) -> None:
        for pod in self.pods():
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                since = self.stopping_since.setdefault(meta["uid"], time.monotonic())
                if time.monotonic() - since >= self.stop_seconds:
                    self._finish(pod)
            else:
                self._run(pod)

    def _finish(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body: Any = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        try:
            self.as_node[pod["spec"]["nodeName"]].delete_namespaced_pod(
                meta["name"], meta["namespace"], body=body, _preload_content=False
            )
            self.finished[pod["spec"]["nodeName"]] += 1
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone already, or another pod under the name
                raise

    def _run(self, pod: dict[str, Any]) -> None:
        status = pod.get("status") or {}
        conditions = {c["type"]: c.get("status") for c in status.get("conditions") or []}
        gates = [g["conditionType"] for g in pod["spec"].get("readinessGates") or []]
        ready = "True" if all(conditions.get(g) == "True" for g in gates) else "False"
        if status.get("phase") == "Running" and conditions.get("Ready") == ready:
            return
        started = status.get("startTime") or now()
        body = {
            "metadata": {"uid": pod["metadata"]["uid"]},
            "status": {
                "phase": "Running",
                "startTime": started,
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": started},
                    {"type": "Ready", "status": ready, "lastTransitionTime": now()},
                ],
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": "",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": started}},
                    }
                    for c in pod["spec"]["containers"]
                ],
            },
        }
        try:
            self.core.patch_namespaced_pod_status(
                pod["metadata"]["name"],
                pod["metadata"]["namespace"],
                body,
                _content_type=STRATEGIC,
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status not in (404, 409, 422):  # gone or replaced meanwhile: the next round sees
                raise


@dataclass
class _Pod:
    lws: str
    group: str
    leader: bool
    ready: bool
    terminating: bool
    node: str


class GroupWatch(threading.Thread):
    """A pod watch on `namespace` (see the module's docstring). `sizes`: LWS name -> (groups,
    size). Read `restarts`, `most_broken`, `broken_now()` after `reset()`; `failure` as FakeNodes."""

    def __init__(self, kubeconfig: Path, namespace: str, sizes: dict[str, tuple[int, int]]) -> None:
        super().__init__(daemon=True)
        self.core = client.CoreV1Api(api_for(kubeconfig))
        self.namespace, self.sizes = namespace, sizes
        self.pods: dict[str, _Pod] = {}
        self.lock = threading.Lock()
        self.restarts: Counter[tuple[str, str]] = Counter()
        self.most_broken: Counter[str] = Counter()
        self.events = 0
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def reset(self) -> None:
        """Count from now: no restarts yet, the most broken = as broken as now."""
        with self.lock:
            self.restarts = Counter()
            self.most_broken = Counter(self._broken())

    def broken_now(self) -> dict[str, int]:
        with self.lock:
            return self._broken()

    def _broken(self) -> dict[str, int]:
        found = {}
        for lws, (groups, size) in self.sizes.items():
            ready = Counter(
                p.group for p in self.pods.values() if p.lws == lws and p.ready and not p.terminating
            )
            found[lws] = groups - sum(1 for count in ready.values() if count >= size)
        return found

    def run(self) -> None:
        version = ""
        try:
            while not self.stopping.is_set():
                stream = watch.Watch().stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=300,
                )
                try:
                    for event in stream:
                        version = self._event(event["type"], event["raw_object"]) or version
                        if self.stopping.is_set():
                            return
                except ApiException as exc:
                    if exc.status != 410:
                        raise
                    version = ""  # too old: list again (pods already known are no new restarts)
        except BaseException as exc:  # the test raises it
            self.failure = exc

    def _event(self, kind: str, obj: dict[str, Any]) -> str:
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return ""  # a BOOKMARK (never asked for) or an ERROR (the stream raises on 410)
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        with self.lock:
            self.events += 1
            if kind == "DELETED" or LWS_NAME not in labels:
                self.pods.pop(meta["uid"], None)
            else:
                conditions = {
                    c["type"]: c.get("status") for c in obj.get("status", {}).get("conditions") or []
                }
                leader = labels.get(WORKER_INDEX) == "0"
                if leader and meta["uid"] not in self.pods and kind == "ADDED":
                    self.restarts[(labels[LWS_NAME], labels.get(GROUP_INDEX, ""))] += 1
                self.pods[meta["uid"]] = _Pod(
                    labels[LWS_NAME],
                    labels.get(GROUP_INDEX, ""),
                    leader,
                    conditions.get("Ready") == "True",
                    bool(meta.get("deletionTimestamp")),
                    obj["spec"].get("nodeName") or "",
                )
            for lws, broken in self._broken().items():
                self.most_broken[lws] = max(self.most_broken[lws], broken)
        return str(meta.get("resourceVersion") or "")

    def stop(self) -> None:
        self.stopping.set()
