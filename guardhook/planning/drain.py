"""`drain-plan`: what draining nodes does to each LeaderWorkerSet, judged in groups.

- The groups that lose a pod on the drained nodes, and the groups already broken.
- The evictions `group-eviction` would answer 429 if every node were drained at once
  (guardhook.planning.evictions, the policy's own budget and PDB rules).
- Waves: nodes are taken in the order given, each into the first wave it can join without a 429.
  The first wave starts from the view as it is (groups already broken use up budget); every later
  wave starts once the groups broken before it are whole again, so it has the whole budget. A node
  that breaks more groups than the budget allows on its own gets a wave of its own, and the
  evictions it must retry are listed (`kubectl drain` retries 429s). A node with a pod that no
  eviction can ever take (budget 0, or a PDB that allows no disruption with every group whole) is
  blocked: no wave drains it.
- After the drain: can each lost group be rebuilt (guardhook.planning.rebuild)? Lost are the groups
  losing a pod on the drained nodes and every group already broken that has a pod, of any LWS (they
  compete for the same free capacity); groups with no live pod are a note (PodlessGroups).
- Workload API gangs (`disruptionMode: all` PodGroups, guardhook.groups.podgroup) are evicted in
  the waves under their own budget per set, as group-eviction judges them; per set the plan lists
  the PodGroups losing a pod and those already broken, and whether each can be placed whole again
  after the LWS rebuilds (guardhook.planning.rebuild: a gang schedules all or nothing).
- Which of the nodes are draining already (guardhook.cluster.going: cordoned, or an autoscaler's
  drain taint such as Karpenter's `karpenter.sh/disrupted` or cluster-autoscaler's
  `ToBeDeletedByClusterAutoscaler`); with no nodes given, the plan is for exactly those. Groups a
  NoExecute taint already dooms count as broken, as every budget counts them.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from guardhook.budget import SetReader, budget_of, default_budget, min_budget
from guardhook.cluster.coverage import evictions_guarded, unguarded_sentence, unreadable_annotations
from guardhook.cluster.going import DRAIN_CONDITIONS, StaleCondition, draining_nodes, stale_in_view
from guardhook.cluster.lws import LWS_KIND
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import BrokenGroups, SetRef, all_sets, each_gang_set, group_size, resolve
from guardhook.groups.keys import GroupKey, key_order
from guardhook.groups.stuck import StuckGroup, stuck_after, stuck_groups
from guardhook.planning.evictions import PlannedGroup, Refusal, evict_in_turn, planned
from guardhook.planning.rebuild import Rebuild, rebuild_everything
from guardhook.wire import KubeObject

GROUPS_LISTED = 1000
"""A plan names every broken group with pods but at most this many with none per LWS (an LWS may
have 2^31 - 1 of them); `brokenNotListed` counts the rest."""


class UnknownNodeError(ValueError):
    """A node to drain is not in the cluster view."""


@dataclass
class Wave:
    """Nodes drained together; the whole groups their evictions break; the evictions retried
    within the wave (a node that alone exceeds the budget); the groups that must be whole again
    before the wave starts (`waits_for`, naming at most GROUPS_LISTED broken groups with no pod per
    LWS; `waits_for_not_listed` counts the rest)."""

    nodes: list[str]
    groups: list[PlannedGroup] = field(default_factory=list)
    retried: list[Refusal] = field(default_factory=list)
    waits_for: list[PlannedGroup] = field(default_factory=list)
    healed: bool = False
    waits_for_not_listed: int = 0

    def as_dict(self) -> dict[str, Any]:
        extra = {"waitsForNotListed": self.waits_for_not_listed} if self.waits_for_not_listed else {}
        return {
            "nodes": self.nodes,
            "groups": [g.as_dict() for g in self.groups],
            "retried": [r.as_dict() for r in self.retried],
            "waitsFor": [g.as_dict() for g in self.waits_for],
            **extra,
        }


@dataclass(frozen=True)
class LwsDrain:
    """One LeaderWorkerSet under the drain (one that loses a pod on the drained nodes or has a
    broken group, as `audit` counts BROKEN: a group with no pod too): its group budget, the groups
    that lose a pod on the drained nodes (`losing`), those already broken, how many groups are
    `lost` in all (the union, less the broken groups with no pod: PodlessGroups) and how many of
    them can be rebuilt, and what the rest lack (`short`)."""

    namespace: str
    name: str
    budget: int
    losing: tuple[GroupKey, ...]
    broken: tuple[GroupKey, ...]
    lost: int
    rebuildable: int
    short: str
    broken_not_listed: int = 0
    """Broken groups with no pods left out of `broken` (an LWS may have 2^31 - 1 of them)."""
    evictions_guarded: bool | None = None
    """Whether its namespace's evictions reach guardhook (coverage.evictions_guarded; None: the
    objects hold no such Namespace). False: no 429 of this plan holds for it."""
    warnings: tuple[str, ...] = ()
    """Why this plan may not hold for the LWS: an unguarded namespace, an unreadable annotation."""

    @property
    def broken_count(self) -> int:
        """Every broken group, named or not: `audit`'s BROKEN (desired - whole)."""
        return len(self.broken) + self.broken_not_listed

    def as_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"brokenNotListed": self.broken_not_listed} if self.broken_not_listed else {}
        extra["evictionsGuarded"] = self.evictions_guarded
        extra["warnings"] = list(self.warnings)
        return {
            "namespace": self.namespace,
            "name": self.name,
            "budget": self.budget,
            "losing": list(self.losing),
            "broken": list(self.broken),
            "lost": self.lost,
            "rebuildable": self.rebuildable,
            "short": self.short,
            **extra,
        }


