"""What a NoExecute taint would break, in whole groups per set (an LWS, a set of Workload API
gangs), for policy `group-taint`: the pods it evicts (found by the node or device part of the
policy), grouped by set (guardhook.groups.resolve) and counted against the group budget B
(guardhook.budget) with the groups already broken — in the view (a group a taint already in force
dooms is broken: guardhook.cluster.going) and in the eviction ledger.

A taint within the budget of every set it reaches is allowed and, unless nothing may be recorded
(dry runs, `review`, `check`), the groups it dooms are recorded in the ledger (one entry per group,
naming a pod it evicts; one atomic check-and-write per set): `kubectl taint nodes a b c` sends its
UPDATEs back to back, and the next one must count this taint's groups even before the view shows
the taint. An entry counts as guardhook.budget.reading says (until the same snapshot shows its group
broken, or until `ledgerTTLSeconds`); by then the view shows the taint itself. A taint over the budget records
nothing (it is denied, or applied with a warning that the next taint's count will see once the
view has it). An unreachable ledger leaves the view alone to judge (the policy fails open).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from guardhook.budget import GroupDisruption, SetReader, budget_source, default_budget, min_budget, reading
from guardhook.cluster.going import Going, Unless
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import GroupRef, SetSnapshot, describe_broken
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import Judgement, PolicyContext, Violation


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
    """A violation when, for some set, the groups `blast` breaks plus those already broken exceed
    its budget; advisories for what the view could not tell."""
    ttl = float(ctx.params.get("ledgerTTLSeconds", 120))
    ledger = ctx.ledger if ctx.may_record else None
    over = []
    going = Going(ctx.view, blast.unless)
    reader = SetReader(ctx.view, default_budget(ctx.params), min_budget(ctx.params), going)
    for first, victims in _by_set(reader, blast.victims):
        judged = _SetBlast(ctx.view, first.snapshot, victims, first.budget, going)
        line = judged.record(ledger, ttl) if ledger is not None else judged.read(ctx.ledger)
        if line:
            over.append(line)
    advisories = tuple(f"{blast.what}: {note}" for note in blast.unknown)
    if not over:
        return Judgement(advisories=advisories)
    message = (
        f"{blast.what} would evict pods of {len(over)} group set{'s' if len(over) > 1 else ''} "
        f"beyond their group budget: {' | '.join(over)}. Drain the "
        f"groups within the budget first (kubectl drain honours group-eviction), or tolerate the taint"
    )
    return Judgement(violation=Violation(message), advisories=advisories)


def _by_set(
    reader: SetReader, victims: Iterable[Victim]
) -> list[tuple[GroupDisruption, list[tuple[GroupRef, Victim]]]]:
    """The victims of each set, with their groups, after the set's first victim's GroupDisruption
    (its set's one snapshot and B: guardhook.budget.SetReader); victims of no group, of a set the
    view does not hold, or of a group not one of its set's now are left out."""
    grouped: dict[object, tuple[GroupDisruption, list[tuple[GroupRef, Victim]]]] = {}
    for victim in victims:
        disruption = reader.disruption(victim.pod)
        if disruption is not None:
            key = (disruption.snapshot.maker, disruption.set)
            grouped.setdefault(key, (disruption, []))[1].append((disruption.ref, victim))
    return list(grouped.values())


@dataclass(frozen=True)
class _SetBlast:
    """One set's share of a blast: its `victims` (with their groups) against its `budget`, judged
    from `snap` (the groups a taint in force already dooms counted as broken: `going`)."""

    view: ClusterView
    snap: SetSnapshot
    victims: Sequence[tuple[GroupRef, Victim]]
    budget: int
    going: Going

    def read(self, ledger: Ledger | None) -> str:
        """The message part when over the budget (else ""), counting the ledger read only."""
        entries: Entries = ()
        if ledger is not None:
            # Unreachable ledger: the view alone still bounds the answer (this policy fails open).
            with contextlib.suppress(LedgerError):
                entries = ledger.entries(self.snap.set)
        return self.plan(entries, None)[0]

    def record(self, ledger: Ledger, ttl: float) -> str:
        """`read`, and within the budget record the groups the taint dooms, in one atomic update."""
        try:
            return ledger.update(self.snap.set, lambda entries: self.plan(entries, ledger.now(), ttl))
        except LedgerError:
            return self.read(None)

    def plan(self, entries: Entries, now: float | None, ttl: float = 0.0) -> tuple[str, Entries | None]:
        """(message part or "", the entries to write: `entries` plus one per doomed group, recorded
        at `now` and expiring `ttl` seconds later, when within the budget and `now` is given, else
        None)."""
        # One reading of view and ledger (guardhook.budget.reading states the invariant).
        snap = self.snap
        broken = reading(snap, entries)
        lost: dict[str, list[Victim]] = defaultdict(list)
        for ref, victim in self.victims:
            if ref.key not in broken:
                lost[ref.key].append(victim)
        if not lost:
            return "", None
        if len(broken) + len(lost) <= self.budget:
            if now is None:
                return "", None
            kept = tuple(e for e in entries if snap.counts(e.group))
            doomed = tuple(
                Disruption(group, found[0].pod.name, found[0].pod.uid, now + ttl, now, "taint")
                for group, found in sorted(lost.items())
            )
            return "", (*kept, *doomed)
        label, unit = snap.wording.label, snap.wording.unit
        groups = "; ".join(f"{label} {key} ({_pods(found)})" for key, found in sorted(lost.items()))
        line = (
            f"{snap.set} would lose {len(lost)} whole {unit}{'s' if len(lost) > 1 else ''} of "
            f"{snap.desired}: {groups}; already broken: {describe_broken(broken, label)}; at most "
            f"{self.budget} may be broken at a time ({budget_source(snap, self.budget)})"
        )
        return line, None


def _pods(victims: Iterable[Victim]) -> str:
    parts = []
    for victim in sorted(victims, key=lambda v: v.pod.name):
        when = "" if victim.delay == 0 else f" after its {victim.delay}s toleration"
        parts.append(f"{victim.pod.name}{when}")
    return ", ".join(parts)
