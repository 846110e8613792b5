"""Policy `group-pdb`: disruption budgets count groups, not pods.

A PodDisruptionBudget whose selector can match pods of more than one group of an LWS budgets
pods: evicting one pod in each of two groups takes two replicas down while the budget sees two
pods gone. The selector is judged against the pods each LWS in the namespace can create
(`guardhook.groups.reach`), so it works before any pod exists and in `guardhook check`. Denied when
it can reach pods of two or more groups (which needs `replicas > 1` and no pin of `group-index` or
`group-key`). PDBs that pin one group are allowed. Over an LWS of `size: 1` a pod is a group, so a
PDB counting its pods counts groups: allowed, and never pointed to per-group budgets (a budget over
one pod either blocks its every eviction or allows it).

Advisories (emitted on /validate whatever the actions):
- a per-group PDB with a percentage or `maxUnavailable`: the disruption controller then takes the
  expected pod count from the scale of the pods' controllers (Kubernetes, "Specifying a
  Disruption Budget": only an integer minAvailable counts the matched pods themselves); the
  leader StatefulSet has R replicas and the group's worker StatefulSet S-1, so the budget counts
  R+S-1 pods for a group of S;
- a PDB pinning one group of a `size: 1` LWS: that group is one pod, so the budget keeps it
  (minAvailable 1 blocks every eviction, and every drain, of it) or allows it; one PDB across the
  LWS's pods budgets its groups;
- a PDB overlapping another PDB on LWS pods: the eviction API refuses (HTTP 500) to evict a pod
  covered by two PDBs, so drains stall on it.

Fail mode: open. With a stale view the PDB is allowed, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.annotations import GROUP_PDBS_ANNOTATION
from guardhook.cluster.lws import GROUP_INDEX_LABEL, NAME_LABEL, LeaderWorkerSet
from guardhook.cluster.model import as_dict, metadata
from guardhook.cluster.selectors import Selector, SelectorError, from_label_selector
from guardhook.groups.reach import Reach, both, reach
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.wire import KubeObject


def pdb_selector(pdb: KubeObject) -> Selector | None:
    """The pod selector of a PDB (None: null selector, or one that cannot be parsed: matches nothing)."""
    try:
        return from_label_selector(as_dict(pdb.get("spec")).get("selector"))
    except SelectorError:
        return None


def overlapping(selector: Selector | None, other: KubeObject, lws_list: list[LeaderWorkerSet]) -> list[str]:
    """Names of the LWSs some pod of which both `selector` and PDB `other` can match."""
    joint = both(selector, pdb_selector(other))
    return [lws.name for lws in lws_list if reach(joint, lws).any]


def expected_pods(lws: LeaderWorkerSet, reached: Reach) -> int:
    """The pod count the disruption controller expects for a PDB reaching one group of `lws` when
    it counts by controller scale: R for the leader StatefulSet, S-1 for the worker one."""
    return (lws.replicas if reached.leaders else 0) + (lws.size - 1 if reached.workers else 0)


@dataclass(frozen=True)
class _Budget:
    """The budget fields of a PDB spec."""

    min_available: object
    max_unavailable: object

    @property
    def counted_by_scale(self) -> bool:
        percent = isinstance(self.min_available, str) and self.min_available.endswith("%")
        return self.max_unavailable is not None or percent


class GroupPdb(Policy):
    id = "group-pdb"
    targets = (target("policy", "poddisruptionbudgets", "", "CREATE", "UPDATE"),)
    default_actions = ("Deny",)

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Deny a PDB reaching pods of several groups of one LWS; advise on per-group PDBs counted
        by controller scale and on overlapping PDBs."""
        pdb = ctx.object
        selector = pdb_selector(pdb)
        if selector is None:
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        name = ctx.name
        lws_list = ctx.view.lws_in_namespace(ctx.namespace)
        spanning: list[tuple[LeaderWorkerSet, Reach]] = []
        advisories: list[str] = []
        spec = as_dict(pdb.get("spec"))
        budget = _Budget(spec.get("minAvailable"), spec.get("maxUnavailable"))
        for lws in lws_list:
            reached = reach(selector, lws)
            if lws.size <= 1:
                # a pod is a group: counting pods counts groups, and a one-group budget is one pod
                if reached.groups == 1 and lws.replicas > 1:
                    advisories.append(_one_pod_group_advice(ctx.namespace, name, lws))
                continue
            if reached.groups > 1:
                spanning.append((lws, reached))
            elif reached.groups == 1 and budget.counted_by_scale:
                advisories.append(_scale_counting_advice(ctx.namespace, name, lws, reached))
        advisories += self._overlaps(ctx, name, selector, lws_list)
        if not spanning:
            return Judgement(advisories=tuple(advisories))
        return Judgement(
            violation=Violation(_spanning_message(ctx.namespace, name, spanning)),
            advisories=tuple(advisories),
        )

    def _overlaps(
        self, ctx: PolicyContext, name: str, selector: Selector, lws_list: list[LeaderWorkerSet]
    ) -> list[str]:
        found = []
        for other in ctx.view.pdbs_in_namespace(ctx.namespace):
            other_name = str(metadata(other).get("name") or "")
            if other_name == name:
                continue
            shared = overlapping(selector, other, lws_list)
            if shared:
                found.append(
                    f"PDB {ctx.namespace}/{name} overlaps PDB {other_name} on pods of LeaderWorkerSet "
                    f"{', '.join(sorted(shared))}: a pod under two PDBs cannot be evicted (the eviction "
                    f"API answers 500), so drains stall on it"
                )
        return found