@dataclass(frozen=True)
class GangDrain:
    """One set of Workload API gangs (`disruptionMode: all` PodGroups; its Workload, else their
    common controller owner) under the drain: its budget, the PodGroups that lose a pod on the
    drained nodes and those already broken, by name; how many gangs are `lost` (the union, those
    with pods to read a shape from) and how many of them fit whole again (`rebuildable`) on what is
    left, and what the rest lack (`short`). Whoever made the gang recreates it, not guardhook: the
    plan says whether the cluster has room for it."""

    namespace: str
    kind: str
    name: str
    budget: int
    losing: tuple[str, ...]
    broken: tuple[str, ...]
    lost: int = 0
    rebuildable: int = 0
    short: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "kind": self.kind,
            "name": self.name,
            "budget": self.budget,
            "losing": list(self.losing),
            "broken": list(self.broken),
            "lost": self.lost,
            "rebuildable": self.rebuildable,
            "short": self.short,
        }


@dataclass(frozen=True)
class PodlessGroups:
    """The groups of one LWS that have no live pod while its `spec.replicas` asks for them (`count`;
    `groups` names the first GROUPS_LISTED of them, none for a Hash LWS, whose groups with no pod
    have no key; `no_pod`: the LWS has no live pod at all). `audit` and the budget count them broken,
    but nothing made their pods yet (no LWS controller running, a quota, an admission refusal; a
    group with no room has Pending pods), so no drain loses them and no room after it makes them:
    the plan leaves them out of the rebuild and its exit code, and says so in a note."""

    namespace: str
    name: str
    count: int
    groups: tuple[GroupKey, ...]
    no_pod: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "count": self.count,
            "groups": list(self.groups),
            "noPod": self.no_pod,
        }


