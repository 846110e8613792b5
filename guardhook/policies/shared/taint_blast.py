"""What a NoExecute taint would break, in whole groups per LWS, for policy `group-taint`: the pods
it evicts (found by the node or device part of the policy), grouped by LWS and counted against the
group budget B with the groups already broken — in the view (a group a taint already in force
dooms is broken: guardhook.cluster.going) and in the eviction ledger.

A taint within the budget of every LWS it reaches is allowed and, unless nothing may be recorded
(dry runs, `review`, `check`), the groups it dooms are recorded in the ledger (one entry per group,
naming a pod it evicts; one atomic check-and-write per LWS): `kubectl taint nodes a b c` sends its
UPDATEs back to back, and the next one must count this taint's groups even before the view shows
the taint. An entry counts as group_budget.budget_reading says (until the same snapshot shows its group
broken, or until `ledgerTTLSeconds`); by then the view shows the taint itself. A taint over the budget records
nothing (it is denied, or applied with a warning that the next taint's count will see once the
view has it). An unreachable ledger leaves the view alone to judge (the policy fails open).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from guardhook.cluster.going import Going, Unless
from guardhook.cluster.lws import GroupKey, LeaderWorkerSet, below_replicas
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.placement import member_of_pod
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import Judgement, PolicyContext, Violation
from guardhook.policies.shared.group_budget import (
    budget_of,
    budget_reading,
    budget_source,
    describe_broken,
    ledger_key,
    min_budget,
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
    unless: Unless = field(default_factory=Unless)
    """The taint judged, left out of the taints already in force should the view hold it."""


def judge_blast(ctx: PolicyContext, blast: Blast) -> Judgement:
    """A violation when, for some LWS, the groups `blast` breaks plus those already broken exceed
    its budget; advisories for what the view could not tell."""
    default = int(ctx.params.get("maxDisruptedGroups", 1))
    ttl = float(ctx.params.get("ledgerTTLSeconds", 120))
    ledger = ctx.ledger if ctx.may_record else None
    over = []
    going = Going(ctx.view, blast.unless)
    for lws, victims in _by_lws(ctx.view, blast.victims).items():
        judged = _LwsBlast(ctx.view, lws, victims, budget_of(lws, default, min_budget(ctx.params)), going)
        line = judged.record(ledger, ttl) if ledger is not None else judged.read(ctx.ledger)
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
        if lws is not None and below_replicas(member.group_index, lws.replicas):
            grouped[lws].append(victim)
    return grouped


@dataclass(frozen=True)
class _LwsBlast:
    """One LWS's share of a blast: its `victims` against its `budget`, the groups a taint in force
    already dooms counted as broken (`going`)."""

    view: ClusterView
    lws: LeaderWorkerSet
    victims: Sequence[Victim]
    budget: int
    going: Going

    def read(self, ledger: Ledger | None) -> str:
        """The message part when over the budget (else ""), counting the ledger read only."""
        entries: Entries = ()
        if ledger is not None:
            # Unreachable ledger: the view alone still bounds the answer (this policy fails open).
            with contextlib.suppress(LedgerError):
                entries = ledger.entries(ledger_key(self.lws))
        return self.plan(entries, None)[0]

    def record(self, ledger: Ledger, ttl: float) -> str:
        """`read`, and within the budget record the groups the taint dooms, in one atomic update."""
        try:
            return ledger.update(ledger_key(self.lws), lambda entries: self.plan(entries, ledger.now(), ttl))
        except LedgerError:
            return self.read(None)

    def plan(self, entries: Entries, now: float | None, ttl: float = 0.0) -> tuple[str, Entries | None]:
        """(message part or "", the entries to write: `entries` plus one per doomed group, recorded
        at `now` and expiring `ttl` seconds later, when within the budget and `now` is given, else
        None)."""
        # One reading of view and ledger (group_budget.budget_reading states the invariant).
        broken = budget_reading(self.view, self.lws, entries, self.going)
        lost: dict[GroupKey, list[Victim]] = defaultdict(list)
        for victim in self.victims:
            member = member_of_pod(victim.pod)
            if member is not None and member.group_index not in broken:
                lost[member.group_index].append(victim)
        if not lost:
            return "", None
        if len(broken) + len(lost) <= self.budget:
            if now is None:
                return "", None
            kept = tuple(e for e in entries if below_replicas(e.group, self.lws.replicas))
            doomed = tuple(
                Disruption(group, found[0].pod.name, found[0].pod.uid, now + ttl, now, "taint")
                for group, found in sorted(lost.items())
            )
            return "", (*kept, *doomed)
        lws = self.lws
        groups = "; ".join(f"group {index} ({_pods(found)})" for index, found in sorted(lost.items()))
        line = (
            f"LeaderWorkerSet {lws.namespace}/{lws.name} would lose {len(lost)} whole group"
            f"{'s' if len(lost) > 1 else ''} of {lws.replicas}: {groups}; already broken: "
            f"{describe_broken(broken)}; at most {self.budget} may be broken at a time "
            f"({budget_source(lws, self.budget)})"
        )
        return line, None


def _pods(victims: Iterable[Victim]) -> str:
    parts = []
    for victim in sorted(victims, key=lambda v: v.pod.name):
        when = "" if victim.delay == 0 else f" after its {victim.delay}s toleration"
        parts.append(f"{victim.pod.name}{when}")
    return ", ".join(parts)
