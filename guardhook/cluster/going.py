"""The group model's two notions of what is already leaving: a *draining* node and a *going* pod.

Draining node: cordoned (`spec.unschedulable`), or carrying a drain taint an autoscaler puts on a
node it is about to empty without cordoning it —
- `karpenter.sh/disrupted` (effect NoSchedule; sigs.k8s.io/karpenter pkg/apis/v1 taints.go
  `DisruptedNoScheduleTaint`, set by its disruption and termination controllers),
- `ToBeDeletedByClusterAutoscaler` (effect NoSchedule, value a Unix time; kubernetes/autoscaler
  cluster-autoscaler/utils/taints `ToBeDeletedTaint`),
- and any key a configuration adds (`worker-delete`'s `drainTaintKeys`).
Any effect of such a key counts. Or carrying, with status True, a node lifecycle condition (KEP-5683,
alpha in 1.37, gate `NodeLifecycleConditions`, kubernetes PR #139993 core/v1 NodeConditionType):
`MaintenancePlanned` (the node is expected to undergo maintenance), `MaintenanceInProgress`,
`DrainInProgress` (the node is actively being drained; `kubectl drain --report-node-conditions`
sets it), `Drained` (it reached the drain criteria of the actor managing its lifecycle),
`GracefulNodeShutdownInProgress` (graceful node shutdown is in progress on it). An admin or a
maintenance controller sets the first four to True and clears them by False or removal (the KEP
leaves clearing them to whoever set them); they neither cordon nor taint the node. The set is
`worker-delete`'s `drainConditions` (default: all five). A worker DELETE on a draining node is a
delete-based drain (policy `worker-delete`), budgeted one group at a time as an eviction is;
`drain-plan` and `audit` name the same nodes. A draining node is a reason to budget what follows,
never a disruption in itself: the condition spends no budget.

Stale condition: one of the four an admin sets (MAINTENANCE_CONDITIONS), left True on a node that
is schedulable (not cordoned), carries no drain taint and no NoExecute taint, and holds a pod
created after the condition's `lastTransitionTime` (DaemonSet and mirror pods aside: they are placed
whatever the node's state). The scheduler has placed work there since, so the maintenance is over
and nobody cleared the condition: it is ignored for judging (the node is not draining by it) and
named by `audit` and `drain-plan` (node, condition, since when). `stale_conditions`.

Going pod: terminating (deletionTimestamp), marked for removal (`DisruptionTarget`/`TerminationTarget`
True, PodRecord.disruption), bound to a node in graceful shutdown (GOING_CONDITIONS:
`GracefulNodeShutdownInProgress` True — the kubelet stops the node's pods itself, asking nobody),
or bound to a node — or holding a device — with a NoExecute taint it does not tolerate forever.
The maintenance conditions do not make a pod going: the evictions and deletes that empty such a
node come through the webhook and are budgeted there, one group at a time; counting the node's
groups broken beforehand would let those evictions through unbudgeted (a drain of two nodes
holding two groups of one LWS took both down under a budget of 1).

The taint eviction controller (pkg/controller/tainteviction, in 1.28
pkg/controller/nodelifecycle/scheduler/taint_manager.go `processPodOnNode`) deletes a pod with no
matching toleration at once, and one whose matching tolerations all carry `tolerationSeconds` once
the shortest has passed, counted from when it saw the taint; only removing the taint cancels that.
So a timed toleration counts as going *now*: the group's place in the budget is taken the moment
the taint is in force, not minutes later when the pod is deleted (the same count `group-taint`
makes of a taint about to be added). A group with a going pod is broken for every budget decision
(guardhook.groups.counts.view_group_health).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from guardhook.cluster.dra import (
    ClassMatcher,
    Device,
    DeviceId,
    DeviceTaint,
    DeviceTaintRuleRecord,
    request_tolerations,
    rule_selects,
)
from guardhook.cluster.model import NodeRecord, PodRecord, Taint, Toleration
from guardhook.cluster.taints import NO_EXECUTE, TaintLike, eviction_delay
from guardhook.cluster.view.store import ClusterView

KARPENTER_DISRUPTED_TAINT = "karpenter.sh/disrupted"
CLUSTER_AUTOSCALER_TAINT = "ToBeDeletedByClusterAutoscaler"
DRAIN_TAINT_KEYS: tuple[str, ...] = (KARPENTER_DISRUPTED_TAINT, CLUSTER_AUTOSCALER_TAINT)
"""The drain taints every configuration knows; `drainTaintKeys` adds to them."""

MAINTENANCE_PLANNED = "MaintenancePlanned"
GRACEFUL_SHUTDOWN = "GracefulNodeShutdownInProgress"
MAINTENANCE_CONDITIONS: tuple[str, ...] = (
    MAINTENANCE_PLANNED,
    "DrainInProgress",
    "Drained",
    "MaintenanceInProgress",
)
"""Node lifecycle conditions (KEP-5683) an admin or a maintenance controller sets and clears: True
makes a node draining, unless stale (see the module docstring)."""
GOING_CONDITIONS: tuple[str, ...] = (GRACEFUL_SHUTDOWN,)
"""Node conditions under which the kubelet itself is stopping the node's pods: True makes its pods
going (see the module docstring)."""
DRAIN_CONDITIONS: tuple[str, ...] = (*MAINTENANCE_CONDITIONS, *GOING_CONDITIONS)
"""Node lifecycle conditions that make a node draining by default (`worker-delete`'s
`drainConditions`)."""
_NODE_BOUND_OWNERS = frozenset({"DaemonSet", "Node"})
"""Owner kinds of pods placed whatever a node's state (a DaemonSet's, a static pod's mirror): their
creation says nothing of whether a maintenance is over."""


def describe_taint(taint: TaintLike) -> str:
    """`key=value:Effect`, as `kubectl taint` writes it (`key:Effect` without a value)."""
    return f"{taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect}"


def draining(
    node: NodeRecord,
    extra_keys: Iterable[str] = (),
    conditions: Iterable[str] = DRAIN_CONDITIONS,
    view: ClusterView | None = None,
) -> str:
    """Why `node` is draining — "cordoned", "drain taint <key=value:Effect>" or "node condition
    <Type>=True" — or "" when it is not (see the module docstring for the keys; `conditions`: the
    lifecycle condition types that count, default DRAIN_CONDITIONS). With `view`, a stale
    condition (`stale_conditions`) does not count."""
    if node.unschedulable:
        return "cordoned"
    keys = {*DRAIN_TAINT_KEYS, *extra_keys}
    for taint in node.taints:
        if taint.key in keys:
            return f"drain taint {describe_taint(taint)}"
    if node.conditions:
        stale = {s.condition for s in stale_conditions(view, node, keys)} if view is not None else set()
        for condition in conditions:
            if condition in node.conditions and condition not in stale:
                return f"node condition {condition}=True"
    return ""


def draining_nodes(
    view: ClusterView, extra_keys: Iterable[str] = (), conditions: Iterable[str] = DRAIN_CONDITIONS
) -> dict[str, str]:
    """node name -> why, for every draining node of `view`, by name (`draining`'s arguments; stale
    conditions do not count)."""
    keys, types = tuple(extra_keys), tuple(conditions)
    found = {node.name: draining(node, keys, types, view) for node in view.nodes()}
    return {name: why for name, why in sorted(found.items()) if why}


def leaving_condition(node: NodeRecord) -> str:
    """The first GOING_CONDITIONS type `node` carries with status True, or ""."""
    return next((c for c in GOING_CONDITIONS if c in node.conditions), "") if node.conditions else ""


@dataclass(frozen=True)
class StaleCondition:
    """A maintenance condition left True after the maintenance (see the module docstring): `node`,
    `condition` (its type), `since` (its lastTransitionTime, Unix seconds) and `pod` (namespace/name
    of the newest pod created on the node after it: the evidence)."""

    node: str
    condition: str
    since: float
    pod: str

    @property
    def since_text(self) -> str:
        """`since` as the API server writes a time (RFC 3339, UTC)."""
        return datetime.fromtimestamp(self.since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def describe(self) -> str:
        """One line for a person: node, condition, since when, and why it is taken as stale."""
        return (
            f"node {self.node}: condition {self.condition}=True since {self.since_text} is stale (the "
            f"node is schedulable and pod {self.pod} was created on it after that); ignored — clear it "
            f"(set it False) once the maintenance is over"
        )

    def as_dict(self) -> dict[str, str]:
        """The JSON form: node, condition, since (RFC 3339), pod."""
        return {"node": self.node, "condition": self.condition, "since": self.since_text, "pod": self.pod}


def stale_conditions(
    view: ClusterView | None, node: NodeRecord, extra_keys: Iterable[str] = ()
) -> tuple[StaleCondition, ...]:
    """The stale maintenance conditions of `node` (see the module docstring), in the node's order;
    () without `view` (then nothing can be shown stale). `extra_keys`: configured drain taint keys
    beyond DRAIN_TAINT_KEYS."""
    if view is None or not node.conditions or node.unschedulable:
        return ()
    times = [
        (c, t)
        for c, t in zip(node.conditions, node.since, strict=False)
        if c in MAINTENANCE_CONDITIONS and t > 0
    ]
    if not times:
        return ()
    keys = {*DRAIN_TAINT_KEYS, *extra_keys}
    if any(t.key in keys or t.effect == NO_EXECUTE for t in node.taints):
        return ()
    newest = max(
        (p for p in view.pods_on_node(node.name) if _placed_by_scheduler(p)),
        key=lambda p: p.created,
        default=None,
    )
    if newest is None:
        return ()
    evidence = f"{newest.namespace}/{newest.name}"
    return tuple(StaleCondition(node.name, c, t, evidence) for c, t in times if newest.created > t)


def stale_in_view(view: ClusterView, extra_keys: Iterable[str] = ()) -> list[StaleCondition]:
    """Every stale maintenance condition of `view`'s nodes, by node name."""
    keys = tuple(extra_keys)
    found: list[StaleCondition] = []
    for node in sorted(view.nodes(), key=lambda n: n.name):
        if node.conditions:
            found.extend(stale_conditions(view, node, keys))
    return found


