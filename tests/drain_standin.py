"""A stand-in cluster for `guardhook drain` (guardhook.planning.drain_run.DrainCalls): it answers
the drain's calls as the API server would and, each time the drain lists the cluster, moves the
world one step as the controllers would:

- the garbage collector and the kubelet remove a terminating pod (one step after its delete);
- the LWS controller recreates a group whose leader is gone (a leader deleted with foreground
  cascade takes its workers first: lws pod_controller.go), the scheduler binds the new pods to a
  schedulable node with room for their GPUs, the worker StatefulSet makes the workers once the
  leader stands (startupPolicy LeaderCreated);
- a workload controller recreates an evicted pod in no group (ReplicaSet pods) on another node;
- the kubelet marks a pod Ready one step after it is bound.

Built from the sample fleet's objects (the shapes of tests/fixtures), so every record is read by
the same group model as in production. It records what a test asserts: the group restarts (a
leader delete per group), the evictions, and the most groups of each LWS ever seen broken at once
(and of every LWS together), observed after every step and every write. `interrupt_after` raises
KeyboardInterrupt right after that many writes (a Ctrl-C mid-wave); `refuse_once` answers the
first eviction of those pods 429.

`DrainFake` is the fake API server that also serves the drain's writes (evictions, deletes with
DeleteOptions, server-side dry runs), for the real client (guardhook.cluster.drain_calls).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

from guardhook.cluster.drain_calls import Answer
from guardhook.cluster.lws import GROUP_INDEX_LABEL, NAME_LABEL, WORKER_INDEX_LABEL
from guardhook.wire import KubeObject

from fake_apiserver import FakeApiServer, _Handler, _QuietServer, status

GPU = "nvidia.com/gpu"
DELETED = "2026-12-01T00:00:00Z"
MAX_STEPS = 2000


class StandIn:
    """The stand-in cluster (see the module's docstring)."""

    def __init__(self, objects: Iterable[KubeObject]) -> None:
        self.store = [copy.deepcopy(o) for o in objects]
        self.templates = {self._slot(p): copy.deepcopy(p) for p in self._pods() if self._slot(p)}
        self.loose_templates: dict[str, KubeObject] = {}
        self.restarts: Counter[tuple[str, str]] = Counter()
        self.evictions: list[str] = []
        self.eviction_steps: list[int] = []  # the step of the world each eviction came in
        self.cordoned: list[str] = []
        self.dry_runs: list[str] = []
        self.most_broken: Counter[str] = Counter()
        self.most_broken_at_once = 0  # the most groups broken at once, all LWSs together
        self.writes = 0
        self.steps = 0
        self.interrupt_after: int | None = None
        self.refuse_once: set[str] = set()
        self.pending: list[KubeObject] = []  # made this step, bound and Ready in later ones
        self._observe()

    # ---- DrainCalls --------------------------------------------------------------------------------

    def objects(self) -> list[KubeObject]:
        """The cluster as listed now, after one step of the world."""
        self._step()
        return copy.deepcopy(self.store)

    def cordon(self, node: str, dry_run: bool) -> Answer:
        if dry_run:
            self.dry_runs.append(f"cordon {node}")
            return Answer(200)
        self._node(node).setdefault("spec", {})["unschedulable"] = True
        self.cordoned.append(node)
        return self._wrote()

    def evict(self, namespace: str, name: str, grace_seconds: int | None, dry_run: bool) -> Answer:
        pod = self._pod(namespace, name)
        if pod is None:
            return Answer(404, "not found")
        if name in self.refuse_once:
            self.refuse_once.discard(name)
            return Answer(429, "Cannot evict pod as it would violate the pod's disruption budget.")
        if dry_run:
            self.dry_runs.append(f"evict {name}")
            return Answer(201)
        self.evictions.append(name)
        self.eviction_steps.append(self.steps)
        if not self._slot(pod) and any(
            o.get("controller") for o in pod["metadata"].get("ownerReferences", [])
        ):
            self.loose_templates[name] = copy.deepcopy(pod)  # its ReplicaSet makes another
        self._terminate(pod)
        return self._wrote()

    def delete_foreground(
        self, namespace: str, name: str, grace_seconds: int | None, dry_run: bool
    ) -> Answer:
        pod = self._pod(namespace, name)
        if pod is None:
            return Answer(404, "not found")
        if dry_run:
            self.dry_runs.append(f"delete {name}")
            return Answer(200)
        labels = pod["metadata"]["labels"]
        lws, group = labels[NAME_LABEL], labels[GROUP_INDEX_LABEL]
        self.restarts[(lws, group)] += 1
        for member in self._group_pods(namespace, lws, group):  # foreground: the workers go too
            self._terminate(member)
        return self._wrote()

    # ---- the world ---------------------------------------------------------------------------------

    def _wrote(self) -> Answer:
        self.writes += 1
        self._observe()
        if self.interrupt_after is not None and self.writes >= self.interrupt_after:
            self.interrupt_after = None
            raise KeyboardInterrupt
        return Answer(200)

    def _step(self) -> None:
        self.steps += 1
        assert self.steps < MAX_STEPS, "the drain never finished"
        for pod in self._pods():
            if pod["metadata"].get("deletionTimestamp"):
                self.store.remove(pod)
            elif not pod_ready(pod) and pod["spec"].get("nodeName"):
                _set_ready(pod, True)  # the kubelet: Ready one step after it was bound
        self._recreate_groups()
        self._recreate_loose()
        self._observe()

    def _recreate_groups(self) -> None:
        for (namespace, lws, group, worker), template in sorted(self.templates.items()):
            members = self._group_pods(namespace, lws, group)
            if any(p["metadata"].get("deletionTimestamp") for p in members):
                continue  # a foreground delete still under way
            leader = [p for p in members if p["metadata"]["labels"][WORKER_INDEX_LABEL] == "0"]
            if worker != "0" and not leader:
                continue  # the worker StatefulSet is made by the leader pod
            if any(p["metadata"]["labels"][WORKER_INDEX_LABEL] == worker for p in members):
                continue
            self._bind(copy.deepcopy(template))

    def _recreate_loose(self) -> None:
        for name, template in list(self.loose_templates.items()):
            if self._pod(template["metadata"]["namespace"], name) is None:
                fresh = copy.deepcopy(template)
                fresh["metadata"]["name"] = name + "-new"
                self._bind(fresh)
                del self.loose_templates[name]

    def _bind(self, pod: KubeObject) -> None:
        """The scheduler: a schedulable node with room for the pod's GPUs, else Pending."""
        meta = pod["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta.pop("deletionTimestamp", None)
        _set_ready(pod, False)
        want = pod_gpus(pod)
        pod["spec"]["nodeName"] = ""
        for node in self._nodes():
            if node.get("spec", {}).get("unschedulable"):
                continue
            name = node["metadata"]["name"]
            free = int(node["status"]["allocatable"].get(GPU, 0)) - sum(
                pod_gpus(p) for p in self._pods() if p["spec"].get("nodeName") == name
            )
            if free >= want:
                pod["spec"]["nodeName"] = name
                break
        if pod["spec"]["nodeName"]:
            self.store.append(pod)

    def _observe(self) -> None:
        """The most groups of each LWS broken at once: a group is broken with fewer pods than its
        size, or one not Ready or terminating (design.md §1); groups with no pod at all count too.
        Also the most broken at once across every LWS."""
        at_once = 0
        for lws in (o for o in self.store if o["kind"] == "LeaderWorkerSet"):
            namespace, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
            size = int(lws["spec"]["leaderWorkerTemplate"]["size"])
            keys = {
                p["metadata"]["labels"][GROUP_INDEX_LABEL]
                for p in self._pods()
                if p["metadata"]["namespace"] == namespace
                and p["metadata"].get("labels", {}).get(NAME_LABEL) == name
            }
            broken = max(0, int(lws["spec"]["replicas"]) - len(keys))
            for key in keys:
                pods = self._group_pods(namespace, name, key)
                whole = len(pods) == size and all(
                    pod_ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods
                )
                broken += not whole
            self.most_broken[name] = max(self.most_broken[name], broken)
            at_once += broken
        self.most_broken_at_once = max(self.most_broken_at_once, at_once)

    # ---- reading -------------------------------------------------------------------------------------

    def _terminate(self, pod: KubeObject) -> None:
        pod["metadata"]["deletionTimestamp"] = DELETED

    def _pods(self) -> list[KubeObject]:
        return [o for o in self.store if o["kind"] == "Pod"]

    def _nodes(self) -> list[KubeObject]:
        return sorted((o for o in self.store if o["kind"] == "Node"), key=lambda n: n["metadata"]["name"])

    def _node(self, name: str) -> KubeObject:
        return next(n for n in self._nodes() if n["metadata"]["name"] == name)

    def _pod(self, namespace: str, name: str) -> KubeObject | None:
        return next(
            (
                p
                for p in self._pods()
                if (p["metadata"]["namespace"], p["metadata"]["name"]) == (namespace, name)
            ),
            None,
        )

    def _group_pods(self, namespace: str, lws: str, group: str) -> list[KubeObject]:
        return [
            p
            for p in self._pods()
            if p["metadata"]["namespace"] == namespace
            and p["metadata"].get("labels", {}).get(NAME_LABEL) == lws
            and p["metadata"]["labels"].get(GROUP_INDEX_LABEL) == group
        ]

    def pods_on(self, node: str) -> list[str]:
        """The names of the pods bound to `node` now."""
        return sorted(p["metadata"]["name"] for p in self._pods() if p["spec"].get("nodeName") == node)

    @staticmethod
    def _slot(pod: KubeObject) -> tuple[str, str, str, str] | None:
        labels = pod["metadata"].get("labels") or {}
        if NAME_LABEL not in labels:
            return None
        return (
            pod["metadata"]["namespace"],
            labels[NAME_LABEL],
            labels[GROUP_INDEX_LABEL],
            labels[WORKER_INDEX_LABEL],
        )


def pod_gpus(pod: KubeObject) -> int:
    """The GPUs `pod`'s containers request."""
    return sum(int(c.get("resources", {}).get("requests", {}).get(GPU, 0)) for c in pod["spec"]["containers"])


def pod_ready(pod: KubeObject) -> bool:
    """Whether `pod`'s Ready condition is True."""
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])
    )


