"""Small clusters (issue 22): the rendered Deployment and PDB let install, upgrade and drain finish on
clusters with fewer nodes than replicas, and still spread the replicas when there are nodes for it.
On one node, the `ha` component (second replica, spread, guardhook's own PDB) is left out
(overlays/single-node): the drain of the only node is then held by no PDB of guardhook's.

The scheduling and disruption rules are the API's own: a `required...` anti-affinity term or a
`DoNotSchedule` spread constraint is a hard filter (kube-scheduler's InterPodAffinity and
PodTopologySpread filter plugins), the preferred/ScheduleAnyway forms only score; a PDB's
disruptionsAllowed is currentHealthy - desiredHealthy (pkg/controller/disruption)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_manifests import MANIFESTS, by_kind, canonical, one

from kustomize_lite import render, user_overlay

Object = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def install() -> list[Object]:
    return render(MANIFESTS)


@pytest.fixture(scope="module")
def single_node() -> list[Object]:
    return render(MANIFESTS / "overlays" / "single-node")


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


def _selects(pdb: Object, labels: dict[str, str]) -> bool:
    return pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_draining_the_only_node_is_held_by_no_pdb_of_guardhook_s(single_node: list[Object]) -> None:
    deployment = one(single_node, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 1
    # With components/ha, the PDB leaves no disruption for the one replica left once the first has
    # gone, and its replacement has no node while the only one is cordoned: the drain waits for ever.
    assert not [pdb for pdb in by_kind(single_node, "PodDisruptionBudget") if _selects(pdb, labels)]
    pod = deployment["spec"]["template"]["spec"]
    assert "affinity" not in pod and "topologySpreadConstraints" not in pod  # nothing to spread


def test_one_replica_upgrades_with_no_gap_and_fits_on_one_node(single_node: list[Object]) -> None:
    deployment = one(single_node, "Deployment")
    pod, replicas = deployment["spec"]["template"]["spec"], deployment["spec"]["replicas"]
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    # The new pod starts beside the old one, which stops only once the new one is Ready.
    assert rolling == {"maxUnavailable": 0, "maxSurge": 1}
    assert _placeable(pod, replicas + rolling["maxSurge"], 1)


def test_ha_component_is_exactly_the_difference_between_the_default_and_single_node(
    tmp_path: Path, install: list[Object], single_node: list[Object]
) -> None:
    # The default install is the single-node one plus components/ha, and nothing else differs.
    overlay = user_overlay(
        tmp_path / "overlay", [MANIFESTS / "overlays" / "single-node"], [MANIFESTS / "components" / "ha"]
    )
    assert canonical(render(overlay)) == canonical(install)
    if shutil.which("kubectl"):
        printed = subprocess.run(
            ["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60
        )
        assert printed.returncode == 0, printed.stderr
        assert canonical(list(yaml.safe_load_all(printed.stdout))) == canonical(install)
    only_in_default = [o for o in install if o not in single_node]
    assert sorted(o["kind"] for o in only_in_default) == ["Deployment", "PodDisruptionBudget"]
    shipped = yaml.safe_load((MANIFESTS / "overlays" / "self-managed" / "kustomization.yaml").read_text())
    # the self-managed overlay ships HA too, and the leader-service-sync reconciler like every overlay
    assert shipped["components"] == ["../../components/ha", "../../components/leader-service-sync"]


def test_operations_doc_says_which_entries_fail_closed_while_the_one_replica_restarts(
    tmp_path: Path,
) -> None:
    # docs/operations.md "One node": the entries whose failurePolicy is Fail are named as failing
    # closed, and every other entry (with every component) is Ignore, as the page says.
    text = (MANIFESTS.parent / "docs" / "operations.md").read_text()
    paragraph = " ".join(text[text.index("**One node.**") : text.index("**NetworkPolicy**")].split())
    in_default = ("cert-manager", "ha", "leader-service-sync")
    components = [p for p in (MANIFESTS / "components").iterdir() if p.name not in in_default]
    overlay = user_overlay(tmp_path / "overlay", [MANIFESTS / "overlays" / "single-node"], sorted(components))
    objects = render(overlay)
    policies = {
        hook["name"].removesuffix(".guardhook.io"): hook["failurePolicy"]
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for config in by_kind(objects, kind)
        for hook in config.get("webhooks") or []
    }
    closed = sorted(name for name, policy in policies.items() if policy == "Fail")
    assert closed  # the eviction webhook fails closed: what makes one replica matter
    assert set(policies.values()) == {"Fail", "Ignore"}
    assert paragraph.count("(**Fail**) fails closed") == len(closed)
    for name in closed:
        assert f"`{name}` (**Fail**) fails closed" in paragraph
    assert "every other entry (`Ignore`) fails open" in paragraph
