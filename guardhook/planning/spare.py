"""Spare groups: how many more whole groups of an LWS fit in free capacity now.

The capacity solver's answer (guardhook.capacity.fit_groups) for the LWS's own leader and worker
shapes, size and exclusive topology, after pending pods claim their share; the `spareGroups`
reserve of `group-capacity` is ignored (this is what that reserve is measured against). The count
stops at SPARE_LIMIT: beyond that a spare is not what an operator watches for, and the exact search
grows with the count asked.
"""

from __future__ import annotations

from collections.abc import Iterator

from guardhook.capacity import GroupDemand, fit_groups, index_for, shape_of_template
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.view.store import ClusterView

SPARE_LIMIT = 64
"""Spare groups are counted up to this many."""


def spare_groups(view: ClusterView, lws: LeaderWorkerSet) -> int:
    """How many more whole groups of `lws` (0..SPARE_LIMIT) fit in `view`'s free capacity now."""
    demand = GroupDemand(
        leader=shape_of_template(lws.leader_template),
        worker=shape_of_template(lws.worker_template),
        size=max(1, lws.size),
        count=SPARE_LIMIT,
        namespace=lws.namespace,
        exclusive_key=lws.exclusive_topology,
    )
    return fit_groups(index_for(view), demand).fits


def spare_by_lws(view: ClusterView) -> dict[tuple[str, str], int]:
    """`spare_groups` of every LWS in `view`, by (namespace, name); empty when the view holds no
    nodes (manifests without a cluster: nothing to count against)."""
    return dict(each_spare(view))


def each_spare(view: ClusterView) -> Iterator[tuple[tuple[str, str], int]]:
    """((namespace, name), `spare_groups`) of each LWS in `view`, computed as it is asked for;
    none when the view holds no nodes."""
    if not view.nodes():
        return
    for lws in view.all_lws():
        yield (lws.namespace, lws.name), spare_groups(view, lws)
