"""What the webhook's `group-eviction` policy answers to a run of evictions, one after another.

Each eviction is judged with the policy's own pieces (the group budget's, guardhook.budget, and
`pdb_refusal`) in the policy's order: a pod of no group of a set the view holds is allowed; a
PodDisruptionBudget that refuses the pod gives 429; else the group budget of its set decides, for
every group maker (an LWS group, a Workload API gang) alike. An allowed
eviction then changes what the next one sees, as in the cluster: its group counts as broken, the
pod is terminating, and each matching PDB with a status has one disruption fewer allowed (the API
server's eviction handler decrements `status.disruptionsAllowed`). The ledger is not consulted: a
plan starts from what the view shows.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from guardhook.budget import SetReader, default_budget, min_budget, within_budget
from guardhook.cluster.lws import LWS_KIND
from guardhook.cluster.model import PodRecord, as_dict
from guardhook.cluster.pdb_budget import matching_pdbs
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import BrokenGroups, SetRef, groups_broken
from guardhook.policies.group_eviction import pdb_refusal
from guardhook.wire import KubeObject


@dataclass(frozen=True, order=True)
class PlannedGroup:
    """One group as a drain plan names it, hashable and ordered (the plan's sets and sorted lists):
    namespace, LWS name, group index; for a Workload API gang, `lws` is the name of its set, `kind`
    the set's kind (Workload, or the PodGroups' controller owner's) and `group` the PodGroup's name
    ("" `kind` for an LWS group). Not the group model's reference to a pod's group
    (guardhook.groups.GroupRef), which a plan reads through; this is what it prints."""

    namespace: str
    lws: str
    group: str
    """The group's key: its ordinal ("3"), a Hash group's key, or a gang's PodGroup name."""
    kind: str = ""

    def as_dict(self) -> dict[str, Any]:
        if self.kind:
            return {"namespace": self.namespace, "kind": self.kind, "set": self.lws, "podGroup": self.group}
        return {"namespace": self.namespace, "lws": self.lws, "group": self.group}

    def __str__(self) -> str:
        if self.kind:
            return f"{self.kind} {self.namespace}/{self.lws} PodGroup {self.group}"
        return f"{self.namespace}/{self.lws} group {self.group}"


@dataclass(frozen=True)
class Refusal:
    """An eviction the webhook would answer 429: the pod, its node, and why."""

    namespace: str
    pod: str
    node: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"namespace": self.namespace, "pod": self.pod, "node": self.node, "reason": self.reason}


@dataclass
class Outcome:
    """The result of a run: groups it breaks (whole before, in order) and the refused evictions."""

    broken: list[PlannedGroup] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def evict_in_turn(
    view: ClusterView,
    pods: Iterable[PodRecord],
    params: Mapping[str, Any],
    healed: bool = False,
    reader: SetReader | None = None,
) -> Outcome:
    """Judge evicting `pods` one after another, each allowed eviction taking effect before the
    next. `params` are group-eviction's parameters. `healed`: start as if every group were whole
    (a later wave of a drain, which starts once the groups broken before it are whole again);
    else start from the groups the view shows broken. `reader`: the plan's snapshots of `view`'s
    sets (guardhook.budget.SetReader), shared by its runs; a new one when None."""
    sets = reader if reader is not None else SetReader(view, default_budget(params), min_budget(params))
    outcome = Outcome()
    broken: dict[tuple[str, SetRef], BrokenGroups] = {}  # not sets: 2^31 - 1 broken groups fit
    namespace_pods: dict[str, dict[str, PodRecord]] = {}
    pdbs: dict[str, list[KubeObject]] = {}
    for pod in pods:
        if pod.terminal or pod.terminating:
            continue
        eviction = sets.disruption(pod)
        if eviction is None:
            continue
        snap = eviction.snapshot
        key = (snap.maker, eviction.set)
        if key not in broken:  # the first pod of each set reads its groups
            broken[key] = snap.none_broken() if healed else snap.broken
        groups = broken[key]
        if pod.namespace not in namespace_pods:
            namespace_pods[pod.namespace] = {p.name: p for p in view.pods_in_namespace(pod.namespace)}
            pdbs[pod.namespace] = [copy.deepcopy(p) for p in view.pdbs_in_namespace(pod.namespace)]
        matching = matching_pdbs(pdbs[pod.namespace], pod)
        reason = pdb_refusal(matching, pod, list(namespace_pods[pod.namespace].values()))
        if reason is None and not within_budget(eviction.group, groups, eviction.budget):
            reason = (
                f"would break {snap.wording.group(eviction.set, eviction.group, namespaced=False)} while "
                f"{groups_broken(len(groups), unit=snap.wording.unit)} broken "
                f"(budget {eviction.budget}, {eviction.source()})"
            )
        if reason is not None:
            outcome.refused.append(Refusal(pod.namespace, pod.name, pod.node_name, reason))
            continue
        if eviction.group not in groups:
            broken[key] = groups.with_group(eviction.group, "evicted in this plan")
            outcome.broken.append(planned(eviction.set, eviction.group))
        namespace_pods[pod.namespace][pod.name] = pod.with_fields(terminating=True)
        for pdb in matching:
            _take_disruption(pdb)
    return outcome


def planned(target: SetRef, key: str) -> PlannedGroup:
    """Group `key` of set `target` as a plan names it: an LWS's by its name, any other set's with
    its kind (PlannedGroup)."""
    kind = "" if target.kind == LWS_KIND else target.kind
    return PlannedGroup(target.namespace, target.name, key, kind)


def _take_disruption(pdb: KubeObject) -> None:
    status = as_dict(pdb.get("status"))
    allowed = status.get("disruptionsAllowed")
    if isinstance(allowed, int) and not isinstance(allowed, bool):
        status["disruptionsAllowed"] = allowed - 1
        pdb["status"] = status
