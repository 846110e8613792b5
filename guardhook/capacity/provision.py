"""Could a node autoscaler add the nodes a scale-up lacks? The fewest new nodes per pool.

A cluster autoscaler only adds nodes for Pending pods, so denying a scale-up that an autoscaled
pool could take means the pool never grows. Two kinds of pools are known:

- Karpenter NodePools (`karpenter.sh/v1`, guardhook.cluster.nodepools): its nodes carry the label
  `karpenter.sh/nodepool`; `spec.limits` less what its nodes hold (`status.resources`, else the
  sum of its nodes' allocatable) bounds how many more it may launch;
- configured pools (cluster-autoscaler and others; `autoscaledPools` of group-capacity): a node
  selector marking the pool's nodes and its maximum size.

A new node has the shape of a node the pool already runs (its allocatable, its DRA devices, its
labels but the hostname, its taints but cordon / not-ready ones), as Karpenter and
cluster-autoscaler's node-group templates build it. Each distinct shape among the pool's nodes is
tried. A pool that runs no node has an unknown shape: for a NodePool, whether its requirements
and taints admit the templates is judged, and the answer says the shape is unknown.

For a known shape the answer is exact within the solver's model: the least n ≤ room such that the
groups fit on today's free capacity plus n empty nodes of that shape (the count of groups that fit
never falls as nodes are added, so a binary search finds n). Exclusive topology is judged only
on `kubernetes.io/hostname` (each new node is a new domain); for other keys a new node's domain
is unknown and the pool is not counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from guardhook.capacity.index import NOT_READY_KEYS, UNSCHEDULABLE_TAINT, CapacityIndex
from guardhook.capacity.shapes import PodShape
from guardhook.capacity.solver import (
    Capacity,
    GroupDemand,
    Problem,
    free_domains_that_fit,
    max_groups,
    prepare,
)
from guardhook.cluster.model import NodeRecord, Taint
from guardhook.cluster.nodepools import NODEPOOL_LABEL, NodePoolRecord
from guardhook.cluster.view.store import ClusterView

HOSTNAME_LABEL = "kubernetes.io/hostname"
NODES_LIMIT = "nodes"
"""A limit on the number of nodes (Karpenter `spec.limits.nodes`; configured pools' maxNodes)."""


@dataclass(frozen=True)
class Pool:
    """An autoscaled pool: `title` ("NodePool gpu-h100", "autoscaled pool gpu-a"), how its nodes
    are recognised (`selector`: label → value), `max_nodes` (configured pools) or the Karpenter
    NodePool `nodepool` (limits, requirements, taints)."""

    title: str
    selector: Mapping[str, str]
    max_nodes: int | None = None
    nodepool: NodePoolRecord | None = None


@dataclass(frozen=True)
class Provision:
    """A pool's answer: `nodes_needed` new nodes make every group fit (None: no count up to
    `room` does, or the shape is unknown); `room`: how many it may still add (None: unbounded);
    `shape_unknown`: the pool runs no node; `why`: a short reason when it does not help, or what
    could not be judged."""

    pool: Pool
    nodes_needed: int | None
    room: int | None
    shape_unknown: bool = False
    why: str = ""
    possible: bool = False
    """Shape unknown, but nothing known rules the pool out (it may add nodes that take the groups)."""

    @property
    def helps(self) -> bool:
        return self.nodes_needed is not None


def pools_of(view: ClusterView, configured: Iterable[Mapping[str, object]]) -> list[Pool]:
    """The Karpenter NodePools in `view` and the configured pools (entries `{name, nodeSelector,
    maxNodes}`, validated by the policy's configuration)."""
    pools = [Pool(f"NodePool {p.name}", {NODEPOOL_LABEL: p.name}, nodepool=p) for p in view.node_pools()]
    for entry in configured:
        selector = entry.get("nodeSelector")
        max_nodes = entry.get("maxNodes")
        pools.append(
            Pool(
                f"autoscaled pool {entry.get('name')}",
                {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else {},
                max_nodes=max_nodes if isinstance(max_nodes, int) else None,
            )
        )
    return pools


def provision(
    index: CapacityIndex, view: ClusterView, demand: GroupDemand, pools: Iterable[Pool]
) -> list[Provision]:
    """Each pool's answer for `demand` (see the module docstring). Takes the index's lock."""
    with index.lock:
        problem = prepare(index, demand)
        return [_pool_answer(index, view, demand, problem, pool) for pool in pools]


def _pool_answer(
    index: CapacityIndex, view: ClusterView, demand: GroupDemand, problem: Problem, pool: Pool
) -> Provision:
    members = [
        node for node in view.nodes() if all(node.labels.get(k) == v for k, v in pool.selector.items())
    ]
    if not members:
        return _unknown_shape(demand, pool)
    if demand.exclusive_key and demand.exclusive_key != HOSTNAME_LABEL:
        return Provision(pool, None, None, why=f"a new node's {demand.exclusive_key} domain is unknown")
    answers = [
        _fewest_nodes(index, demand, problem, pool, prototype, _room(pool, prototype, members))
        for prototype in _distinct_shapes(members)
    ]
    helping = [a for a in answers if a.helps]
    return min(helping, key=lambda a: a.nodes_needed or 0) if helping else answers[0]


def _distinct_shapes(members: list[NodeRecord], limit: int = 3) -> list[NodeRecord]:
    """Up to `limit` members of distinct allocatable / taints, healthy ones first."""
    healthy = sorted(members, key=lambda n: (n.unschedulable, _fresh_taints(n) != n.taints, n.name))
    seen: set[tuple[object, ...]] = set()
    shapes = []
    for node in healthy:
        key = (tuple(sorted(node.allocatable.items())), _fresh_taints(node))
        if key not in seen:
            seen.add(key)
            shapes.append(node)
    return shapes[:limit]


def _fresh_taints(node: NodeRecord) -> tuple[Taint, ...]:
    """A new node's taints: the prototype's, less a cordon and the lifecycle controller's ones."""
    return tuple(t for t in node.taints if t.key != UNSCHEDULABLE_TAINT.key and t.key not in NOT_READY_KEYS)


def _fresh_labels(node: NodeRecord) -> dict[str, str]:
    return {k: v for k, v in node.labels.items() if k != HOSTNAME_LABEL}


def _room(pool: Pool, prototype: NodeRecord, members: list[NodeRecord]) -> int | None:
    """How many more nodes of `prototype`'s shape the pool may add (None: no bound known)."""
    if pool.max_nodes is not None:
        return max(0, pool.max_nodes - len(members))
    nodepool = pool.nodepool
    if nodepool is None or not nodepool.limits:
        return None
    room: int | None = None
    for resource, limit in nodepool.limits.items():
        if resource == NODES_LIMIT:
            used, per_node = len(members), 1
        else:
            used = (
                nodepool.used.get(resource, 0)
                if nodepool.has_status
                else sum(n.allocatable.get(resource, 0) for n in members)
            )
            per_node = prototype.allocatable.get(resource, 0)
        if per_node <= 0:
            continue
        fits = max(0, math.floor((limit - used) / per_node))
        room = fits if room is None else min(room, fits)
    return room


def _fewest_nodes(
    index: CapacityIndex,
    demand: GroupDemand,
    problem: Problem,
    pool: Pool,
    prototype: NodeRecord,
    room: int | None,
) -> Provision:
    labels, taints = _fresh_labels(prototype), _fresh_taints(prototype)
    leader_ok = demand.leader.selects(labels) and demand.leader.tolerates_all(taints)
    worker_ok = demand.worker.selects(labels) and demand.worker.tolerates_all(taints)
    if not (leader_ok or worker_ok) or (demand.size == 1 and not leader_ok):
        return Provision(pool, None, room, why=_refusal(demand, labels, taints))
    row = index.row_of(prototype.name)
    fresh = index.fresh_free(problem.resources, row) if row is not None else None
    if fresh is None:
        return Provision(pool, None, room, why="its nodes are not in the capacity index")
    ceiling = demand.count * demand.size if room is None else min(room, demand.count * demand.size)
    if ceiling <= 0:
        return Provision(pool, None, room, why="its limits allow no more nodes")

    def fits(n: int) -> int:
        return _fits_with(index, demand, problem, fresh, leader_ok, worker_ok, n)

    most = fits(ceiling)
    if most < demand.count:
        limited = room is not None and room <= demand.count * demand.size
        head = f"its limits allow {room} more nodes, and" if limited else "even"
        plural = "" if ceiling == 1 else "s"
        why = f"{head} {ceiling} new node{plural} would take {most} of the {demand.count} groups"
        return Provision(pool, None, room, why=why)
    low, high = 1, ceiling
    while low < high:
        middle = (low + high) // 2
        if fits(middle) >= demand.count:
            high = middle
        else:
            low = middle + 1
    return Provision(pool, low, room)


def _fits_with(
    index: CapacityIndex,
    demand: GroupDemand,
    problem: Problem,
    fresh: np.ndarray,
    leader_ok: bool,
    worker_ok: bool,
    n: int,
) -> int:
    """Groups that fit on today's free capacity plus `n` empty nodes of row vector `fresh`."""
    cap = problem.cap
    grown = Capacity(
        np.vstack([cap.free, np.tile(fresh, (n, 1))]),
        cap.leader,
        cap.worker,
        np.concatenate([cap.leader_ok, np.full(n, leader_ok)]),
        np.concatenate([cap.worker_ok, np.full(n, worker_ok)]),
    )
    if demand.exclusive_key:
        key = demand.exclusive_key
        count = index.label_value_count(key)
        domain = np.concatenate([index.label_column(key), np.arange(count, count + n, dtype=np.int32)])
        taken = np.zeros(count + n, dtype=bool)
        column = index.label_column(key)
        taken[column[problem.taken_rows & (column >= 0)]] = True
        return min(demand.count, free_domains_that_fit(grown, demand.size, domain, count + n, taken))
    return max_groups(grown, demand.size, demand.count)


def _refusal(demand: GroupDemand, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> str:
    for shape in (demand.leader, demand.worker):
        untolerated = [t for t in taints if not shape.tolerates_all((t,))]
        if untolerated:
            taint = untolerated[0]
            return f"its nodes' taint {taint.key}={taint.value}:{taint.effect} is not tolerated"
        if not shape.selects(labels):
            return "its nodes do not match the templates' nodeSelector / node affinity"
    return "its nodes do not take the templates"


def _unknown_shape(demand: GroupDemand, pool: Pool) -> Provision:
    """A pool that runs no node: a NodePool's requirements and taints are judged against the
    templates; a configured pool is not (nothing is known of its nodes but its maximum)."""
    unknown = "it runs no node, so the shape of its nodes is unknown"
    nodepool = pool.nodepool
    if nodepool is None:
        possible = (pool.max_nodes or 0) > 0
        return Provision(pool, None, pool.max_nodes, shape_unknown=True, why=unknown, possible=possible)
    for shape in (demand.leader, demand.worker):
        if not shape.tolerates_all(nodepool.taints):
            return Provision(pool, None, None, True, why="its taints are not tolerated by the templates")
        if not _requirements_admit(nodepool, shape):
            return Provision(
                pool, None, None, True, why="its requirements exclude the templates' nodeSelector"
            )
    room = nodepool.limits.get(NODES_LIMIT)
    return Provision(pool, None, room, shape_unknown=True, why=unknown, possible=True)


def _requirements_admit(nodepool: NodePoolRecord, shape: PodShape) -> bool:
    """Whether a node the NodePool may launch can carry every nodeSelector label of `shape` (node
    affinity terms are not judged here)."""
    requirements = {key: (op, values) for key, op, values in nodepool.requirements}
    for key, value in shape.node_selector:
        if nodepool.labels.get(key) == value:
            continue
        if key not in requirements:
            return False
        op, values = requirements[key]
        if (
            (op == "In" and value not in values)
            or (op == "NotIn" and value in values)
            or op == "DoesNotExist"
        ):
            return False
    return True


def describe(provision_: Provision) -> str:
    """`needs 4 new nodes from NodePool gpu-h100; limits allow 6` / why a pool does not help."""
    pool = provision_.pool.title
    if provision_.helps:
        n = provision_.nodes_needed
        allow = "no limit set" if provision_.room is None else f"limits allow {provision_.room}"
        return f"needs {n} new node{'' if n == 1 else 's'} from {pool}; {allow}"
    return f"{pool}: {provision_.why}"
