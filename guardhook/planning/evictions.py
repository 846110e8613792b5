"""What the webhook's `group-eviction` policy answers to a run of evictions, one after another.

Each eviction is judged with the policy's own pieces (`eviction_context`, `pdb_refusal`,
`within_budget`) in the policy's order: a pod outside any LWS the view knows is allowed; a
PodDisruptionBudget that refuses the pod gives 429; else the group budget decides. A member of a
Workload API gang (`disruptionMode: all` PodGroup) is judged by the gang budget per set instead. An allowed
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
from guardhook.groups.ref import SetRef
from guardhook.ledger import LwsKey
from guardhook.policies.group_eviction import eviction_context, pdb_refusal, within_budget
from guardhook.policies.shared.gang_budget import gang_disruption, gang_reading
from guardhook.policies.shared.group_budget import BrokenGroups, budget_source, groups_broken, min_budget
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
) -> Outcome:
    """Judge evicting `pods` one after another, each allowed eviction taking effect before the
    next. `params` are group-eviction's parameters. `healed`: start as if every group were whole
    (a later wave of a drain, which starts once the groups broken before it are whole again);
    else start from the groups the view shows broken."""
    outcome = Outcome()
    broken: dict[LwsKey, BrokenGroups] = {}  # not sets: an LWS may have 2^31 - 1 broken groups
    namespace_pods: dict[str, dict[str, PodRecord]] = {}
    pdbs: dict[str, list[KubeObject]] = {}
    gangs: dict[SetRef, set[str]] = {}  # per gang set, the PodGroups broken so far
    for pod in pods:
        if pod.terminal or pod.terminating:
            continue
        eviction = eviction_context(view, pod, params)
        if eviction is None:
            _evict_gang_member(view, pod, params, healed, gangs, outcome)
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
                f"(budget {eviction.budget}, {budget_source(eviction.lws, eviction.budget)})"
            )
        if reason is not None:
            outcome.refused.append(Refusal(pod.namespace, pod.name, pod.node_name, reason))
            continue
        if eviction.group not in groups:
            broken[key] = groups.with_group(eviction.group, "evicted in this plan")
            outcome.broken.append(PlannedGroup(key[0], key[1], eviction.group))
        namespace_pods[pod.namespace][pod.name] = pod.with_fields(terminating=True)
        for pdb in matching:
            _take_disruption(pdb)
    return outcome


def _evict_gang_member(
    view: ClusterView,
    pod: PodRecord,
    params: Mapping[str, Any],
    healed: bool,
    gangs: dict[SetRef, set[str]],
    outcome: Outcome,
) -> None:
    """Judge evicting `pod` when it is a member of a `disruptionMode: all` PodGroup, as
    group-eviction's gang budget does (guardhook.policies.shared.gang_budget; PDBs are not
    simulated for gangs); `gangs` holds the broken PodGroups per set, updated in place, read from
    the view on a set's first pod unless `healed`. Anything else is allowed and changes nothing."""
    gang = gang_disruption(view, pod, int(params.get("maxDisruptedGroups", 1)), min_budget(params))
    if gang is None:
        return
    if gang.set not in gangs:
        gangs[gang.set] = set() if healed else set(gang_reading(view, gang, ()))
    broken = gangs[gang.set]
    name = gang.group.name
    if name not in broken and len(broken) >= gang.budget:
        reason = (
            f"would break PodGroup {name} (disruptionMode all) of {gang.set} while "
            f"{groups_broken(len(broken))} broken (budget {gang.budget})"
        )
        outcome.refused.append(Refusal(pod.namespace, pod.name, pod.node_name, reason))
        return
    if name not in broken:
        broken.add(name)
        outcome.broken.append(PlannedGroup(gang.set.namespace, gang.set.name, name, gang.set.kind))


def _take_disruption(pdb: KubeObject) -> None:
    status = as_dict(pdb.get("status"))
    allowed = status.get("disruptionsAllowed")
    if isinstance(allowed, int) and not isinstance(allowed, bool):
        status["disruptionsAllowed"] = allowed - 1
        pdb["status"] = status