def _set_ready(pod: KubeObject, ready: bool) -> None:
    status = pod.setdefault("status", {})
    status["phase"] = "Running"
    conditions = [c for c in status.get("conditions", []) if c["type"] not in ("Ready", "ContainersReady")]
    value = "True" if ready else "False"
    conditions += [{"type": "Ready", "status": value}, {"type": "ContainersReady", "status": value}]
    status["conditions"] = conditions
    for container in status.get("containerStatuses", []):
        container["ready"] = ready


def lws_copy(objects: list[KubeObject], source: str, name: str) -> list[KubeObject]:
    """A second LWS `name`: every object of LWS `source` (the LWS, its StatefulSets and pods)
    copied with the name changed throughout and new uids, as the LWS controller would make it."""
    made = []
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        mine = obj["metadata"]["name"] == source or labels.get(NAME_LABEL) == source
        if not mine or obj["kind"] not in ("LeaderWorkerSet", "StatefulSet", "Pod"):
            continue
        text = _rename(copy.deepcopy(obj), source, name)
        text["metadata"]["uid"] = str(uuid.uuid4())
        made.append(text)
    return made


def _rename(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_rename(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, old, new) for k, v in value.items()}
    return value


class DrainFake(FakeApiServer):
    """The fake API server (tests/fake_apiserver.py) also serving what a drain sends, as the API
    server does: POST of a pod's `eviction` subresource (201 and the pod deleted; 429 for the pods
    in `refuse`), DELETE of a pod with DeleteOptions in its body, and `dryRun=All` on those and on
    a node PATCH (judged, answered, nothing stored). `sent` records (method, path, body)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.refuse: set[str] = set()
        self.sent: list[tuple[str, str, dict[str, Any] | list[Any]]] = []

    def start(self) -> DrainFake:
        handler = type("Handler", (_DrainHandler,), {"fake": self})
        httpd = _QuietServer(("127.0.0.1", self.port), handler)
        httpd.daemon_threads = True
        self.port = httpd.server_address[1]
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self


EVICTION = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")


class _DrainHandler(_Handler):
    fake: DrainFake

    def _take_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_POST(self) -> None:
        url = urlparse(self.path)
        match = EVICTION.match(url.path)
        if not match:
            return super().do_POST()
        body = self._take_body()
        self.fake.sent.append(("POST", self.path, body))
        namespace, name = match.groups()
        if self.fake.get("pods", namespace, name) is None:
            return self._json(404, status(404, "NotFound", f'pods "{name}" not found'))
        if name in self.fake.refuse:
            return self._json(
                429,
                status(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                ),
            )
        dry = "dryRun=All" in url.query or (body.get("deleteOptions") or {}).get("dryRun")
        if not dry:
            self.fake.delete("pods", namespace, name)
        return self._json(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}})

    def do_DELETE(self) -> None:
        body = self._take_body()
        self.fake.sent.append(("DELETE", self.path, body))
        if "dryRun=All" in urlparse(self.path).query:
            return self._json(
                200, {"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}
            )
        return super().do_DELETE()

    def do_PATCH(self) -> None:
        url = urlparse(self.path)
        if "dryRun=All" not in url.query:
            return super().do_PATCH()
        self.fake.sent.append(("PATCH", self.path, self._take_body()))
        return self._json(200, {})
