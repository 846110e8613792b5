"""Will a PodDisruptionBudget refuse evicting this pod? The API server's eviction handler
(k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go, policy/v1), read from the view.

The handler ignores PDBs for pods that are Pending, Succeeded, Failed or terminating. For a pod
that is not Ready, `unhealthyPodEvictionPolicy: AlwaysAllow` lets it go, and the default
`IfHealthyBudget` lets it go while the budget's healthy pods reach the desired count. Otherwise the
eviction needs `status.disruptionsAllowed > 0` and a status observed at the PDB's generation, and
is refused with 429 when there is no room.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.model import PodRecord, as_dict, metadata, scaled
from guardhook.cluster.selectors import Selector, SelectorError, from_label_selector, matches
from guardhook.wire import KubeObject

PDB_IGNORED_PHASES = ("Pending", "Succeeded", "Failed")


@dataclass(frozen=True)
class Room:
    """A PDB's numbers for one decision: healthy (Ready, not terminating) matching pods, desired
    healthy pods, and disruptions allowed (from the PDB controller's status when present)."""

    healthy: int
    desired: int
    allowed: int
    observed: bool


def matching_pdbs(pdbs: Iterable[KubeObject], pod: PodRecord) -> list[KubeObject]:
    """The PDBs whose `spec.selector` selects `pod` (a null or malformed selector selects nothing)."""
    return [pdb for pdb in pdbs if matches(_selector(pdb), pod.labels)]


def room(pdb: KubeObject, pods: Iterable[PodRecord]) -> Room:
    """The room `pdb` has, given the view's `pods` of its namespace. Uses `status` when the PDB
    controller has written one; otherwise computes it from the spec like the controller does (the
    expected count approximated by the matching pods the view holds)."""
    selector = _selector(pdb)
    selected = [p for p in pods if not p.terminal and matches(selector, p.labels)]
    healthy = sum(1 for p in selected if p.ready and not p.terminating)
    status = as_dict(pdb.get("status"))
    if isinstance(status.get("disruptionsAllowed"), int):
        generation = metadata(pdb).get("generation")
        observed = status.get("observedGeneration")
        fresh = not isinstance(generation, int) or (isinstance(observed, int) and observed >= generation)
        desired = status.get("desiredHealthy")
        current = status.get("currentHealthy")
        return Room(
            healthy=current if isinstance(current, int) else healthy,
            desired=desired if isinstance(desired, int) else 0,
            allowed=int(status["disruptionsAllowed"]),
            observed=fresh,
        )
    desired = _desired_healthy(as_dict(pdb.get("spec")), len(selected))
    return Room(healthy, desired, max(0, healthy - desired), True)


def refusal(pdb: KubeObject, pod: PodRecord, pods: Iterable[PodRecord]) -> str | None:
    """Why the API server will refuse evicting `pod` under `pdb`, or None when it will not."""
    if pod.phase in PDB_IGNORED_PHASES or pod.terminating:
        return None
    numbers = room(pdb, pods)
    if not pod.ready:
        policy = as_dict(pdb.get("spec")).get("unhealthyPodEvictionPolicy")
        if policy == "AlwaysAllow" or (numbers.desired > 0 and numbers.healthy >= numbers.desired):
            return None
    name = metadata(pdb).get("name")
    if not numbers.observed:
        return f"PodDisruptionBudget {name} has not been observed at its current generation yet"
    if numbers.allowed <= 0:
        return (
            f"PodDisruptionBudget {name} allows no more disruptions "
            f"({numbers.healthy} healthy, {numbers.desired} required)"
        )
    return None


def _selector(pdb: KubeObject) -> Selector | None:
    try:
        return from_label_selector(as_dict(pdb.get("spec")).get("selector"))
    except SelectorError:
        return None


def _desired_healthy(spec: dict[str, Any], expected: int) -> int:
    """minAvailable, or expected − maxUnavailable; percentages of `expected` round up, as in
    the PDB controller (intstr.GetScaledValueFromIntOrPercent with roundUp)."""
    if "minAvailable" in spec:
        return scaled(spec["minAvailable"], expected, round_up=True, default=0)
    if "maxUnavailable" in spec:
        return max(0, expected - scaled(spec["maxUnavailable"], expected, round_up=True, default=0))
    return 0
