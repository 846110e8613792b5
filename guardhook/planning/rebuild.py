"""Can the groups a drain loses be rebuilt on what is left? The capacity solver's answer on the
cluster minus the drained nodes.

Modelled as the LWS rebuilds a group (RecreateGroupOnPodRestart): every pod of a lost group is
removed and recreated with it, so the nodes its other pods held free up; the drained nodes take
nothing; groups already broken count as lost (drain-plan leaves out those with no pod). Other
pods on a drained node that a controller other than a DaemonSet owns are recreated elsewhere:
they become pending and claim capacity first. LeaderWorkerSets are rebuilt one after another (by
namespace and name), each seeing the groups rebuilt before it as pending pods, since rebuilds
compete for the same free capacity.

Workload API gangs (`disruptionMode: all` PodGroups, guardhook.groups.podgroup) are re-placed after
them, gang by gang and all or nothing (a gang schedules whole or not at all): every pod of a lost
gang is removed and comes back pending with its own requests, `size` pods in all (the gang's
`minCount` when its pods are fewer; the extra pods take the most common member shape). The solver
places a leader and same-shape workers, so a gang of mixed shapes is asked for its first pod and,
for every other pod, the largest request of each resource among them (never less than it needs).
A gang with no pod left in the objects has no shape to read and is not planned.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from guardhook.capacity import (
    CapacityIndex,
    Fit,
    GroupDemand,
    PodShape,
    fit_groups,
    index_for,
    shape_of_template,
)
from guardhook.capacity.shapes import PODS, format_amount
from guardhook.cluster.lws import LWS_KIND
from guardhook.cluster.model import as_dict, metadata
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import PODS as PODS_KIND
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import GroupKey, SetRef, recreated_group, resolve_object, resolve_object_alone
from guardhook.wire import KubeObject

RECREATED_OWNERS = ("ReplicaSet", "StatefulSet", "Job", "ReplicationController")
"""Controllers whose pods come back elsewhere when evicted (DaemonSet pods do not)."""


@dataclass(frozen=True)
class Rebuild:
    """One LWS after the drain: `lost` groups, of which `rebuildable` fit again; `short` says what
    the rest lack (empty when all fit)."""

    lost: int
    rebuildable: int
    short: str


LostGangs = Mapping[SetRef, Mapping[GroupKey, int]]
"""Per gang set, its lost gangs: group key -> the gang's size (guardhook.groups.group_size)."""

GangPods = Mapping[tuple[SetRef, GroupKey], list[KubeObject]]
"""(gang set, group key) -> the gang's pods that are not terminal."""


@dataclass(frozen=True)
class Rebuilds:
    """`rebuild_everything`'s answer: per LWS with lost groups, and per gang set with lost gangs."""

    lws: dict[SetRef, Rebuild]
    gangs: dict[SetRef, Rebuild] = field(default_factory=dict)


def rebuild_everything(
    objects: Sequence[KubeObject],
    drained: Iterable[str],
    lost: Mapping[SetRef, Collection[GroupKey]],
    lost_gangs: LostGangs,
    view: ClusterView | None = None,
) -> Rebuilds:
    """For each LWS with lost groups (`lost`: group keys per LWS, each collection
    iterating in ascending order, e.g. BrokenGroups; only membership, len() and as many groups as
    fit are read, as there may be 2^31 - 1 of them), how many can be rebuilt on `objects` (the
    cluster's, any kinds) without the `drained` nodes; then the lost gangs (`lost_gangs`) re-placed
    on what the rebuilt groups leave (module docstring): per gang set, how many of its lost gangs
    that have pods in `objects` fit again, and what the others lack. A gang's pods are found by
    resolving them (guardhook.groups.resolve) against `view`, the view `objects` came from (built
    from them when None), whichever maker made the gang."""
    gone = set(drained)
    gang_pods = _gang_members(view, objects, lost_gangs)
    in_gangs = {_pod_id(pod) for pods in gang_pods.values() for pod in pods}
    after = view_from_objects(_after_drain(objects, gone, lost, in_gangs), source="after drain")
    index = index_for(after)
    answers = _rebuild_lws(after, index, lost)
    gangs = {key: _rebuild_gangs(after, index, key, lost_gangs[key], gang_pods) for key in sorted(lost_gangs)}
    return Rebuilds(answers, {key: answer for key, answer in gangs.items() if answer.lost})


