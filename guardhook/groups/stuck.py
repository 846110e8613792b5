"""Groups down for good: broken, and nothing will bring them back on its own.

A group that stays broken spends its set's disruption budget for as long as it stays so: every
drain of that set then gets 429 until someone acts. Two ways a group gets there, read from the
view:

- **gated**: its pods are held by `spec.schedulingGates` for longer than the configured time
  (`after` seconds since the oldest gated pod was created). Whose gate it is comes from the gate's
  name: `kueue.x-k8s.io/...` (Kueue: e.g. LWS pods left gated after an upgrade because their
  templates lack the queue-name label, kueue PR #14138), `leaderworkerset.sigs.k8s.io/...` (the LWS
  controller's group-replacement gate), `grove.io/...` (the Grove operator's PodGang gate), or
  another component.
- **restarts exhausted**: an LWS with `spec.leaderWorkerTemplate.maxGroupRestarts` (lws PR #877,
  bounded group recovery) whose group has been recreated that many times: the LWS controller
  keeps the failed group and no longer recreates it. The count is read from the LWS annotation
  `leaderworkerset.sigs.k8s.io/group-restart-counts` (a JSON object keyed by the group index, or
  by `<template revision>/<group index>`) and the leader's `leaderworkerset.sigs.k8s.io/group-restart-count`,
  whichever is higher; deleting the leader resets it.

Each `StuckGroup` says since when (the gated pod's creation; for exhausted restarts, the newest
of the group's pods: nothing has recreated it since), why, and what to do. Used by the 429 of the
budget, `drain-plan`, `audit` and the `guardhook_stuck_groups` gauge. Its pods are always
evictable: a broken group's are (the budget allows disruptions of a broken group).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.lws import LWS_KIND, PREFIX
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.maker import SetSnapshot
from guardhook.groups.makers import all_sets
from guardhook.groups.ref import SetRef

RESTART_COUNTS_ANNOTATION = PREFIX + "group-restart-counts"
RESTART_COUNT_ANNOTATION = PREFIX + "group-restart-count"
REVISION_LABEL = PREFIX + "template-revision-hash"
MAX_GROUP_RESTARTS = "maxGroupRestarts"
DEFAULT_STUCK_AFTER_SECONDS = 900.0
"""How long a group's pods may stay gated before it counts as stuck (15 minutes: longer than a
scheduler, a gang admission or a group replacement normally takes)."""
STUCK_AFTER_PARAM = "stuckAfterSeconds"
"""group-eviction's parameter (shared with worker-delete and group-resize) for that time."""

GATE_OWNERS = (
    ("kueue.x-k8s.io/", "Kueue"),
    (PREFIX, "the LeaderWorkerSet controller"),
    ("grove.io/", "the Grove operator"),
    ("scheduling.k8s.io/", "the scheduler's gang scheduling"),
)


@dataclass(frozen=True, slots=True)
class StuckGroup:
    """A group down for good: its set, key, since when (Unix seconds, 0 unknown), why and what to
    do."""

    namespace: str
    kind: str
    set_name: str
    key: str
    since: float
    why: str
    advice: str

    def describe(self) -> str:
        """`group 2 of LeaderWorkerSet ns/a is stuck (why) since <time>: advice`."""
        return (
            f"group {self.key} of {self.kind} {self.namespace}/{self.set_name} is down for good "
            f"({self.why}){_since(self.since)}: {self.advice}"
        )

    def as_dict(self) -> dict[str, object]:
        """camelCase, as Kubernetes writes JSON."""
        return {
            "namespace": self.namespace,
            "kind": self.kind,
            "set": self.set_name,
            "group": self.key,
            "since": self.since,
            "why": self.why,
            "advice": self.advice,
        }


def _since(since: float) -> str:
    if since <= 0:
        return ""
    return " since " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))


def gate_owner(gate: str) -> str:
    """Who holds a scheduling gate, by its name's domain ("another component" when unknown)."""
    return next((owner for prefix, owner in GATE_OWNERS if gate.startswith(prefix)), "another component")


def _gated(pods: Sequence[PodRecord], now: float, after: float) -> tuple[float, str] | None:
    """(since, why) when some live pod of the group has been gated for longer than `after`."""
    gated = [p for p in pods if p.gated and not p.terminal and not p.terminating]
    if not gated:
        return None
    since = min((p.created for p in gated if p.created > 0), default=0.0)
    if since <= 0 or now - since < after:
        return None
    gates = sorted({g for p in gated for g in p.scheduling_gates})
    held = ", ".join(f"{g} ({gate_owner(g)})" for g in gates)
    names = ", ".join(sorted(p.name for p in gated)[:5])
    return since, f"pods {names} held by the scheduling gate {held}"


