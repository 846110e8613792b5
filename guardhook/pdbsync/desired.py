"""The opt-in per-group PDB reconciler: desired state and plan, computed purely from a ClusterView.

For each LeaderWorkerSet annotated `guardhook.io/group-pdbs: "true"`, guardhook keeps one
PodDisruptionBudget per group g in 0..replicas-1 (issue 5, design.md §2):

- name `<lws>-group-<g>`, selector `{leaderworkerset.sigs.k8s.io/name: <lws>, group-index: "<g>"}`;
- an ownerReference to the LWS (controller: true), so the garbage collector removes it with the
  LWS; `blockOwnerDeletion` is left unset, which needs no rights on the LWS's finalizers;
- `minAvailable: S` (an integer, so the disruption controller counts the group's pods themselves)
  while the group is whole, `minAvailable: 0` while it is broken, so a dead group never blocks a
  drain; `unhealthyPodEvictionPolicy: AlwaysAllow` so unready pods can always be evicted.

A group whose budget would overlap a PDB someone else wrote is skipped with a warning (a pod under
two PDBs cannot be evicted at all), and a guardhook PDB that has come to overlap one is deleted.
Guardhook's PDBs carry `app.kubernetes.io/managed-by: guardhook`; nothing without that label is
ever written.

`spec.replicas` is an int32 (up to 2^31 - 1): every group that has pods gets its PDB, but of the
groups with no pods (whose PDB, `minAvailable: 0`, protects nothing yet) only the lowest-indexed
MAX_EMPTY_GROUP_PDBS do, with one warning naming how many were left without; each gets its PDB
once its pods exist. `plan` touches no API: `guardhook.pdbsync.apply` carries a plan out.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from guardhook.cluster.annotations import switch
from guardhook.cluster.lws import GROUP_INDEX_LABEL, LWS_API_VERSION, LWS_KIND, NAME_LABEL, LeaderWorkerSet
from guardhook.cluster.model import as_dict, metadata, str_map
from guardhook.cluster.view.store import ClusterView, Key, object_key
from guardhook.groups.counts import empty_groups, populated_groups, view_group_health
from guardhook.groups.keys import GroupKey, key_order, ordinal_key
from guardhook.groups.reach import both, reach
from guardhook.policies.group_pdb import GROUP_PDBS_ANNOTATION, pdb_selector
from guardhook.wire import KubeObject

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "guardhook"
GROUP_PDB_OF_LABEL = "guardhook.io/group-pdb-of"
PDB_API_VERSION = "policy/v1"
MAX_EMPTY_GROUP_PDBS = 1000
"""At most this many groups with no pods get a PDB per LWS (see the module docstring)."""


def opted_in(lws: LeaderWorkerSet) -> bool:
    """Whether `lws` asks for per-group PDBs (annotation `guardhook.io/group-pdbs: "true"`)."""
    return switch(lws.annotations, GROUP_PDBS_ANNOTATION) is True


def is_managed(pdb: KubeObject) -> bool:
    """Whether guardhook wrote this PDB (label `app.kubernetes.io/managed-by: guardhook`)."""
    return str_map(metadata(pdb).get("labels")).get(MANAGED_BY_LABEL) == MANAGER


def group_pdb_name(lws_name: str, group_index: GroupKey) -> str:
    return f"{lws_name}-group-{group_index}"


def desired_pdb(lws: LeaderWorkerSet, group_index: GroupKey, whole: bool) -> KubeObject:
    """The PDB guardhook keeps for group `group_index` of `lws` (see the module docstring)."""
    return {
        "apiVersion": PDB_API_VERSION,
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": group_pdb_name(lws.name, group_index),
            "namespace": lws.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGER, GROUP_PDB_OF_LABEL: lws.name},
            "ownerReferences": [
                {
                    "apiVersion": LWS_API_VERSION,
                    "kind": LWS_KIND,
                    "name": lws.name,
                    "uid": lws.uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "selector": {"matchLabels": {NAME_LABEL: lws.name, GROUP_INDEX_LABEL: str(group_index)}},
            "minAvailable": lws.size if whole else 0,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


@dataclass
class Plan:
    """What to change: PDBs to create, to update (carrying the current resourceVersion), to delete
    ((namespace, name)), and warnings for groups skipped."""

    create: list[KubeObject] = field(default_factory=list)
    update: list[KubeObject] = field(default_factory=list)
    delete: list[Key] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


def plan(view: ClusterView) -> Plan:
    """Compare the desired per-group PDBs with the PDBs in `view`. A stale view yields an empty
    plan with a warning: acting on it could delete budgets that still protect groups."""
    result = Plan()
    if view.is_stale():
        result.warnings.append("cluster view is stale or not synced; per-group PDBs left as they are")
        return result
    existing = {object_key(pdb): pdb for pdb in view.all_pdbs()}
    desired: dict[Key, KubeObject] = {}
    for lws in view.all_lws():
        if opted_in(lws) and not lws.meta.get("deletionTimestamp"):
            desired.update(_desired_for(view, lws, existing.values(), result.warnings))
    for key, want in sorted(desired.items()):
        current = existing.get(key)
        if current is None:
            result.create.append(want)
        elif _differs(current, want):
            want["metadata"]["resourceVersion"] = metadata(current).get("resourceVersion")
            result.update.append(want)
    result.delete = sorted(key for key, pdb in existing.items() if is_managed(pdb) and key not in desired)
    return result


def _desired_for(
    view: ClusterView, lws: LeaderWorkerSet, existing: Iterable[KubeObject], warnings: list[str]
) -> dict[Key, KubeObject]:
    user_pdbs = [
        pdb for pdb in existing if not is_managed(pdb) and metadata(pdb).get("namespace") == lws.namespace
    ]
    desired = {}
    for g in _planned_groups(view, lws, warnings):
        whole = view_group_health(view, lws, g).whole
        want = desired_pdb(lws, g, whole)
        name = want["metadata"]["name"]
        clash = _clash(want, user_pdbs, lws)
        if clash:
            warnings.append(
                f"{lws.namespace}/{lws.name} group {g}: no PodDisruptionBudget {name} kept, since {clash}"
            )
            continue
        desired[(lws.namespace, name)] = want
    return desired


def _planned_groups(view: ClusterView, lws: LeaderWorkerSet, warnings: list[str]) -> Iterator[GroupKey]:
    """The groups of `lws` to plan a PDB for, ascending: every group below `spec.replicas` that has
    pods, and the lowest MAX_EMPTY_GROUP_PDBS of those with none (a warning says how many more
    were left out)."""
    populated = populated_groups(view, lws)
    taken: set[GroupKey] = set(populated)
    # A Hash group with no pods has no key yet: its PDB is planned once its pods carry one.
    ordinals = (ordinal_key(g) for g in range(lws.replicas))
    empty = () if lws.hashed else (key for key in ordinals if key not in taken)
    chosen = list(itertools.islice(empty, MAX_EMPTY_GROUP_PDBS))
    left_out = empty_groups(lws, populated) - len(chosen)
    if left_out > 0:
        warnings.append(
            f"{lws.namespace}/{lws.name}: {left_out} more groups with no pods (of spec.replicas "
            f"{lws.replicas}) get no PodDisruptionBudget until their pods exist; at most "
            f"{MAX_EMPTY_GROUP_PDBS} groups with no pods get one"
        )
    return iter(sorted(taken.union(chosen), key=key_order))


def _clash(want: KubeObject, user_pdbs: list[KubeObject], lws: LeaderWorkerSet) -> str:
    """Why `want` cannot be kept next to the user's PDBs ("" when it can)."""
    selector = pdb_selector(want)
    for pdb in user_pdbs:
        name = metadata(pdb).get("name")
        if name == want["metadata"]["name"]:
            return "a PodDisruptionBudget of that name exists and is not guardhook's"
        if reach(both(selector, pdb_selector(pdb)), lws).any:
            return f"PodDisruptionBudget {name} (not guardhook's) covers pods of this group"
    return ""


def _differs(current: KubeObject, want: KubeObject) -> bool:
    spec = as_dict(current.get("spec"))
    meta = metadata(current)
    wanted_spec: dict[str, Any] = want["spec"]
    if any(spec.get(k) != v for k, v in wanted_spec.items()) or "maxUnavailable" in spec:
        return True
    labels = str_map(meta.get("labels"))
    if any(labels.get(k) != v for k, v in want["metadata"]["labels"].items()):
        return True
    owner_uids = [as_dict(ref).get("uid") for ref in meta.get("ownerReferences") or []]
    return owner_uids != [want["metadata"]["ownerReferences"][0]["uid"]]
