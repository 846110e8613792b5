"""A tenant with the `edit` role cannot take a worker out of the guards (issue 48), on the real API
server with a real RoleBinding: removing a worker's `leaderworkerset.sigs.k8s.io/name` label (a pod
UPDATE) is denied by worker-delete, and so is the single-worker delete that removal used to let
through unseen. Requests are sent as the tenant's ServiceAccount (kubectl --as, impersonation the
admin kubeconfig may do) and as server-side dry runs: the fleet is never changed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cluster import LWS_NAME_LABEL, Cluster

TENANT = "e2e-tenant"


@pytest.fixture
def tenant(cluster: Cluster) -> Iterator[str]:
    """The tenant's identity: a ServiceAccount bound to the built-in `edit` ClusterRole in the
    fleet's namespace (made here, deleted after)."""
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TENANT}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": TENANT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": cluster.namespace}],
        },
    ]
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    cluster.must("apply", "-n", cluster.namespace, "-f", "-", stdin=listing)
    try:
        yield f"system:serviceaccount:{cluster.namespace}:{TENANT}"
    finally:
        cluster.kubectl("delete", "-n", cluster.namespace, "--ignore-not-found", "-f", "-", stdin=listing)


def test_the_tenant_may_edit_pods_at_all(cluster: Cluster, tenant: str) -> None:
    """Control: the RoleBinding works — the tenant may label the worker with a label of its own."""
    done = cluster.kubectl(
        "label", "pod", cluster.worker(0), "-n", cluster.namespace, "example.com/note=x",
        f"--as={tenant}", "--dry-run=server",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_removing_a_workers_lws_label_is_denied(cluster: Cluster, tenant: str) -> None:
    done = cluster.kubectl(
        "label", "pod", cluster.worker(0), "-n", cluster.namespace, f"{LWS_NAME_LABEL}-",
        f"--as={tenant}", "--dry-run=server",
    )  # fmt: skip
    assert done.returncode != 0 and "[worker-delete]" in done.stderr, done.stderr


def test_the_tenants_single_worker_delete_is_denied(cluster: Cluster, tenant: str) -> None:
    done = cluster.kubectl(
        "delete", "pod", cluster.worker(0), "-n", cluster.namespace, f"--as={tenant}", "--dry-run=server"
    )
    assert done.returncode != 0 and "[worker-delete]" in done.stderr, done.stderr
