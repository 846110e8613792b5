"""A Hash LWS's group replacement (lws PR #1050, `spec.groupReplacementPolicy`): the old group and
its gated replacement are one disrupted group, not two.

In Hash mode the leader Deployment's ReplicaSet creates a replacement leader, under a new group
key, as soon as the old leader starts terminating. The LWS pod webhook puts the
`leaderworkerset.sigs.k8s.io/group-replacement` scheduling gate on every Hash leader it admits; the
pod controller counts T, the groups still tearing down (a pod of the group exists while its leader
is terminating or gone), and G, the gated leaders, and lifts the gate of the oldest G - T (under
`PostTermination`, the default; `Immediate` lifts it at once). So while a group tears down, its
replacement waits: the view shows two broken groups for one disruption. `pair_replacements` drops
from the broken groups as many gated replacements as there are groups tearing down (oldest first,
as the controller admits them) and says so on the group it replaces; the replacement's leader still
counts as demand for capacity (guardhook.groups.lws.gated_hash_leaders).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from guardhook.cluster.lws import GROUP_REPLACEMENT_GATE, WORKER_INDEX_LABEL
from guardhook.cluster.model import PodRecord
from guardhook.groups.keys import GroupKey


def _leader(pods: Sequence[PodRecord]) -> PodRecord | None:
    return next((p for p in pods if p.labels.get(WORKER_INDEX_LABEL) == "0" and not p.terminal), None)


def tearing_down(pods: Sequence[PodRecord]) -> bool:
    """Whether a group is being torn down: a live pod of it exists while its leader is terminating
    or gone (lws PR #1050's T)."""
    live = [p for p in pods if not p.terminal]
    leader = _leader(live)
    return bool(live) and (leader is None or leader.terminating)


def gated_replacement(pods: Sequence[PodRecord]) -> PodRecord | None:
    """The leader of a group waiting behind the group-replacement gate (not terminating), or None."""
    leader = _leader(pods)
    if leader is None or leader.terminating or GROUP_REPLACEMENT_GATE not in leader.scheduling_gates:
        return None
    return leader


def pair_replacements(
    groups: Mapping[GroupKey, Sequence[PodRecord]], broken: Mapping[GroupKey, str]
) -> dict[GroupKey, str]:
    """`broken` (group key -> why) with each gated replacement paired to a group tearing down left
    out, the oldest replacements first, and the group it replaces saying so."""
    down = sorted(k for k in broken if tearing_down(groups.get(k, ())))
    waiting = sorted(
        (leader.created, key)
        for key in broken
        if (leader := gated_replacement(groups.get(key, ()))) is not None
    )
    if not down or not waiting:
        return dict(broken)
    result = dict(broken)
    for old, (_, new) in zip(down, waiting, strict=False):
        del result[new]
        result[old] = (
            f"{result[old]}; its replacement group {new} waits behind the {GROUP_REPLACEMENT_GATE} gate"
        )
    return result