@dataclass(frozen=True)
class DrainPlan:
    """The whole answer. `ok`: every lost group and gang can be rebuilt and no node is blocked."""

    nodes: tuple[str, ...]
    waves: tuple[Wave, ...]
    blocked: tuple[str, ...]
    at_once: tuple[Refusal, ...]
    lws: tuple[LwsDrain, ...]
    draining: Mapping[str, str] = field(default_factory=dict)
    """The planned nodes already draining, and why (guardhook.cluster.going.draining)."""
    gangs: tuple[GangDrain, ...] = ()
    """The gang sets that lose a pod on the nodes or have a broken gang, by namespace, kind, name."""
    podless: tuple[PodlessGroups, ...] = ()
    """Per LWS, by namespace and name, its groups with no live pod: left out of the rebuild."""
    stalled: tuple[int, ...] = ()
    """The waves (numbered from 1) that wait for a group with no live pod: nothing makes it whole,
    so the webhook refuses their evictions for good and they never start."""
    stale: tuple[StaleCondition, ...] = ()
    """Maintenance conditions left True after the maintenance, cluster-wide: ignored in the plan
    (guardhook.cluster.going.stale_conditions)."""
    stuck: tuple[StuckGroup, ...] = ()
    """Groups down for good (guardhook.groups.stuck), cluster-wide: each spends its set's budget
    until someone acts, so the waves of that set wait on it."""

    @property
    def ok(self) -> bool:
        rebuilt = [(item.lost, item.rebuildable) for item in self.lws]
        rebuilt += [(item.lost, item.rebuildable) for item in self.gangs]
        return not self.blocked and not self.stalled and all(fits >= lost for lost, fits in rebuilt)

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes),
            "waves": [w.as_dict() for w in self.waves],
            "blocked": list(self.blocked),
            "refusedAtOnce": [r.as_dict() for r in self.at_once],
            "lws": [item.as_dict() for item in self.lws],
            "draining": dict(self.draining),
            "gangs": [item.as_dict() for item in self.gangs],
            "podless": [item.as_dict() for item in self.podless],
            "stalled": list(self.stalled),
            "staleConditions": [item.as_dict() for item in self.stale],
            "stuckGroups": [item.as_dict() for item in self.stuck],
            "rebuildable": self.ok,
        }


