"""`guardhook drain`: carry out `drain-plan`'s plan (guardhook.planning.drain), one whole group at
a time (issue 52).

- Cordon the nodes, then take `drain-plan`'s waves in order. In a wave, every group with a pod on
  the wave's nodes gets its maker's group-level action, never one pod at a time: an LWS group
  (Ordinal, Hash, or served by Kthena) has its restart pod (the leader; Kthena's entry pod) deleted
  with foreground cascade, as the LWS controller restarts a group (lws pod_controller.go
  handleRestartPolicy); a Workload API gang has every pod evicted at once through the Eviction API.
- Before a group is taken, its set must have fewer groups broken than its budget B: those the
  webhook reads broken (one snapshot of the set, guardhook.groups.snapshot) and those the drain
  has taken and not yet seen rebuilt. So a set with B > 1 has up to B groups taken at once, and
  groups of different sets are taken side by side, each set within its own budget. After, the
  drain waits until the group stands whole and Ready on other nodes with its old pods gone, and
  its set is back to the groups broken beside it when it was taken (plus the drain's own still
  rebuilding); only then does that group's place in the budget free up for the next one.
- A group the plan's rebuild room (guardhook.planning.rebuild) has no room for stays in place and
  is named with what would make room, unless `disrupt_without_room`.
- Pods in no group are evicted as `kubectl drain` evicts them: DaemonSet pods ignored, mirror pods
  skipped, pods with emptyDir data only with `delete_emptydir_data`, pods with no controller only
  with `force`; a 429 (a PDB, the webhook) is retried every `retry_seconds` until the timeout.
- The run keeps no state of its own: every step reads the cluster again, so a second run after an
  interruption picks up where the cluster is (nodes cordoned already, groups rebuilt elsewhere
  already, a restart under way waited for, not repeated).

Every request goes through the API server's admission, so the webhook's budget and ledger stay the
one authority; a refusal other than a 429 leaves the group in place, named with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from guardhook.budget import budget_of
from guardhook.cluster.drain_calls import Answer
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import SetRef, SetSnapshot, resolve, snapshot
from guardhook.groups.ref import LWS_HASH, GroupRef
from guardhook.planning.drain import DrainPlan, plan_drain
from guardhook.wire import KubeObject

NO_DRY_RUN, CLIENT, SERVER = "none", "client", "server"
DRY_RUNS = (NO_DRY_RUN, CLIENT, SERVER)
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""A static pod's mirror carries it (kubectl drain skips such pods: the kubelet owns them)."""


class DrainCalls(Protocol):
    """What the drain asks of the API server (guardhook.cluster.drain_calls.KubeDrainCalls)."""

    def objects(self) -> Sequence[KubeObject]: ...

    def cordon(self, node: str, dry_run: bool) -> Answer: ...

    def evict(self, namespace: str, name: str, grace_seconds: int | None, dry_run: bool) -> Answer: ...

    def delete_foreground(
        self, namespace: str, name: str, grace_seconds: int | None, dry_run: bool
    ) -> Answer: ...


@dataclass(frozen=True)
class DrainOptions:
    """How to drain: kubectl drain's flags (grace period None: each pod's own; timeout 0: no
    limit; dry_run one of DRY_RUNS), the group-eviction `params`, the drain taints and conditions
    of worker-delete (for the plan), and how often to look again (`poll_seconds`) and retry a 429
    (`retry_seconds`, kubectl drain's 5 s)."""

    nodes: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    drain_taint_keys: tuple[str, ...] = ()
    drain_conditions: tuple[str, ...] | None = None
    grace_seconds: int | None = None
    timeout_seconds: float = 0.0
    delete_emptydir_data: bool = False
    force: bool = False
    dry_run: str = NO_DRY_RUN
    disrupt_without_room: bool = False
    poll_seconds: float = 2.0
    retry_seconds: float = 5.0