def _rebuild_lws(
    after: ClusterView, index: CapacityIndex, lost: Mapping[SetRef, Collection[GroupKey]]
) -> dict[SetRef, Rebuild]:
    answers: dict[SetRef, Rebuild] = {}
    for lws in sorted(after.all_lws(), key=lambda item: (item.namespace, item.name)):
        target = SetRef(lws.namespace, LWS_KIND, lws.name)
        groups = lost.get(target, ())
        if not groups:
            continue
        demand = GroupDemand(
            leader=shape_of_template(lws.leader_template),
            worker=shape_of_template(lws.worker_template),
            size=max(1, lws.size),
            count=len(groups),
            namespace=lws.namespace,
            exclusive_key=lws.exclusive_topology,
        )
        fit = fit_groups(index, demand)
        short = "" if fit.all_fit else shortfall(fit, index)
        answers[target] = Rebuild(len(groups), fit.fits, short)
        # rebuilt first: later LWSs see them waiting for nodes
        for group in itertools.islice(groups, fit.fits):
            for pod in recreated_group(after, target, group):
                after.upsert(PODS_KIND, pod)
    return answers


def _rebuild_gangs(
    after: ClusterView,
    index: CapacityIndex,
    key: SetRef,
    sizes: Mapping[GroupKey, int],
    gang_pods: GangPods,
) -> Rebuild:
    """Re-place set `key`'s lost gangs one by one, by name; each that fits waits, pending, for
    the next. Gangs with no pods in the objects are left out."""
    lost = fits = 0
    short: list[str] = []
    for name in sorted(sizes):
        pods = gang_pods.get((key, name), [])
        if not pods:
            continue
        lost += 1
        fit = fit_groups(index, gang_demand(key.namespace, pods, sizes[name]))
        if fit.fits:
            fits += 1
            for pod in pods:
                after.upsert(PODS_KIND, _pending(pod))
        else:
            short.append(f"{name}: {shortfall(fit, index)}")
    return Rebuild(lost, fits, "; ".join(short))


def gang_demand(namespace: str, pods: Sequence[KubeObject], size: int) -> GroupDemand:
    """One gang as the solver asks for it: its first pod (by name) as the leader and, for the
    others, one shape with the largest request of each resource among them (module docstring);
    `size` pods in all, never fewer than `pods`."""
    shapes = [shape_of_template(pod) for pod in sorted(pods, key=lambda p: str(metadata(p).get("name")))]
    rest = shapes[1:] or shapes
    worker = rest[0] if len(set(rest)) == 1 else _widest(rest)
    return GroupDemand(
        leader=shapes[0], worker=worker, size=max(size, len(shapes), 1), count=1, namespace=namespace
    )


def _widest(shapes: Sequence[PodShape]) -> PodShape:
    """The most common of `shapes`, asking for the largest request of each resource among all."""
    common = Counter(shapes).most_common(1)[0][0]
    largest: dict[str, int] = {}
    for shape in shapes:
        for name, amount in shape.requests:
            largest[name] = max(largest.get(name, 0), amount)
    return PodShape(
        requests=tuple(sorted(largest.items())),
        node_selector=common.node_selector,
        affinity_terms=common.affinity_terms,
        tolerations=common.tolerations,
    )


