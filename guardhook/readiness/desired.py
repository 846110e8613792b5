"""What the group-readiness reconciler would write, computed purely from a ClusterView.

One entry per leader pod of groups 0..replicas-1 of every LWS that opted in (and of every LWS that
opted out whose leader still carries guardhook's gate) — per pod of those groups for a
data-parallel LWS (`guardhook.io/serving-pods: "all"`, whose workers carry the gate too). The
condition's reason says why, per pod: `LeaderReadyBootstrap` for a LeaderReady leader whose
workers its own readiness has yet to create, else the group's verdict
(guardhook.groups.ready.pod_readiness):

- `patch`: the leader carries the gate and its condition `guardhook.io/group-ready` differs from
  what the group says (status, reason or message; guardhook.groups.ready.group_readiness);
- `unchanged`: it carries the gate and the condition already says so;
- `no-gate`: an opted-in leader created without the gate (guardhook was down at its creation):
  nothing is written, `guardhook audit` lists it, restarting the group adds the gate;
- `terminating`: the leader is being deleted: nothing is written.

A leader whose LWS opted out but that still carries the gate (it was created while opted in) gets
the condition True once, reason `GroupReadinessOptedOut`, so a gate nobody maintains any more does
not hold it unready; after that it is never written again. Pods without the gate — every pod of an
LWS that never opted in — and workers are never written. A stale view plans nothing: conditions
stay as last written.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from guardhook.cluster.lws import GROUP_READY_GATE
from guardhook.cluster.model import ConditionRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.keys import GroupKey
from guardhook.groups.ready import (
    GATE,
    OPTED_OUT,
    GatedPod,
    GroupReadiness,
    gate_targets,
    gated,
    opted_in,
    pod_readiness,
)

PATCH = "patch"
UNCHANGED = "unchanged"
NO_GATE = "no-gate"
TERMINATING = "terminating"
RELEASED = GroupReadiness(True, OPTED_OUT, "the LeaderWorkerSet no longer opts in; gate released")


@dataclass(frozen=True)
class Entry:
    """One leader: where it is, the condition it should carry (`want`), the one it carries
    (`current`, None when absent) and what the reconciler does (`action`)."""

    namespace: str
    pod: str
    uid: str
    lws: str
    group_index: GroupKey
    """The group's key: ordinal, or a Hash group's key (guardhook.groups.keys.GroupKey)."""
    want: GroupReadiness
    current: ConditionRecord | None
    action: str

    @property
    def key(self) -> tuple[str, str, str]:
        """(namespace, pod name, pod uid): one leader incarnation."""
        return (self.namespace, self.pod, self.uid)

    def line(self) -> str:
        """`serve/llm-xl-0 group 0: guardhook.io/group-ready=False (WorkerNotReady: llm-xl-0-2) patch`."""
        return (
            f"{self.namespace}/{self.pod} group {self.group_index}: "
            f"{GATE}={self.want.status} ({self.want.message}) {self.action}"
        )

    def as_dict(self) -> dict[str, object]:
        """The entry as JSON-ready fields (pod, leaderWorkerSet, group, status, reason, message, action)."""
        return {
            "pod": f"{self.namespace}/{self.pod}",
            "leaderWorkerSet": self.lws,
            "group": self.group_index,
            "status": self.want.status,
            "reason": self.want.reason,
            "message": self.want.message,
            "action": self.action,
        }


@dataclass
class Plan:
    """Every entry, in (namespace, LWS, group) order, and warnings (a stale view)."""

    entries: list[Entry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def patches(self) -> list[Entry]:
        """The entries to write."""
        return [e for e in self.entries if e.action == PATCH]


GroupId = tuple[str, str, GroupKey]
"""(namespace, LWS name, group key: ordinal, or a Hash group's key)."""


def plan(view: ClusterView, all_lws: bool = False, only: Collection[GroupId] | None = None) -> Plan:
    """The plan for `view`; `all_lws` is the `group-readiness` policy's `allLeaderWorkerSets`.
    With `only`, just those groups are planned (a round woken by pod changes)."""
    result = Plan()
    if view.is_stale():
        result.warnings.append("cluster view is stale or not synced; group-ready conditions left as they are")
        return result
    if only is not None:
        candidates = [lws for ns, name in sorted({(k[0], k[1]) for k in only}) if (lws := view.lws(ns, name))]
    else:
        candidates = sorted(view.all_lws(), key=lambda lws: (lws.namespace, lws.name))
    for lws in candidates:
        opted = opted_in(lws, all_lws)
        if lws.hashed:
            # LWS gates a Hash LWS's leaders itself (group-ready): guardhook's gate is never added.
            if opted:
                result.warnings.append(
                    f"{lws.namespace}/{lws.name}: groupIdentity Hash, whose leaders LWS gates on "
                    f"{GROUP_READY_GATE} itself; guardhook adds and sets no second gate"
                )
            continue
        for leader in gate_targets(view, lws):
            if only is not None and (lws.namespace, lws.name, leader.group_index) not in only:
                continue
            entry = _entry(view, leader, opted)
            if entry is not None:
                result.entries.append(entry)
    return result


def _entry(view: ClusterView, leader: GatedPod, opted: bool) -> Entry | None:
    pod = leader.pod
    current = pod.gate_conditions.get(GATE)
    if not opted:
        if not gated(pod) or (current is not None and current.status == "True"):
            return None  # never opted in, or released already: never written
        want = RELEASED
    else:
        want = pod_readiness(view, leader)
    if not gated(pod):
        action = NO_GATE
    elif pod.terminating:
        action = TERMINATING
    elif differs(current, want):
        action = PATCH
    else:
        action = UNCHANGED
    return Entry(pod.namespace, pod.name, pod.uid, leader.lws.name, leader.group_index, want, current, action)


def differs(current: ConditionRecord | None, want: GroupReadiness) -> bool:
    """Whether the condition must be written: absent, or another status, reason or message."""
    return current is None or (current.status, current.reason, current.message) != (
        want.status,
        want.reason,
        want.message,
    )