@dataclass(frozen=True)
class Left:
    """Something the drain left in place (`what`: a group, a pod or a node) and why."""

    what: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"what": self.what, "why": self.why}


@dataclass
class DrainResult:
    """What the run did: the groups restarted or evicted whole, the pods evicted, what it left."""

    restarted: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)

    @property
    def drained(self) -> bool:
        return not self.left


Emit = Callable[..., None]
"""`emit(event, **fields)`: one progress event (guardhook.commands.drain prints them)."""


class TimedOut(Exception):
    """The drain's --timeout passed; `args`: what it was waiting for, each named."""


@dataclass(frozen=True)
class _Group:
    """A group the drain takes: its GroupRef (read from a pod on the nodes) and its name for people."""

    ref: GroupRef

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return (self.ref.set.namespace, self.ref.set.kind, self.ref.set.name, self.ref.key)

    @property
    def is_gang(self) -> bool:
        """A gang (a Workload API PodGroup, a Grove replica, a JobSet Job): no rank, no leader to
        restart it by, so the drain evicts its pods."""
        return self.ref.rank.worker is None

    def __str__(self) -> str:
        return self.ref.describe()


@dataclass
class _Taken:
    """A group the drain has acted on and waits for: its pods then (`old`, by uid), how many other
    groups of its set were broken beside the drain's own when it was taken (`before`), and when."""

    group: _Group
    old: set[str]
    before: int
    began: float