def _spanning_message(namespace: str, name: str, spanning: list[tuple[LeaderWorkerSet, Reach]]) -> str:
    parts = []
    for lws, reached in spanning:
        parts.append(f"{reached.groups} groups of LeaderWorkerSet {lws.name} (replicas {lws.replicas})")
    example = spanning[0][0]
    # a Hash group's group-index is its random 40-character key (lws KEP-898), not an ordinal
    index = "<the group's key>" if example.hashed else '"0"'
    return (
        f"PodDisruptionBudget {namespace}/{name} can match pods of {'; '.join(parts)}. A PDB counts "
        f"pods, not replicas: one eviction in each of two groups takes two replicas down. Use one "
        f"budget per group (pin {GROUP_INDEX_LABEL} or group-key, e.g. selector {{{NAME_LABEL}: "
        f"{example.name}, {GROUP_INDEX_LABEL}: {index}}} with an integer minAvailable), or annotate the "
        f'LeaderWorkerSet {GROUP_PDBS_ANNOTATION}: "true" to have guardhook keep them; the '
        f"group-eviction policy budgets whole groups across the LeaderWorkerSet"
    )


def _scale_counting_advice(namespace: str, name: str, lws: LeaderWorkerSet, reached: Reach) -> str:
    # Kept under 256 characters: the API server may truncate longer warnings.
    scale = f"{lws.replicas} leaders" if reached.leaders else ""
    if reached.workers:
        scale += (" + " if scale else "") + f"{lws.size - 1} workers"
    return (
        f"PDB {namespace}/{name} on one group of {lws.name} uses a percentage or maxUnavailable: expected "
        f"pods then come from StatefulSet scale ({scale} = {expected_pods(lws, reached)} pods), not "
        f"the group's {lws.size}; use an integer minAvailable"
    )


def _one_pod_group_advice(namespace: str, name: str, lws: LeaderWorkerSet) -> str:
    # Kept under 256 characters: the API server may truncate longer warnings.
    return (
        f"PDB {namespace}/{name} covers one group of {lws.name}, which is one pod (size 1): it blocks "
        f"every eviction of that pod or allows it; one PDB over all of {lws.name}'s pods budgets its "
        f"groups"
    )


POLICY = GroupPdb()
