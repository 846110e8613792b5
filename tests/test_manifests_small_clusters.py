"""Small clusters (issue 22): the rendered Deployment and PDB let install, upgrade and drain finish on
clusters with fewer nodes than replicas, and still spread the replicas when there are nodes for it.

The scheduling and disruption rules are the API's own: a `required...` anti-affinity term or a
`DoNotSchedule` spread constraint is a hard filter (kube-scheduler's InterPodAffinity and
PodTopologySpread filter plugins), the preferred/ScheduleAnyway forms only score; a PDB's
disruptionsAllowed is currentHealthy - desiredHealthy (pkg/controller/disruption)."""

from __future__ import annotations

from typing import Any

import pytest
from test_manifests import MANIFESTS, one

from kustomize_lite import render

Object = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def install() -> list[Object]:
    return render(MANIFESTS)


def _placeable(pod: Object, pods: int, nodes: int) -> bool:
    """Whether `pods` of this template fit on `nodes` schedulable nodes by its hard constraints: a
    required hostname anti-affinity allows one per node (preferred terms and ScheduleAnyway spreads
    only score nodes)."""
    anti = pod.get("affinity", {}).get("podAntiAffinity", {})
    if any(
        t["topologyKey"] == HOSTNAME for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    ):
        return pods <= nodes
    return True  # a spread's skew is measured between nodes: it never strands a pod on its own


def _disruptions_allowed(pdb: Object, expected: int, healthy: int) -> int:
    spec = pdb["spec"]
    if "maxUnavailable" in spec:
        desired_healthy = expected - int(spec["maxUnavailable"])
    else:
        desired_healthy = int(spec["minAvailable"])
    return max(0, healthy - desired_healthy)


@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_every_replica_and_every_rollout_pod_can_be_placed(install: list[Object], nodes: int) -> None:
    deployment = one(install, "Deployment")
    pod, replicas = deployment["spec"]["template"]["spec"], deployment["spec"]["replicas"]
    assert _placeable(pod, replicas, nodes)  # install: `kubectl rollout status` ends
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    # An upgrade never needs a node beyond the replicas' own: no surge pod, one old pod goes first.
    assert rolling["maxSurge"] == 0 and rolling["maxUnavailable"] == 1
    assert _placeable(pod, replicas + rolling["maxSurge"], nodes)


def test_replicas_are_spread_over_nodes_and_zones_when_there_are_some(install: list[Object]) -> None:
    deployment = one(install, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    (preferred,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["topologyKey"] == HOSTNAME
    assert preferred["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    spread = {s["topologyKey"]: s for s in pod["topologySpreadConstraints"]}
    assert set(spread) == {HOSTNAME, "topology.kubernetes.io/zone"}
    for constraint in spread.values():
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
        assert constraint["labelSelector"]["matchLabels"] == selector


def test_pdb_lets_a_drain_take_one_pod_even_when_all_share_a_node(install: list[Object]) -> None:
    deployment = one(install, "Deployment")
    pdb = one(install, "PodDisruptionBudget", "guardhook")
    replicas = deployment["spec"]["replicas"]
    # All Ready (on one node or many): one may go; one left Ready keeps the webhook answering.
    assert _disruptions_allowed(pdb, replicas, replicas) == 1
    assert _disruptions_allowed(pdb, replicas, replicas - 1) == 0
    # A pod that is not Ready never holds a drain up.
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_the_old_required_anti_affinity_would_strand_a_replica_on_one_node(install: list[Object]) -> None:
    # The check above is not vacuous: the previous manifest's rules fail it on a one-node cluster.
    pod = dict(one(install, "Deployment")["spec"]["template"]["spec"])
    term = {
        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "guardhook"}},
        "topologyKey": HOSTNAME,
    }
    pod["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    assert not _placeable(pod, 2, 1) and _placeable(pod, 2, 2)
    assert _disruptions_allowed({"spec": {"minAvailable": 1}}, 2, 1) == 0