def _restart_count(annotations: dict[str, str], leader: PodRecord | None, key: str) -> int:
    """The group's restart count: the LWS's counts map (by `<revision>/<key>` or `<key>`) and the
    leader's own count, whichever is higher (lws PR #877 writes both, not atomically)."""
    found = 0
    try:
        counts = json.loads(annotations.get(RESTART_COUNTS_ANNOTATION) or "{}")
    except ValueError:
        counts = {}
    if isinstance(counts, dict):
        revision = leader.labels.get(REVISION_LABEL, "") if leader is not None else ""
        for name in (f"{revision}/{key}" if revision else "", key):
            value = counts.get(name) if name else None
            if isinstance(value, int) and value > found:
                found = value
    raw = leader.annotations.get(RESTART_COUNT_ANNOTATION, "") if leader is not None else ""
    return max(found, int(raw)) if raw.isdigit() else found


def _restart_limit(view: ClusterView, target: SetRef) -> tuple[int, dict[str, str]] | None:
    """(maxGroupRestarts, the LWS's annotations) of LWS `target`; None when it sets no limit (or is
    no LWS the view holds)."""
    lws = view.lws(target.namespace, target.name) if target.kind == LWS_KIND else None
    limit = lws.template.get(MAX_GROUP_RESTARTS) if lws is not None else None
    if lws is None or not isinstance(limit, int) or isinstance(limit, bool):
        return None
    return limit, lws.annotations


def _exhausted(
    restarts: tuple[int, dict[str, str]], key: str, pods: Sequence[PodRecord]
) -> tuple[float, str, str] | None:
    """(since, why, the leader's name) when the restart budget `restarts` (`_restart_limit`) for
    group `key` is spent."""
    limit, annotations = restarts
    leader = next((p for p in pods if p.labels.get(PREFIX + "worker-index") == "0" and not p.terminal), None)
    count = _restart_count(annotations, leader, key)
    if count < limit:
        return None
    since = max((p.created for p in pods if not p.terminal), default=0.0)
    why = f"restarts exhausted: recreated {count} times, maxGroupRestarts {limit}"
    return since, why, leader.name if leader is not None else ""


def stuck_in_snapshot(view: ClusterView, snap: SetSnapshot, now: float, after: float) -> list[StuckGroup]:
    """The broken groups of one set's snapshot that are down for good, by key."""
    found: list[StuckGroup] = []
    target = snap.set
    raise_budget = f"or raise guardhook.io/max-disrupted-groups on {target} while it stays down"
    restarts = _restart_limit(view, target) if snap.broken.listed else None
    for key in sorted(snap.broken.listed, key=lambda k: (len(k), k)):
        pods = snap.pods.get(key, ())
        exhausted = _exhausted(restarts, key, pods) if restarts is not None else None
        if exhausted is not None:
            since, why, leader = exhausted
            delete = (
                f"delete its leader pod {target.namespace}/{leader}" if leader else "delete its leader pod"
            )
            advice = (
                f"{delete} (the LWS controller then recreates the group and resets its restart count) "
                f"once the cause is fixed, {raise_budget}"
            )
            found.append(StuckGroup(target.namespace, target.kind, target.name, key, since, why, advice))
            continue
        gated = _gated(pods, now, after)
        if gated is not None:
            since, why = gated
            advice = (
                "find out why the gate's owner does not lift it (its events and logs; for Kueue, the "
                "pods' queue-name label and Workload), or delete the group's pods to have them "
                f"recreated, {raise_budget}"
            )
            found.append(StuckGroup(target.namespace, target.kind, target.name, key, since, why, advice))
    return found


def stuck_groups(
    view: ClusterView, now: float, after: float = DEFAULT_STUCK_AFTER_SECONDS
) -> Iterator[StuckGroup]:
    """Every stuck group of every set of every registered maker in `view`, set by set."""
    for maker, target in all_sets(view):
        snap = maker.snapshot(view, target)
        if snap is not None and len(snap.broken):
            yield from stuck_in_snapshot(view, snap, now, after)


def stuck_after(params: Mapping[str, Any]) -> float:
    """The configured `stuckAfterSeconds` in a policy's `params` (DEFAULT_STUCK_AFTER_SECONDS when
    unset)."""
    return float(params.get(STUCK_AFTER_PARAM, DEFAULT_STUCK_AFTER_SECONDS))


def stuck_note(view: ClusterView, snap: SetSnapshot, after: float, now: float | None = None) -> str:
    """A sentence naming the groups of the set of `snap` (the snapshot a budget decision read)
    that are down for good (gated ones after `after` seconds: the configured `stuckAfterSeconds`),
    for a 429 that counts them (" Note: ... is down for good (...): ..."); "" when none is."""
    stuck = stuck_in_snapshot(view, snap, time.time() if now is None else now, after)
    return "".join(f" Note: {s.describe()}." for s in stuck)