def _gang_members(
    view: ClusterView | None, objects: Sequence[KubeObject], lost_gangs: LostGangs
) -> dict[tuple[SetRef, GroupKey], list[KubeObject]]:
    """GangPods of every lost gang: the pods of `objects` that `view` (built from `objects` when
    None) resolves to one of `lost_gangs`."""
    found: dict[tuple[SetRef, GroupKey], list[KubeObject]] = {}
    if not lost_gangs:
        return found
    read = view if view is not None else view_from_objects(objects, source="before drain")
    for obj in objects:
        if obj.get("kind") != "Pod" or as_dict(obj.get("status")).get("phase") in ("Succeeded", "Failed"):
            continue
        ref = resolve_object(read, obj)
        if ref is not None and ref.key in lost_gangs.get(ref.set, {}):
            found.setdefault((ref.set, ref.key), []).append(obj)
    return found


def _pending(pod: KubeObject) -> KubeObject:
    """`pod` recreated, not yet bound."""
    moved = copy.deepcopy(pod)
    as_dict(moved.get("spec")).pop("nodeName", None)
    moved["status"] = {"phase": "Pending"}
    return moved


def _after_drain(
    objects: Sequence[KubeObject],
    gone: set[str],
    lost: Mapping[SetRef, Collection[GroupKey]],
    in_gangs: Collection[tuple[str, str]] = frozenset(),
) -> list[KubeObject]:
    kept: list[KubeObject] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node" and metadata(obj).get("name") in gone:
            continue
        if kind == "Pod" and in_gangs and _pod_id(obj) in in_gangs:
            continue  # a lost gang goes whole; rebuild_everything asks for it again
        if kind == "Pod":
            pod = _pod_after_drain(obj, gone, lost)
            if pod is None:
                continue
            obj = pod
        kept.append(obj)
    return kept


def _pod_id(pod: KubeObject) -> tuple[str, str]:
    """(namespace, name) of a pod object."""
    meta = metadata(pod)
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _pod_after_drain(
    pod: KubeObject, gone: set[str], lost: Mapping[SetRef, Collection[GroupKey]]
) -> KubeObject | None:
    member = resolve_object_alone(pod)
    if member is not None and member.set.kind != LWS_KIND:
        member = None  # a gang's pod: re-placed gang by gang (_gang_members)
    if member is not None and member.key in lost.get(member.set, ()):
        return None
    if as_dict(pod.get("spec")).get("nodeName") not in gone:
        return pod
    owners = [as_dict(o) for o in metadata(pod).get("ownerReferences") or []]
    if member is not None or not any(
        o.get("controller") and o.get("kind") in RECREATED_OWNERS for o in owners
    ):
        return None  # evicted for good (or an LWS pod beyond spec.replicas, being scaled away)
    return _pending(pod)


def shortfall(fit: Fit, index: CapacityIndex) -> str:
    """What the groups that do not fit lack, e.g. "short 8 nvidia.com/gpu on 4 nodes": for
    same-shape groups, the pods still without a place, each short of its request of the limiting
    resources; otherwise the limiting resources the solver names. Of the solver's limiting
    resources, those the eligible nodes lack in total are named (a node short of everything, such
    as a CPU node for a GPU pod, would otherwise name every resource)."""
    demand = fit.demand
    if demand.exclusive_key:
        return (
            f"{fit.domains_free_fitting} free domains of node label {demand.exclusive_key} can host a "
            f"whole group, {demand.count} needed"
        )
    if fit.eligible_worker == 0:
        return "no eligible nodes"
    if not fit.limiting:
        return "the groups do not fit beside each other"
    if fit.pod_slots < 0:
        return f"short of {fit.limiting}"
    missing = (demand.count - fit.fits) * demand.size - fit.pod_slots
    requests = demand.worker.request_map
    limiting = [name for name in fit.limiting.split(", ") if name in requests and name != PODS]
    with index.lock:
        eligible = index.eligible(demand.worker)
        totals = index.free(limiting)[eligible].sum(axis=0)
    need = demand.count * demand.size
    scarce = [name for name, total in zip(limiting, totals, strict=True) if total < need * requests[name]]
    amounts = ", ".join(f"{format_amount(name, requests[name])} {name}" for name in scarce or limiting)
    place = "node" if missing == 1 else "nodes"
    return f"short {amounts or fit.limiting} on {missing} {place}"