def plan_drain(
    objects: Sequence[KubeObject],
    nodes: Sequence[str] | None,
    params: Mapping[str, Any],
    drain_taint_keys: Sequence[str] = (),
    drain_conditions: Sequence[str] | None = None,
) -> DrainPlan:
    """Plan draining `nodes` (names, in the order to try them; None: every node already draining,
    by name) of the cluster `objects`, with group-eviction's `params`; `drain_taint_keys` are the
    configured drain taints beyond the known ones, `drain_conditions` the node lifecycle condition
    types that make a node draining (None: guardhook.cluster.going.DRAIN_CONDITIONS). Raises
    UnknownNodeError for a node the objects do not hold."""
    view = view_from_objects(objects, source="drain plan")
    conditions = DRAIN_CONDITIONS if drain_conditions is None else drain_conditions
    already = draining_nodes(view, drain_taint_keys, conditions)
    order = list(dict.fromkeys(already if nodes is None else nodes))
    unknown = [n for n in order if view.node(n) is None]
    if unknown:
        raise UnknownNodeError(f"unknown node{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    reader = SetReader(view, default_budget(params), min_budget(params))
    at_once = evict_in_turn(view, _pods_on(view, order), params, reader=reader)
    waves, blocked = _waves(view, order, params, reader)
    losing, broken, budgets = _groups(view, order, reader, every_lws=True)
    podless = _podless(broken)
    # BrokenGroups, not sets: an LWS may have 2^31 - 1 groups with no pods, counted, not listed.
    # Only groups with pods are rebuilt (PodlessGroups says why).
    lost = {key: broken[key].with_pods().with_groups(losing.get(key, ()), "loses a pod") for key in broken}
    gangs = _gang_sets(view, order, reader)
    rebuilds = rebuild_everything(objects, order, lost, _lost_gangs(view, gangs), view)
    rebuilt = rebuilds.lws
    lws = tuple(
        LwsDrain(
            namespace=key.namespace,
            name=key.name,
            budget=budgets[key],
            losing=tuple(sorted(losing.get(key, ()), key=key_order)),
            broken=tuple(broken[key].shown(GROUPS_LISTED)),
            broken_not_listed=len(broken[key]) - len(broken[key].shown(GROUPS_LISTED)),
            lost=rebuilt[key].lost if key in rebuilt else 0,
            rebuildable=rebuilt[key].rebuildable if key in rebuilt else 0,
            short=rebuilt[key].short if key in rebuilt else "",
            evictions_guarded=evictions_guarded(view, key.namespace),
            warnings=_warnings(view, key, params),
        )
        for key in sorted(lost)
        # one rule with audit: an LWS with a broken group is listed, even one with no pod to rebuild
        if key in rebuilt or len(broken[key])
    )
    draining = {node: already[node] for node in order if node in already}
    gangs = tuple(_with_rebuild(gang, rebuilds.gangs.get(_set_key(gang))) for gang in gangs)
    stalled = tuple(
        number for number, wave in enumerate(waves, start=1) if _waits_for_podless(wave, broken, budgets)
    )
    return DrainPlan(
        tuple(order),
        tuple(waves),
        tuple(blocked),
        tuple(at_once.refused),
        lws,
        draining,
        gangs,
        podless,
        stalled,
        tuple(stale_in_view(view, drain_taint_keys)),
        tuple(stuck_groups(view, time.time(), stuck_after(params))),
    )


def _waits_for_podless(
    wave: Wave, broken: Mapping[SetRef, BrokenGroups], budgets: Mapping[SetRef, int]
) -> bool:
    """Whether `wave` breaks more groups of an LWS than its budget leaves beside the groups with
    no live pod (never made, or every pod gone; a Hash LWS's have no key to name them): nothing
    makes those whole, so the webhook refuses the wave's evictions until they are made."""
    breaking = Counter(
        SetRef(group.namespace, LWS_KIND, group.lws) for group in wave.groups if not group.kind
    )
    return any(
        key in broken and broken[key].empty_count and broken[key].empty_count + count > budgets.get(key, 1)
        for key, count in breaking.items()
    )


def _podless(broken: Mapping[SetRef, BrokenGroups]) -> tuple[PodlessGroups, ...]:
    """Every LWS's groups with no live pod (PodlessGroups), by namespace and name."""
    return tuple(
        PodlessGroups(
            key.namespace,
            key.name,
            groups.empty_count,
            tuple(itertools.islice(groups.empty_indexes(), GROUPS_LISTED)),
            no_pod=not groups.populated,
        )
        for key, groups in sorted(broken.items())
        if groups.empty_count
    )


def _lost_gangs(view: ClusterView, gangs: Sequence[GangDrain]) -> dict[SetRef, dict[str, int]]:
    """Per gang set, its gangs losing a pod or broken -> the gang's size, as its maker says it
    (guardhook.groups.group_size; a gang the view cannot size is left out)."""
    lost: dict[SetRef, dict[str, int]] = {}
    for gang in gangs:
        target = _set_key(gang)
        sizes = lost.setdefault(target, {})
        for name in {*gang.losing, *gang.broken}:
            size = group_size(view, target, name)
            if size is not None:
                sizes[name] = size
    return lost


def _set_key(gang: GangDrain) -> SetRef:
    return SetRef(gang.namespace, gang.kind, gang.name)


def _with_rebuild(gang: GangDrain, rebuilt: Rebuild | None) -> GangDrain:
    if rebuilt is None:
        return gang
    return replace(gang, lost=rebuilt.lost, rebuildable=rebuilt.rebuildable, short=rebuilt.short)


def _gang_sets(view: ClusterView, nodes: Sequence[str], reader: SetReader) -> tuple[GangDrain, ...]:
    """Per gang set (any maker's but an LWS: Workload API, Grove, JobSet) with a group losing a
    pod on `nodes`: its budget, those groups and the groups already broken, as group-eviction's
    budget reads them (the view alone: a plan consults no ledger)."""
    found: dict[SetRef, tuple[int, set[str], tuple[str, ...]]] = {}
    for pod in _pods_on(view, nodes):
        if pod.terminal:
            continue
        gang = reader.disruption(pod)
        if gang is None or gang.set.kind == LWS_KIND:
            continue
        if gang.set not in found:
            found[gang.set] = (gang.budget, set(), tuple(sorted(gang.broken_in_view)))
        found[gang.set][1].add(gang.group)
    return tuple(
        GangDrain(s.namespace, s.kind, s.name, budget, tuple(sorted(losing)), broken)
        for s, (budget, losing, broken) in sorted(
            found.items(), key=lambda i: (i[0].namespace, i[0].kind, i[0].name)
        )
        if losing or broken
    )


def _warnings(view: ClusterView, key: SetRef, params: Mapping[str, Any]) -> tuple[str, ...]:
    """Why the plan may not hold for LWS `key`: its namespace does not guard evictions (the plan's
    429s are then never answered), or a guardhook annotation is unreadable (a default is used)."""
    found = []
    if evictions_guarded(view, key.namespace) is False:
        found.append(unguarded_sentence(key.namespace) + "; the 429s predicted for its pods do not hold")
    lws = view.lws(key.namespace, key.name)
    if lws is not None:
        found += [u.sentence() for u in unreadable_annotations(lws, int(params.get("maxDisruptedGroups", 1)))]
    return tuple(found)


def _pods_on(view: ClusterView, nodes: Sequence[str]) -> list[PodRecord]:
    """Pods bound to `nodes`, node by node in order, by name within a node (a drain's order)."""
    return [pod for node in nodes for pod in sorted(view.pods_on_node(node), key=lambda p: p.name)]


def _waves(
    view: ClusterView, nodes: Sequence[str], params: Mapping[str, Any], reader: SetReader
) -> tuple[list[Wave], list[str]]:
    waves: list[Wave] = []
    blocked: list[str] = []
    for node in nodes:
        if any(_fits(view, wave, node, params, reader) for wave in waves):
            continue
        first = not waves
        alone = Wave([node], healed=not first)
        outcome = evict_in_turn(view, _pods_on(view, [node]), params, alone.healed, reader)
        if outcome.refused and first:
            healed = evict_in_turn(view, _pods_on(view, [node]), params, True, reader)
            if not healed.refused:  # the groups broken now use up the budget: wait for them
                waves.append(Wave([]))
                alone.healed, outcome = True, healed
        if outcome.refused and _never_evicted(view, node, params, reader):
            blocked.append(node)
            continue
        alone.groups, alone.retried = outcome.broken, outcome.refused
        waves.append(alone)
    waves = [wave for wave in waves if wave.nodes]
    _set_waits(view, waves, reader)
    return waves, blocked


def _fits(view: ClusterView, wave: Wave, node: str, params: Mapping[str, Any], reader: SetReader) -> bool:
    """Add `node` to `wave` when the wave's evictions then still meet no 429."""
    if wave.retried:
        return False
    outcome = evict_in_turn(view, _pods_on(view, [*wave.nodes, node]), params, wave.healed, reader)
    if outcome.refused:
        return False
    wave.nodes.append(node)
    wave.groups = outcome.broken
    return True


def _never_evicted(view: ClusterView, node: str, params: Mapping[str, Any], reader: SetReader) -> bool:
    """Some pod on `node` is refused even alone with every group whole."""
    return any(evict_in_turn(view, [pod], params, True, reader).refused for pod in view.pods_on_node(node))


def _set_waits(view: ClusterView, waves: list[Wave], reader: SetReader) -> None:
    """Each later wave waits for the groups of the LWSs it touches that are broken before it (and
    counts those of them a listing does not name)."""
    listed, not_listed = _all_broken(view, reader)
    broken_now = {g for pods in listed.values() for g in pods}
    before: set[PlannedGroup] = set()
    for wave in waves:
        if wave.healed:
            touched = {(g.namespace, g.kind, g.lws) for g in wave.groups} | {
                (r.namespace, *_set_of(view, r, reader)) for r in wave.retried
            }
            wait = before | broken_now
            waits = (g for g in wait if (g.namespace, g.kind, g.lws) in touched)
            wave.waits_for = sorted(waits, key=lambda g: (g.namespace, g.kind, g.lws, key_order(g.group)))
            wave.waits_for_not_listed = sum(not_listed.get(key, 0) for key in touched)
        before |= set(wave.groups)


def _set_of(view: ClusterView, refusal: Refusal, reader: SetReader) -> tuple[str, str]:
    """(kind, name) of the refused pod's set as PlannedGroup spells it: ("", LWS name) for an LWS
    member, (set kind, set name) for a gang member, ("", "") for neither."""
    pod = view.pod(refusal.namespace, refusal.pod)
    ref = resolve(view, pod) if pod is not None else None
    if ref is None:
        return ("", "")
    found = planned(ref.set, ref.key)
    return (found.kind, found.lws)


def _all_broken(
    view: ClusterView, reader: SetReader
) -> tuple[dict[SetRef, set[PlannedGroup]], dict[tuple[str, str, str], int]]:
    """The broken groups of every LWS and gang set, as far as a listing names them
    (BrokenGroups.shown), and per LWS (namespace, "", name) how many it does not name."""
    _, broken, _ = _groups(view, [], reader, every_lws=True)
    found = {
        key: {PlannedGroup(key.namespace, key.name, g) for g in groups.shown(GROUPS_LISTED)}
        for key, groups in broken.items()
    }
    not_listed = {
        (key.namespace, "", key.name): len(groups) - len(found[key])
        for key, groups in broken.items()
        if len(groups) > len(found[key])
    }
    for gang in each_gang_set(view):
        found[SetRef(gang.namespace, gang.kind, gang.name)] = {
            PlannedGroup(gang.namespace, gang.name, name, gang.kind) for name in gang.broken_names
        }
    return found, not_listed


def _groups(
    view: ClusterView, nodes: Sequence[str], reader: SetReader, every_lws: bool = False
) -> tuple[dict[SetRef, set[GroupKey]], dict[SetRef, BrokenGroups], dict[SetRef, int]]:
    """Per LWS touched by the drain (or every LWS, with `every_lws`: those with no live pod too,
    whose groups are broken all the same): the groups losing a pod on `nodes`, the groups already
    broken, and the group budget — all as group-eviction reads them (groups beyond spec.replicas
    are not counted)."""
    losing: dict[SetRef, set[GroupKey]] = {}
    broken: dict[SetRef, BrokenGroups] = {}
    budgets: dict[SetRef, int] = {}
    on_nodes = {pod.key for pod in _pods_on(view, nodes)}
    for pod in view.all_pods():
        if pod.terminal or not (every_lws or pod.key in on_nodes):
            continue
        eviction = reader.disruption(pod)
        if eviction is None or eviction.set.kind != LWS_KIND:
            continue
        key = eviction.set
        budgets[key] = eviction.budget
        broken[key] = eviction.broken_in_view  # one snapshot per set (the reader's)
        if pod.key in on_nodes:
            losing.setdefault(key, set()).add(eviction.group)
    if every_lws:
        for maker, found in all_sets(view):
            if found.kind != LWS_KIND or found in broken:
                continue
            snap = maker.snapshot(view, found, reader.going)
            if snap is not None:
                broken[found], budgets[found] = snap.broken, budget_of(snap, reader.default, reader.minimum)
    return losing, broken, budgets
