"""A stand-in for LWS main's Hash group identity (lws KEP-898, PRs #987/#1050), enough for drain
scenarios on the real cluster; not a product. The installed LWS controller (v0.9) does not know
Hash mode, so the e2e code plays its part, as ../shared/realcluster/lws/lws_standin.py does for
Ordinal mode:

- the leader Deployment `<lws>` (replicas = groups; template = leader pods labelled with the LWS
  name and worker-index "0", owned by the LWS) — the Deployment controller's ReplicaSet creates
  the leaders with generated names;
- each leader without a group key gets one: a random 40-character key in group-index and
  group-key (the LWS pod webhook sets them at admission; the stand-in labels the pod after it is
  created, the one difference);
- each keyed leader gets its worker StatefulSet, named after the leader pod as LWS names it (lws
  pod_controller.go; KEP-898), owned by the leader pod, replicas size-1, ordinals from 1, pods
  labelled with the LWS name and the key; each worker is labelled with its worker-index (its
  `apps.kubernetes.io/pod-index`).
Not done: the group-ready readiness gate, the group-replacement scheduling gate, restartPolicy.
"""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any

from cluster import LWS_NAME_LABEL, Cluster

GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def hash_lws(name: str, groups: int, size: int, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A LeaderWorkerSet with `groupIdentity: Hash` (the CRD must carry the field)."""
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": groups,
            "groupIdentity": "Hash",
            "leaderWorkerTemplate": {"size": size, "workerTemplate": template},
        },
    }


class HashStandin:
    """Plays LWS main's Hash mode for LWS `name` in `cluster.namespace` until `stop()`."""

    def __init__(self, cluster: Cluster, name: str, size: int, pod_spec: dict[str, Any]) -> None:
        self.cluster, self.name, self.size, self.pod_spec = cluster, name, size, pod_spec
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, groups: int) -> None:
        uid = self.cluster.must(
            "get", "lws", self.name, "-n", self.cluster.namespace, "-o", "jsonpath={.metadata.uid}"
        )
        owner = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": self.name,
            "uid": uid,
        }
        labels = {LWS_NAME_LABEL: self.name, WORKER_INDEX: "0"}
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": self.name,
                "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {
                "replicas": groups,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": self.pod_spec},
            },
        }
        self.cluster.must("apply", "-n", self.cluster.namespace, "-f", "-", stdin=json.dumps(deployment))
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _pods(self) -> list[dict[str, Any]]:
        out = self.cluster.must(
            "get", "pods", "-n", self.cluster.namespace, "-l", f"{LWS_NAME_LABEL}={self.name}", "-o", "json"
        )
        return list(json.loads(out)["items"])

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self._round()
            except Exception:  # noqa: BLE001 - a stand-in round retries on the next tick
                continue

    def _round(self) -> None:
        ns = self.cluster.namespace
        for pod in self._pods():
            meta = pod["metadata"]
            labels = meta.get("labels", {})
            if meta.get("deletionTimestamp"):
                continue
            if labels.get(WORKER_INDEX) == "0" and GROUP_KEY not in labels:
                key = secrets.token_hex(20)  # 40 characters
                self.cluster.must(
                    "label", "pod", meta["name"], "-n", ns, f"{GROUP_INDEX}={key}", f"{GROUP_KEY}={key}"
                )
                self._workers(meta["name"], meta["uid"], key)
            elif WORKER_INDEX not in labels and "apps.kubernetes.io/pod-index" in labels:
                index = labels["apps.kubernetes.io/pod-index"]
                self.cluster.must("label", "pod", meta["name"], "-n", ns, f"{WORKER_INDEX}={index}")

    def _workers(self, leader: str, uid: str, key: str) -> None:
        if self.size < 2:
            return
        labels = {LWS_NAME_LABEL: self.name, GROUP_INDEX: key, GROUP_KEY: key}
        sts = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": leader,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": leader,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "replicas": self.size - 1,
                "ordinals": {"start": 1},
                "podManagementPolicy": "Parallel",
                "serviceName": self.name,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": self.pod_spec},
            },
        }
        self.cluster.must("apply", "-n", self.cluster.namespace, "-f", "-", stdin=json.dumps(sts))
