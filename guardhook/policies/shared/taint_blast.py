"""What a NoExecute taint would break, in whole groups per LWS, for policy `group-taint`: the pods
it evicts (found by the node or device part of the policy), grouped by LWS and counted against the
group budget B with the groups already broken (view and eviction ledger, read only).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from guardhook.cluster.lws import LeaderWorkerSet, member_of_pod
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.ledger import Entries, Ledger, LedgerError
from guardhook.policies.base import Judgement, PolicyContext, Violation
from guardhook.policies.shared.group_budget import (
    budget_of,
    budget_reading,
    budget_source,
    describe_broken,
    ledger_key,
)


@dataclass(frozen=True)
class Victim:
    """A pod a taint would evict, and when: `delay` seconds (0: at once)."""

    pod: PodRecord
    delay: int


@dataclass(frozen=True)
class Blast:
    """What a taint would do: the pods it evicts and what the view could not tell."""

    what: str
    victims: Sequence[Victim]
    unknown: tuple[str, ...] = ()


def judge_blast(ctx: PolicyContext, blast: Blast) -> Judgement:
    """A violation when, for some LWS, the groups `blast` breaks plus those already broken exceed
    its budget; advisories for what the view could not tell."""
    default = int(ctx.params.get("maxDisruptedGroups", 1))
    over = []
    for lws, victims in _by_lws(ctx.view, blast.victims).items():
        line = _over_budget(ctx.view, ctx.ledger, lws, victims, budget_of(lws, default))
        if line:
            over.append(line)
    advisories = tuple(f"{blast.what}: {note}" for note in blast.unknown)
    if not over:
        return Judgement(advisories=advisories)
    message = (
        f"{blast.what} would evict pods of {len(over)} LeaderWorkerSet{'s' if len(over) > 1 else ''} "
        f"beyond their group budget: {' | '.join(over)}. Drain the "
        f"groups within the budget first (kubectl drain honours group-eviction), or tolerate the taint"
    )
    return Judgement(violation=Violation(message), advisories=advisories)


def _by_lws(view: ClusterView, victims: Iterable[Victim]) -> dict[LeaderWorkerSet, list[Victim]]:
    grouped: dict[LeaderWorkerSet, list[Victim]] = defaultdict(list)
    known: dict[tuple[str, str], LeaderWorkerSet | None] = {}
    for victim in victims:
        member = member_of_pod(victim.pod)
        if member is None:
            continue
        key = (member.namespace, member.lws_name)
        if key not in known:
            known[key] = view.lws(*key)
        lws = known[key]
        if lws is not None and member.group_index < lws.replicas:
            grouped[lws].append(victim)
    return grouped


def _over_budget(
    view: ClusterView, ledger: Ledger | None, lws: LeaderWorkerSet, victims: Sequence[Victim], budget: int
) -> str:
    """One LWS's part of the message when it would exceed `budget`, else ""."""
    entries: Entries = ()
    if ledger is not None:
        # Unreachable ledger: the view alone still bounds the answer (this policy fails open).
        with contextlib.suppress(LedgerError):
            entries = ledger.entries(ledger_key(lws))
    broken = budget_reading(view, lws, entries)  # one snapshot, after the ledger read
    lost: dict[int, list[Victim]] = defaultdict(list)
    for victim in victims:
        member = member_of_pod(victim.pod)
        if member is not None and member.group_index not in broken:
            lost[member.group_index].append(victim)
    if not lost or len(broken) + len(lost) <= budget:
        return ""
    groups = "; ".join(f"group {index} ({_pods(found)})" for index, found in sorted(lost.items()))
    return (
        f"LeaderWorkerSet {lws.namespace}/{lws.name} would lose {len(lost)} whole group"
        f"{'s' if len(lost) > 1 else ''} of {lws.replicas}: {groups}; already broken: "
        f"{describe_broken(broken)}; at most {budget} may be broken at a time ({budget_source(lws)})"
    )


def _pods(victims: Iterable[Victim]) -> str:
    parts = []
    for victim in sorted(victims, key=lambda v: v.pod.name):
        when = "" if victim.delay == 0 else f" after its {victim.delay}s toleration"
        parts.append(f"{victim.pod.name}{when}")
    return ", ".join(parts)
