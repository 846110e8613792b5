"""Gang counts per set, for every gang maker: Workload API PodGroups with `disruptionMode: all`
(per Workload, common controller owner or lone PodGroup), Grove PodCliqueSet replicas, JobSet Jobs
that run as one. Used by `guardhook audit`'s gang table and the `guardhook_gang_*` gauges.

Read through the group model's door only: every set of every registered maker
(guardhook.groups.makers.all_sets) whose groups are named (`SetSnapshot.keys`: gangs, not an
LWS's ordinals), each judged by one snapshot of it (guardhook.groups.maker.SetSnapshot), as the
budget judges it. A maker registered later shows up here with no edit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from guardhook.cluster.going import Going
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.keys import key_order
from guardhook.groups.maker import SetSnapshot
from guardhook.groups.makers import all_sets


@dataclass(frozen=True, slots=True)
class GangSetGroups:
    """Gang counts of one set: `maker` the registered maker's name ("PodGroup", "Grove",
    "JobSet"), `gangs` its gangs, `whole` those whole (every pod of the size present, Ready, not
    terminating or going), `broken` = gangs - whole, and `broken_names` the broken gangs' keys (a
    PodGroup's name, a Grove replica index, a JobSet Job's name), in key order."""

    namespace: str
    kind: str
    name: str
    gangs: int
    whole: int
    broken: int
    broken_names: tuple[str, ...]
    maker: str = ""

    def as_dict(self) -> dict[str, object]:
        """camelCase, as Kubernetes writes JSON."""
        return {
            "namespace": self.namespace,
            "kind": self.kind,
            "name": self.name,
            "maker": self.maker,
            "gangs": self.gangs,
            "whole": self.whole,
            "broken": self.broken,
            "brokenGangs": list(self.broken_names),
        }


def gang_counts(snap: SetSnapshot) -> GangSetGroups:
    """The gang counts of one gang set's snapshot."""
    broken = tuple(sorted((key for key in snap.broken.listed), key=key_order))
    return GangSetGroups(
        snap.set.namespace,
        snap.set.kind,
        snap.set.name,
        snap.desired,
        snap.desired - len(broken),
        len(broken),
        broken,
        snap.maker,
    )


def each_gang_set(view: ClusterView) -> Iterator[GangSetGroups]:
    """The gang counts of every gang set in `view` (every registered maker whose groups are
    named), in namespace, kind and name order. One going judge (guardhook.cluster.going) is
    shared by every snapshot; a maker whose first snapshot names no groups (an LWS's ordinals) is
    not asked for its other sets."""
    going = Going(view)
    found = []
    ungrouped: set[str] = set()  # makers whose groups are not named: one snapshot says so for all
    for maker, target in all_sets(view):
        if maker.name in ungrouped:
            continue
        snap = maker.snapshot(view, target, going)
        if snap is None:
            continue
        if snap.keys is None:
            ungrouped.add(maker.name)
            continue
        found.append(gang_counts(snap))
    yield from sorted(found, key=lambda g: (g.namespace, g.kind, g.name, g.maker))
