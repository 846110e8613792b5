"""The admission-policy floor on a real API server (issue 40): guardhook installed from its image
and manifests plus the floor (`guardhook export admission-policies`), then scaled to 0. While it is
down the floor denies a worker delete and an LWS-wide PDB, and lets a leader delete and the LWS
controller's and garbage collector's deletes through; with guardhook back the answers are the
webhook's again. Needs `GUARDHOOK_E2E_KUBECONFIG` (a cluster with guardhook's Deployment, Kubernetes
1.30+ for admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies); skips otherwise. Deletes are
server-side dry runs (admission judges them as real ones), so the fleet is never broken."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from cluster import LWS_NAME_LABEL, REPO, Cluster, eventually, webhooks_answering

NAMESPACE = "guardhook-system"
DEPLOYMENT = "guardhook"
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
FLOOR = "guardhook-floor-"


def exported_floor() -> str:
    """`guardhook export admission-policies` for the default configuration, as YAML."""
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", "export", "admission-policies"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=True,
    )
    return done.stdout


def replicas(cluster: Cluster) -> int:
    out = cluster.must("get", "deployment", DEPLOYMENT, "-n", NAMESPACE, "-o", "jsonpath={.spec.replicas}")
    return int(out or "1")


def floor_denied(done: Any, policy: str) -> bool:
    """Whether the request was refused by the floor's policy for `policy` (not by guardhook)."""
    return done.returncode != 0 and f"ValidatingAdmissionPolicy '{FLOOR}{policy}'" in done.stderr


def delete_dry_run(cluster: Cluster, pod: str, *as_user: str) -> Any:
    return cluster.kubectl("delete", "pod", pod, "-n", cluster.namespace, "--dry-run=server", *as_user)


def pdb(cluster: Cluster, name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {LWS_NAME_LABEL: cluster.lws, **labels}}},
    }


def floor_answering(cluster: Cluster) -> bool:
    return floor_denied(delete_dry_run(cluster, cluster.worker(0)), "worker-delete")


@pytest.fixture(scope="module")
def guardhook_down(cluster: Cluster) -> Iterator[Cluster]:
    """The floor installed and guardhook scaled to 0; afterwards guardhook back and the floor gone."""
    if cluster.mode != "cluster":
        pytest.skip("needs guardhook installed in the cluster (GUARDHOOK_E2E_KUBECONFIG), not bare mode")
    served = cluster.kubectl("api-resources", "--api-group=admissionregistration.k8s.io", "-o", "name")
    if "validatingadmissionpolicies" not in served.stdout:
        pytest.skip("the API server serves no ValidatingAdmissionPolicies (Kubernetes 1.30+)")
    floor = exported_floor()
    cluster.must("apply", "-f", "-", stdin=floor)
    before = replicas(cluster)
    try:
        cluster.must("scale", "deployment", DEPLOYMENT, "-n", NAMESPACE, "--replicas=0")
        cluster.must(
            "wait", "--for=delete", "pod", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=guardhook",
            "--timeout=120s",
        )  # fmt: skip
        eventually(lambda: floor_answering(cluster), 120, "the floor to deny a worker delete")
        yield cluster
    finally:
        # The floor goes first: with it installed a worker delete is refused by the floor before
        # the webhook is called, and webhooks_answering looks for the webhook's answer.
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=floor)
        cluster.must("scale", "deployment", DEPLOYMENT, "-n", NAMESPACE, f"--replicas={before}")
        eventually(lambda: webhooks_answering(cluster), 180, "guardhook to answer again")


def test_a_worker_delete_is_denied_by_the_floor_naming_the_leader(guardhook_down: Cluster) -> None:
    done = delete_dry_run(guardhook_down, guardhook_down.worker(1))
    assert floor_denied(done, "worker-delete"), done.stderr
    assert f"kubectl delete pod -n {guardhook_down.namespace} {guardhook_down.leader(1)}" in done.stderr
    assert "[worker-delete]" not in done.stderr  # guardhook is down: the floor answered


def test_a_leader_delete_passes_the_floor(guardhook_down: Cluster) -> None:
    done = delete_dry_run(guardhook_down, guardhook_down.leader(0))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("user", [LWS_CONTROLLER, GARBAGE_COLLECTOR])
def test_the_lws_controller_and_the_garbage_collector_pass_the_floor(
    guardhook_down: Cluster, user: str
) -> None:
    done = delete_dry_run(
        guardhook_down, guardhook_down.worker(0), f"--as={user}", "--as-group=system:masters"
    )
    assert done.returncode == 0, done.stderr


def test_an_lws_wide_pdb_is_refused_by_the_floor(guardhook_down: Cluster) -> None:
    done = guardhook_down.dry_run_create(pdb(guardhook_down, "e2e-floor-wide"))
    assert floor_denied(done, "group-pdb"), done.stderr


def test_a_per_group_pdb_passes_the_floor(guardhook_down: Cluster) -> None:
    done = guardhook_down.dry_run_create(
        pdb(guardhook_down, "e2e-floor-group", **{"leaderworkerset.sigs.k8s.io/group-index": "0"})
    )
    assert done.returncode == 0, done.stderr


def test_with_guardhook_back_the_webhook_answers_again(cluster: Cluster, guardhook_down: Cluster) -> None:
    # Runs last in this module. The API server runs ValidatingAdmissionPolicies before webhooks, so
    # what both deny is refused by the floor first; the webhook shows in what only it denies: a PDB
    # that reaches the LWS's pods through their template labels (the floor cannot see templates).
    by_template = {
        **pdb(cluster, "e2e-floor-template"),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(cluster.worker_labels)}},
    }
    assert cluster.dry_run_create(by_template).returncode == 0  # guardhook down: nothing refuses it
    cluster.must("scale", "deployment", DEPLOYMENT, "-n", NAMESPACE, "--replicas=1")

    def webhook_back() -> bool:
        done = cluster.dry_run_create(by_template)
        return done.returncode != 0 and "[group-pdb]" in done.stderr

    eventually(webhook_back, 180, "guardhook to answer again")
    assert delete_dry_run(cluster, cluster.worker(0)).returncode != 0
