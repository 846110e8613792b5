"""What the webhook's `group-eviction` policy answers to a run of evictions, one after another.

Each eviction is judged with the policy's own pieces (`eviction_context`, `pdb_refusal`,
`within_budget`) in the policy's order: a pod outside any LWS the view knows is allowed; a
PodDisruptionBudget that refuses the pod gives 429; else the group budget decides. An allowed
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

from guardhook.cluster.model import PodRecord, as_dict
from guardhook.cluster.pdb_budget import matching_pdbs
from guardhook.cluster.view.store import ClusterView
from guardhook.policies.group_eviction import eviction_context, pdb_refusal, within_budget
from guardhook.policies.shared.group_budget import BrokenGroups, budget_source, groups_broken
from guardhook.wire import KubeObject

LwsKey = tuple[str, str]
"""(namespace, LWS name)."""


@dataclass(frozen=True, order=True)
class GroupRef:
    """One group: namespace, LWS name, group index."""

    namespace: str
    lws: str
    group: int | str
    """The group's key: ordinal, or a Hash group's key (guardhook.cluster.lws.GroupKey)."""

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "lws": self.lws, "group": self.group}

    def __str__(self) -> str:
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

    broken: list[GroupRef] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def evict_in_turn(
    view: ClusterView,
    pods: Iterable[PodRecord],
    params: Mapping[str, Any],
    healed: bool = False,
) -> Outcome:
    """Judge evicting `pods` one after another, each allowed eviction taking effect before the
    next. `params` are group-eviction's parameters. `healed`: start as if every group were whole
    (a later wave of a drain, which starts once the groups broken before it are whole again);
    else start from the groups the view shows broken."""
    outcome = Outcome()
    broken: dict[LwsKey, BrokenGroups] = {}  # not sets: an LWS may have 2^31 - 1 broken groups
    namespace_pods: dict[str, dict[str, PodRecord]] = {}
    pdbs: dict[str, list[KubeObject]] = {}
    for pod in pods:
        if pod.terminal or pod.terminating:
            continue
        eviction = eviction_context(view, pod, params)
        if eviction is None:
            continue
        key = (eviction.lws.namespace, eviction.lws.name)
        none_broken = BrokenGroups({}, eviction.lws.replicas, (), None)
        if key not in broken:  # the first pod of each LWS reads its groups (read on first use)
            broken[key] = none_broken if healed else eviction.broken_in_view
        groups = broken[key]
        if pod.namespace not in namespace_pods:
            namespace_pods[pod.namespace] = {p.name: p for p in view.pods_in_namespace(pod.namespace)}
            pdbs[pod.namespace] = [copy.deepcopy(p) for p in view.pdbs_in_namespace(pod.namespace)]
        matching = matching_pdbs(pdbs[pod.namespace], pod)
        reason = pdb_refusal(matching, pod, list(namespace_pods[pod.namespace].values()))
        if reason is None and not within_budget(eviction.group, groups, eviction.budget):
            reason = (
                f"would break group {eviction.group} of LeaderWorkerSet {key[0]}/{key[1]} while "
                f"{groups_broken(len(groups))} broken "
                f"(budget {eviction.budget}, {budget_source(eviction.lws)})"
            )
        if reason is not None:
            outcome.refused.append(Refusal(pod.namespace, pod.name, pod.node_name, reason))
            continue
        if eviction.group not in groups:
            broken[key] = groups.with_group(eviction.group, "evicted in this plan")
            outcome.broken.append(GroupRef(key[0], key[1], eviction.group))
        namespace_pods[pod.namespace][pod.name] = pod.with_fields(terminating=True)
        for pdb in matching:
            _take_disruption(pdb)
    return outcome


def _take_disruption(pdb: KubeObject) -> None:
    status = as_dict(pdb.get("status"))
    allowed = status.get("disruptionsAllowed")
    if isinstance(allowed, int) and not isinstance(allowed, bool):
        status["disruptionsAllowed"] = allowed - 1
        pdb["status"] = status