def _placed_by_scheduler(pod: PodRecord) -> bool:
    return (
        not pod.terminal and not pod.terminating and not any(o.kind in _NODE_BOUND_OWNERS for o in pod.owners)
    )


def _doom(tolerations: Iterable[Toleration], taint: TaintLike, where: str) -> str:
    delay = eviction_delay(tolerations, (taint,))
    if delay is None:
        return ""
    when = "" if delay == 0 else f", evicted after its {delay}s toleration"
    return f"NoExecute taint {describe_taint(taint)} on {where}{when}"


@dataclass(frozen=True)
class Unless:
    """Taints a judgement of a taint leaves out of what is already in force: the very taint being
    judged, when the view already holds it (`check` builds its view from the manifests it checks; a
    retried request). `node` with `taints` (node taints), or `rule` (a DeviceTaintRule's name)."""

    node: str = ""
    taints: tuple[Taint, ...] = ()
    rule: str = ""


class Going:
    """Judges pods of one view as going or not (see the module docstring); one instance per
    reading, so the DRA lookups (rules, published devices) are made once for many pods.
    `unless`: taints not to count (see Unless)."""

    def __init__(self, view: ClusterView, unless: Unless | None = None) -> None:
        self.view = view
        self.unless = unless or Unless()
        self._rules: list[DeviceTaintRuleRecord] | None = None
        self._devices: dict[DeviceId, Device] | None = None
        self._matcher: ClassMatcher | None = None

    def why(self, pod: PodRecord) -> str:
        """Why `pod` is going ("terminating", "marked DisruptionTarget/<reason>", "NoExecute taint
        k=v:NoExecute on node n"), or "" when it is not (a terminal pod is absent, not going)."""
        if pod.terminal:
            return ""
        if pod.terminating:
            return "terminating"
        return self.doomed(pod)

    def doomed(self, pod: PodRecord) -> str:
        """`why` for a pod not terminating: a disruption condition or an untolerated NoExecute taint
        on its node or one of its allocated devices; "" when none."""
        if pod.disruption:
            return f"marked {pod.disruption}"
        # Most pods: on a node with no condition and no taint, holding no claim. Said here without
        # the two calls below: a group's health asks this of every pod of a set (issue 53).
        node = self.view.node(pod.node_name) if pod.node_name else None
        if node is not None and (node.conditions or node.taints):
            found = self.node_doom(pod)
            if found:
                return found
        return self.device_doom(pod) if pod.claims else ""

    def node_doom(self, pod: PodRecord) -> str:
        """The lifecycle condition of the pod's node under which its pods are leaving, or the
        NoExecute taint of it that evicts the pod, described; or ""."""
        node = self.view.node(pod.node_name) if pod.node_name else None
        if node is None:
            return ""
        condition = leaving_condition(node)
        if condition:
            return f"node {node.name} condition {condition}=True"
        if not node.taints:  # most nodes carry no taint: nothing to describe
            return ""
        taints = node.taints
        if self.unless.node and node.name == self.unless.node:
            taints = tuple(t for t in taints if t not in self.unless.taints)
        return _first_doom(pod.tolerations, taints, f"node {node.name}")

    def device_doom(self, pod: PodRecord) -> str:
        """The NoExecute device taint (a ResourceSlice's own or a DeviceTaintRule's) on a device
        allocated to one of the pod's claims that the claim's request does not tolerate, or ""."""
        if not pod.claims or pod.terminal:
            return ""
        for name in pod.claims:
            claim = self.view.resource_claim(pod.namespace, name)
            if claim is None:
                continue
            for entry in claim.allocated:
                tolerations = request_tolerations(claim, entry.request)
                where = f"device {'/'.join(entry.id)}"
                for taint in self._device_taints(entry.id):
                    found = _doom(tolerations, taint, where)
                    if found:
                        return found
        return ""

    def _device_taints(self, device: DeviceId) -> list[DeviceTaint]:
        """The NoExecute taints in force on `device`: its slice's own and those of the rules that
        select it for sure (a rule the view cannot judge does not doom a pod: it is not known to)."""
        if self._rules is None:
            self._rules = [
                r
                for r in self.view.device_taint_rules()
                if r.taint.effect == NO_EXECUTE and not (self.unless.rule and r.name == self.unless.rule)
            ]
        published = self._published()
        found = published.get(device)
        taints = [t for t in (found.taints if found else ()) if t.effect == NO_EXECUTE]
        for rule in self._rules:
            if not rule.has_selector:
                continue
            if self._matcher is None:
                self._matcher = ClassMatcher()
            if rule_selects(rule, device, found, self.view.device_class, self._matcher) is True:
                taints.append(rule.taint)
        return taints

    def _published(self) -> dict[DeviceId, Device]:
        if self._devices is None:
            self._devices = self.view.published_devices()
        return self._devices


def _first_doom(tolerations: Iterable[Toleration], taints: Iterable[Taint], where: str) -> str:
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect == NO_EXECUTE:
            found = _doom(tolerations, taint, where)
            if found:
                return found
    return ""