class Drain:
    """One run of `guardhook drain` against `calls` (see the module's docstring); `emit` gets the
    progress events, `clock`/`sleep` are time.monotonic/time.sleep unless a test gives its own."""

    def __init__(
        self,
        calls: DrainCalls,
        options: DrainOptions,
        emit: Emit,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.calls = calls
        self.options = options
        self.emit = emit
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.result = DrainResult()
        self.nodes = set(options.nodes)
        self._waits: dict[str, str] = {}

    # ---- the run -------------------------------------------------------------------------------

    @property
    def dry(self) -> bool:
        return self.options.dry_run != NO_DRY_RUN

    def run(self) -> DrainResult:
        """Drain the nodes. Raises guardhook.planning.drain.UnknownNodeError for a node the cluster
        does not hold (before anything is written)."""
        objects = self.calls.objects()
        plan = plan_drain(
            objects,
            self.options.nodes,
            self.options.params,
            self.options.drain_taint_keys,
            self.options.drain_conditions,
        )
        self.emit("start", nodes=list(self.options.nodes), dryRun=self.options.dry_run)
        refused = self._unevictable(objects)
        if refused:  # kubectl drain refuses the whole drain up front, before it cordons
            self.result.left += refused
            for item in refused:
                self.emit("left", what=item.what, why=item.why)
            return self._done()
        view = view_from_objects(objects, source="drain")
        self._cordon(view)
        self.emit(
            "plan",
            waves=len(plan.waves),
            groups=len(_groups_on(view, self.options.nodes)),
            pods=len(_loose_pods(view, self.options.nodes)),
            blocked=list(plan.blocked),
        )
        for node in plan.blocked:
            self._leave(f"node {node}", "an eviction there is refused even with every group whole (budget 0)")
        room = _room(plan, self.options.disrupt_without_room)
        try:
            for number, wave in enumerate(plan.waves, start=1):
                self.emit("wave", wave=number, of=len(plan.waves), nodes=list(wave.nodes))
                self._wave(wave.nodes, room, stalled=number in plan.stalled)
        except TimedOut as exc:
            for what in exc.args:
                self._leave(what, f"--timeout of {self.options.timeout_seconds:g}s passed waiting for it")
        if not self.dry:
            self._remaining()
        return self._done()

    def _remaining(self) -> None:
        """Name every group and pod still on the nodes that nothing above has named yet."""
        named = {item.what for item in self.result.left}
        look = self._look()
        for group in _groups_on(look.view, self.options.nodes):
            if str(group) not in named and any(
                p.node_name in self.nodes and not p.terminating for p in look.pods_of(group)
            ):
                self._leave(str(group), "still on the nodes")
        for pod in _loose_pods(look.view, self.options.nodes):
            if f"pod {pod.namespace}/{pod.name}" not in named:
                self._leave(f"pod {pod.namespace}/{pod.name}", "still on the nodes")

    def _done(self) -> DrainResult:
        self.emit(
            "done",
            drained=self.result.drained,
            restarted=len(self.result.restarted),
            evicted=len(self.result.evicted),
            left=[item.as_dict() for item in self.result.left],
        )
        return self.result

    def _leave(self, what: str, why: str) -> None:
        self.result.left.append(Left(what, why))
        self.emit("left", what=what, why=why)

    def _view(self) -> ClusterView:
        return view_from_objects(self.calls.objects(), source="drain")

    def _look(self) -> _Look:
        return _Look(self._view())

    def _cordon(self, view: ClusterView) -> None:
        for node in self.options.nodes:
            record = view.node(node)
            if record is not None and record.unschedulable:
                self.emit("cordon", node=node, already=True)
                continue
            answer = Answer(200) if self.options.dry_run == CLIENT else self.calls.cordon(node, self.dry)
            if not answer.ok:
                self._leave(f"node {node}", f"cannot cordon it: {answer.message}")
                continue
            self.emit("cordon", node=node, already=False)

    def _wave(self, nodes: Sequence[str], room: Mapping[tuple[str, str, str], _Room], stalled: bool) -> None:
        queue = _groups_on(self._view(), nodes)
        if stalled:
            for group in queue:
                self._leave(str(group), "its wave waits for groups with no pod, which nothing makes whole")
            queue = []
        taken: list[_Taken] = []
        while queue or taken:
            look = self._look()
            taken = self._not_rebuilt(look, taken)
            queue = [group for group in queue if self._try(look, group, room, taken)]
            if queue or taken:
                self._pause(*(str(item) for item in [*(t.group for t in taken), *queue]))
        self._evict_loose(_loose_pods(self._view(), nodes))

    # ---- the groups of a wave --------------------------------------------------------------------

    def _try(
        self,
        look: _Look,
        group: _Group,
        room: Mapping[tuple[str, str, str], _Room],
        taken: list[_Taken],
    ) -> bool:
        """Take `group` if its set's budget has room beside the groups broken now and those the
        drain has taken and not yet seen rebuilt (`taken`, which it joins); True while it must wait."""
        old = look.pods_of(group)
        on_nodes = [p for p in old if p.node_name in self.nodes]
        if not on_nodes:
            self.emit("group", group=str(group), action="none", why="rebuilt elsewhere already")
            return False
        set_room = room.get(group.ident[:3])
        if set_room is not None and not set_room.take(group.ident[3]):
            self._leave(str(group), f"no room to rebuild it elsewhere ({set_room.short or 'no capacity'})")
            return False
        mine = [t.group for t in taken if t.group.ident[:3] == group.ident[:3]]
        beside, budget = _broken_beside(look, group, self._default_budget, mine)
        if budget <= 0:
            self._leave(str(group), "its set's group budget is 0")
            return False
        if beside >= budget and not self.dry:
            self._wait(group, f"{beside} other groups of its set broken, budget {budget}")
            return True
        # A restart under way (a run interrupted after its delete) is waited for, not repeated.
        if not all(p.terminating for p in on_nodes) and not self._act(group, old, look.view):
            return False
        if not self.dry:
            taken.append(_Taken(group, {p.uid for p in old}, beside - len(mine), self.clock()))
        return False

    def _not_rebuilt(self, look: _Look, taken: list[_Taken]) -> list[_Taken]:
        """The groups of `taken` not yet whole and Ready again on other nodes (cordoned nodes take
        no pod), none of their old pods left; the others are reported rebuilt."""
        left = list(taken)
        live = {p.uid for p in look.view.all_pods() if not p.terminal} if taken else set()
        for item in taken:
            others = [t.group for t in left if t is not item and t.group.ident[:3] == item.group.ident[:3]]
            gone = item.old.isdisjoint(live)
            if gone and _rebuilt(look, item.group, self.nodes, item.before, self._default_budget, others):
                self.emit("rebuilt", group=str(item.group), seconds=round(self.clock() - item.began, 1))
                left.remove(item)
            else:
                self._wait(item.group, "rebuilding elsewhere")
        return left

    @property
    def _default_budget(self) -> int:
        return int(self.options.params.get("maxDisruptedGroups", 1))

    def _wait(self, group: _Group, why: str) -> None:
        """A `waiting` event for `group`, once per reason (not on every look)."""
        if self._waits.get(str(group)) != why:
            self._waits[str(group)] = why
            self.emit("waiting", group=str(group), why=why)

    def _act(self, group: _Group, pods: Sequence[PodRecord], view: ClusterView) -> bool:
        """The group-level action on `group` (its live `pods` in `view`); False when a refusal
        leaves the group in place."""
        if group.is_gang:
            pods = [p for p in pods if not p.terminating]
            self.emit("group", group=str(group), action="evict", pods=[p.name for p in pods])
            for pod in pods:
                if not self._send(str(group), pod, self.calls.evict):
                    return False
            self.result.restarted.append(str(group))
            return True
        if not group.ref.restart:
            self._leave(str(group), "no leader pod to restart it by")
            return False
        leader = group.ref.restart[0]
        self.emit("group", group=str(group), action="restart", pod=leader)
        target = view.pod(group.ref.set.namespace, leader)
        if target is None or not self._send(str(group), target, self.calls.delete_foreground):
            if target is None:
                self._leave(str(group), f"its leader pod {leader} is not in the cluster")
            return False
        self.result.restarted.append(str(group))
        return True

    def _send(self, what: str, pod: PodRecord, call: Callable[[str, str, int | None, bool], Answer]) -> bool:
        """One write for `pod`, a 429 retried until it is taken or the timeout; False (and `what`
        left, named with the answer) on any other refusal."""
        if self.options.dry_run == CLIENT:
            return True
        while True:
            answer = call(pod.namespace, pod.name, self.options.grace_seconds, self.dry)
            if answer.ok or answer.gone:
                return True
            if answer.code != 429:
                self._leave(what, f"{pod.namespace}/{pod.name}: {answer.message}")
                return False
            self.emit("retry", pod=f"{pod.namespace}/{pod.name}", why=answer.message)
            self._pause(what, seconds=self.options.retry_seconds)

    # ---- pods in no group ------------------------------------------------------------------------

    def _evict_loose(self, pods: Sequence[PodRecord]) -> None:
        """Evict `pods` (in no group), then wait until every evicted one is gone: side by side, as
        kubectl drain evicts them (k8s.io/kubectl pkg/drain evictPods: a goroutine a pod, each
        evicting and then waiting), not one after another."""
        waiting: dict[str, str] = {}  # uid -> "pod namespace/name"
        for pod in pods:
            name = f"{pod.namespace}/{pod.name}"
            self.emit("pod", pod=name, action="evict")
            if self._send(f"pod {name}", pod, self.calls.evict):
                self.result.evicted.append(name)
                waiting[pod.uid] = f"pod {name}"
        while waiting and not self.dry:
            live = {p.uid for p in self._view().all_pods()}
            waiting = {uid: what for uid, what in waiting.items() if uid in live}
            if waiting:
                self._pause(*waiting.values())

    def _unevictable(self, objects: Iterable[KubeObject]) -> list[Left]:
        """kubectl drain's refusals: pods with emptyDir data (without --delete-emptydir-data) and
        pods no controller manages (without --force), on the nodes."""
        found = []
        for obj in objects:
            if obj.get("kind") != "Pod" or _node(obj) not in self.nodes or _skipped(obj):
                continue
            name = f"{_meta(obj).get('namespace')}/{_meta(obj).get('name')}"
            if not self.options.force and not _controller(obj):
                found.append(Left(f"pod {name}", "no controller manages it (use --force to delete it)"))
            elif not self.options.delete_emptydir_data and _has_emptydir(obj):
                found.append(Left(f"pod {name}", "it has emptyDir data (use --delete-emptydir-data)"))
        return found

    def _pause(self, *what: str, seconds: float | None = None) -> None:
        """Sleep before looking again; TimedOut (naming each of `what`) once --timeout has passed."""
        timeout = self.options.timeout_seconds
        if timeout and self.clock() - self.started > timeout:
            raise TimedOut(*what)
        self.sleep(self.options.poll_seconds if seconds is None else seconds)


@dataclass
class _Room:
    """How many more groups of a set may be taken (the plan's rebuild room) and what it lacks."""

    free: int
    short: str
    taken: set[str] = field(default_factory=set)

    def take(self, key: str) -> bool:
        if key in self.taken:
            return True
        if self.free <= 0:
            return False
        self.free -= 1
        self.taken.add(key)
        return True


def _room(plan: DrainPlan, unlimited: bool) -> dict[tuple[str, str, str], _Room]:
    """Per set short of rebuild room, how many of its losing groups may be taken: the room left
    after the broken groups it must rebuild anyway. Empty with `unlimited` (--disrupt-without-room)."""
    if unlimited:
        return {}
    found: dict[tuple[str, str, str], _Room] = {}
    for item in plan.lws:
        if item.rebuildable < item.lost:
            others = item.lost - len(item.losing)
            found[(item.namespace, "LeaderWorkerSet", item.name)] = _Room(
                max(0, item.rebuildable - others), item.short
            )
    for gang in plan.gangs:
        if gang.rebuildable < gang.lost:
            others = gang.lost - len(gang.losing)
            room = _Room(max(0, gang.rebuildable - others), gang.short)
            found[(gang.namespace, gang.kind, gang.name)] = room
    return found


def _groups_on(view: ClusterView, nodes: Sequence[str]) -> list[_Group]:
    """The groups with a pod on `nodes`, node by node, pod by pod (a drain's order), each once."""
    found: dict[tuple[str, str, str, str], _Group] = {}
    for node in nodes:
        for pod in sorted(view.pods_on_node(node), key=lambda p: p.name):
            ref = None if pod.terminal else resolve(view, pod)
            if ref is not None:
                group = _Group(ref)
                found.setdefault(group.ident, group)
    return list(found.values())


class _Look:
    """One reading of the cluster (`view`), read once however many groups ask: each namespace's
    live pods by group, each set's snapshot."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self._groups: dict[str, dict[tuple[str, str, str, str], list[PodRecord]]] = {}
        self._snapshots: dict[tuple[str, SetRef], SetSnapshot | None] = {}

    def pods_of(self, group: _Group) -> list[PodRecord]:
        """The group's live pods (read through the group model: resolve)."""
        namespace = group.ref.set.namespace
        by_group = self._groups.get(namespace)
        if by_group is None:
            by_group = self._groups[namespace] = {}
            for pod in self.view.pods_in_namespace(namespace):
                if not pod.terminal and (ref := resolve(self.view, pod)) is not None:
                    by_group.setdefault(_Group(ref).ident, []).append(pod)
        return by_group.get(group.ident, [])

    def snapshot(self, group: _Group) -> SetSnapshot | None:
        """One snapshot of the group's set (guardhook.groups.snapshot)."""
        key = (group.ref.maker, group.ref.set)
        if key not in self._snapshots:
            self._snapshots[key] = snapshot(self.view, group.ref)
        return self._snapshots[key]


def _broken_beside(look: _Look, group: _Group, default: int, taken: Sequence[_Group] = ()) -> tuple[int, int]:
    """How many of the set's groups other than `group` count as broken: those the webhook reads
    broken in the view (with no pods ones counted: BrokenGroups) and those of `taken` (the drain's
    own, taken and not yet seen rebuilt) the view does not show broken yet; and the set's budget
    (`default`: maxDisruptedGroups, unless the set says otherwise). A taken Hash group whose pods
    are all gone is counted twice (its key no longer names it): the drain then waits longer, never
    breaks more."""
    snap = look.snapshot(group)
    if snap is None:
        return len([t for t in taken if t.ident != group.ident]), default
    broken = snap.broken
    beside = len(broken) - (group.ref.key in broken)
    extra = sum(1 for t in taken if t.ident != group.ident and t.ref.key not in broken)
    return beside + extra, budget_of(snap, default)


def _broken_reading(look: _Look, group: _Group, default: int) -> tuple[int, bool, int]:
    """How many of the set's groups other than `group` are broken as the webhook reads the view
    (one snapshot of the set, guardhook.groups.snapshot; groups with no pods counted:
    BrokenGroups), whether `group` itself is, and the set's budget (`default`: maxDisruptedGroups,
    unless the set says otherwise; guardhook.budget.budget_of)."""
    snap = look.snapshot(group)
    if snap is None:
        return 0, True, default
    broken = snap.broken
    mine = group.ref.key in broken
    return len(broken) - mine, mine, budget_of(snap, default)


def _rebuilt(
    look: _Look, group: _Group, nodes: set[str], before: int, default: int, taken: Sequence[_Group] = ()
) -> bool:
    """Whether the group stands whole and Ready again on nodes other than the drained ones, and
    its set has no more broken groups than the `before` beside it when it was taken, plus the
    drain's own others of the set (`taken`) not yet seen rebuilt. A Hash group may come back under
    another key: with no pod under its own, the set's count alone says."""
    pods = look.pods_of(group)
    if any(p.node_name in nodes for p in pods):
        return False
    if group.is_gang:  # any maker's gang: whole again in its set's snapshot, as the budget reads it
        snap = look.snapshot(group)
        return snap is not None and group.ref.key in snap.pods and group.ref.key not in snap.broken
    beside, mine, _ = _broken_reading(look, group, default)
    allowed = before + len(taken)
    if not pods and group.ref.maker == LWS_HASH:
        return beside + mine <= allowed
    return bool(pods) and not mine and beside <= allowed


def _loose_pods(view: ClusterView, nodes: Sequence[str]) -> list[PodRecord]:
    """The pods on `nodes` in no group that a drain evicts (not DaemonSet pods, not mirror pods,
    not terminal ones), in a drain's order."""
    found = []
    for node in nodes:
        for pod in sorted(view.pods_on_node(node), key=lambda p: p.name):
            if pod.terminal or pod.terminating or resolve(view, pod) is not None:
                continue
            if MIRROR_ANNOTATION in pod.annotations or any(
                o.controller and o.kind == "DaemonSet" for o in pod.owners
            ):
                continue
            found.append(pod)
    return found


def _meta(obj: KubeObject) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _node(obj: KubeObject) -> str:
    spec = obj.get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, Mapping) else ""


def _skipped(obj: KubeObject) -> bool:
    """DaemonSet pods and mirror pods: kubectl drain leaves them (and so do we)."""
    annotations = _meta(obj).get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return True
    status = obj.get("status")
    if isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed"):
        return True
    return any(o.get("kind") == "DaemonSet" and o.get("controller") for o in _owners(obj))


def _owners(obj: KubeObject) -> list[Mapping[str, Any]]:
    owners = _meta(obj).get("ownerReferences") or []
    return [o for o in owners if isinstance(o, Mapping)]


def _controller(obj: KubeObject) -> bool:
    return any(o.get("controller") for o in _owners(obj))


def _has_emptydir(obj: KubeObject) -> bool:
    spec = obj.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    return any(isinstance(v, Mapping) and "emptyDir" in v for v in volumes or ())
