"""Whether a group is whole: every one of its `size` pods present, Ready and not terminating
(design.md §1), for a LeaderWorkerSet group and a Workload API gang alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from guardhook.cluster.model import PodRecord
from guardhook.groups.keys import GroupKey


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """The state of one group: whole when it has `size` pods, none terminating, all Ready
    (design.md §1). `problems` says why a group is broken, for messages."""

    group_index: GroupKey
    size: int
    pods: int
    whole: bool
    problems: tuple[str, ...]


def group_health(
    group_index: GroupKey,
    size: int,
    pods: Iterable[PodRecord],
    doomed: Callable[[PodRecord], str] | None = None,
) -> GroupHealth:
    """Judge one group from its live pods (terminal pods count as absent). `doomed`, when given,
    says why a pod neither terminating nor terminal is going all the same ("" when it is not; see
    guardhook.cluster.going): a marked or NoExecute-tainted pod breaks its group as a terminating
    one does."""
    present = [p for p in pods if not p.terminal]
    if len(present) >= size:  # the common case, whole, told in one pass without generators
        for p in present:
            if not p.ready or p.terminating or (doomed is not None and doomed(p)):
                break
        else:
            return GroupHealth(group_index, size, len(present), True, ())
    problems: list[str] = []
    if len(present) < size:
        problems.append(f"{len(present)} of {size} pods exist")
    terminating = sorted(p.name for p in present if p.terminating)
    if terminating:
        problems.append("terminating: " + ", ".join(terminating))
    going = {p.name: doomed(p) for p in present if not p.terminating} if doomed is not None else {}
    going = {name: why for name, why in going.items() if why}
    if going:
        problems.append("going: " + ", ".join(f"{name} ({why})" for name, why in sorted(going.items())))
    not_ready = sorted(p.name for p in present if not p.ready and not p.terminating and p.name not in going)
    if not_ready:
        problems.append("not Ready: " + ", ".join(not_ready))
    return GroupHealth(group_index, size, len(present), not problems, tuple(problems))
