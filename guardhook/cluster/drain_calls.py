"""The API calls `guardhook drain` makes, through the `kubernetes` client: list the cluster, cordon
a node, evict a pod (the Eviction API, as `kubectl drain` does) and delete a group's restart pod
with foreground cascade (as the LWS controller restarts a group: pod_controller.go
handleRestartPolicy deletes the leader with `propagationPolicy: Foreground`, so the worker
StatefulSet it owns and that set's pods go first, then the leader StatefulSet makes a new leader).

Every call goes through the API server's admission like anyone else's, so guardhook's webhook
judges each one: the group budget and the ledger stay the one authority. A refusal is an Answer,
never an exception; only an unreachable API server or a failed listing raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from guardhook.cluster.kube import api_error
from guardhook.cluster.listing import list_cluster
from guardhook.wire import KubeObject

DRY_RUN_ALL = "All"
"""The only value of the API's `dryRun` parameter: every stage runs, nothing is stored."""


@dataclass(frozen=True)
class Answer:
    """The API server's answer to one write: its HTTP status and, for a failure, its message."""

    code: int
    message: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    @property
    def gone(self) -> bool:
        """404: the pod is gone already, which is what the write wanted."""
        return self.code == 404


class KubeDrainCalls:
    """The drain's calls against a live API server (an ApiClient built by
    guardhook.cluster.kube.api_client)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.notes: list[str] = []

    def objects(self) -> Sequence[KubeObject]:
        """Every object a drain plan reads, listed now (guardhook.cluster.listing). Raises
        ApiException or urllib3/OSError when the API server cannot be listed."""
        listed = list_cluster(self.api)
        self.notes = listed.notes
        return listed.objects

    def cordon(self, node: str, dry_run: bool) -> Answer:
        """Mark `node` unschedulable, as `kubectl cordon` does (spec.unschedulable true), as a
        JSONPatch: the client sends a patch body as application/json-patch+json."""
        patch = [{"op": "add", "path": "/spec/unschedulable", "value": True}]
        return _answer(
            lambda: self.core.patch_node(
                node, patch, **_dry(dry_run), _request_timeout=30, _preload_content=False
            )
        )

    def evict(self, namespace: str, name: str, grace_seconds: int | None, dry_run: bool) -> Answer:
        """POST an Eviction for the pod; 429 when a PDB or guardhook's group budget refuses it now."""
        options = client.V1DeleteOptions(
            grace_period_seconds=grace_seconds, dry_run=[DRY_RUN_ALL] if dry_run else None
        )
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=options,
        )
        return _answer(
            lambda: self.core.create_namespaced_pod_eviction(
                name, namespace, body, **_dry(dry_run), _request_timeout=30, _preload_content=False
            )
        )

    def delete_foreground(
        self, namespace: str, name: str, grace_seconds: int | None, dry_run: bool
    ) -> Answer:
        """DELETE the pod with `propagationPolicy: Foreground` (its dependents go first)."""
        options = client.V1DeleteOptions(
            propagation_policy="Foreground",
            grace_period_seconds=grace_seconds,
            dry_run=[DRY_RUN_ALL] if dry_run else None,
        )
        return _answer(
            lambda: self.core.delete_namespaced_pod(
                name, namespace, body=options, **_dry(dry_run), _request_timeout=30, _preload_content=False
            )
        )


def _dry(dry_run: bool) -> dict[str, Any]:
    """The `dryRun=All` query parameter for a server-side dry run (none otherwise)."""
    return {"dry_run": DRY_RUN_ALL} if dry_run else {}


def _answer(call: Callable[[], Any]) -> Answer:
    """Run a write; an HTTP failure becomes its Answer (the API server's Status message). The
    answer's body is read but not decoded (`_preload_content=False`): a DELETE may answer the pod
    or a Status, and only the status code matters here."""
    try:
        response = call()
    except ApiException as exc:
        return Answer(int(exc.status or 0), api_error(exc))
    response.read()
    return Answer(int(getattr(response, "status", 200)))
