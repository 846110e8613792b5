"""The group budget for Workload API gangs (guardhook.groups.podgroup): at most B `disruptionMode:
all` PodGroups of one set (their Workload, else their common controller owner) broken at a time.

It is group_budget's rule with PodGroups for groups: B is the `guardhook.io/max-disrupted-groups`
annotation — on the set's Workload when the view holds it and it is set, else on the set's
PodGroups (the smallest value set) — else the policy's `maxDisruptedGroups`;
a gang counts as broken when the view shows it not whole or an unexpired ledger entry records a
disruption of it not yet seen through (group_budget.budget_reading states the invariant; the same
reading — one view snapshot under its lock, the entries of one ledger update — is kept here). The
ledger key is (namespace, `<kind>.<name>` of the set, lower-case kind), apart from any LWS's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from guardhook.cluster.going import Going
from guardhook.cluster.lws import int_annotation
from guardhook.cluster.model import PodRecord
from guardhook.cluster.podgroups import WORKLOAD_KIND, PodGroupRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.makers import MAKERS
from guardhook.groups.podgangs import PodGang, PodReadMaker, pod_gang_health, set_budget
from guardhook.groups.podgroup import all_mode_group, gang_health, members, set_groups, set_of
from guardhook.groups.ref import SetRef
from guardhook.groups.stuck import stuck_note
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import ALLOW, Judgement
from guardhook.policies.shared.group_budget import (
    BUDGET_ANNOTATION,
    recorded_as,
    replaced,
    superseded,
    too_many,
)


@dataclass(frozen=True)
class GangDisruption:
    """One pod's removal in gang terms: the pod, its PodGroup, the set, and the budget B."""

    pod: PodRecord
    group: PodGroupRecord | PodGang
    set: SetRef
    budget: int
    groups: tuple[PodGroupRecord | PodGang, ...] = field(repr=False)


def gang_disruption(
    view: ClusterView, pod: PodRecord, default_budget: int, minimum_budget: int = 0
) -> GangDisruption | None:
    """The gang context of removing `pod`, or None when it is in no `all` PodGroup the view holds.
    B never goes below `minimum_budget` (`minMaxDisruptedGroups`, as for LWS groups)."""
    group = all_mode_group(view, pod)
    if group is None:
        return _pod_gang_disruption(view, pod, default_budget, minimum_budget)
    target = set_of(group)
    groups = tuple(set_groups(view, target))
    workload = view.workload(target.namespace, target.name) if target.kind == WORKLOAD_KIND else None
    budget = int_annotation(workload.annotations, BUDGET_ANNOTATION, -1) if workload is not None else -1
    if budget < 0:
        budgets = [int_annotation(g.annotations, BUDGET_ANNOTATION, -1) for g in groups]
        set_budgets = [b for b in budgets if b >= 0]
        budget = min(set_budgets) if set_budgets else default_budget
    return GangDisruption(pod, group, target, max(budget, minimum_budget), groups)


def pod_gang(view: ClusterView, pod: PodRecord) -> PodGang | None:
    """The gang `pod` belongs to by the first registered maker of gangs read from pods
    (guardhook.groups.podgangs.PodReadMaker: Grove, JobSet) that claims it, or None."""
    for maker in MAKERS:
        if isinstance(maker, PodReadMaker):
            gang = maker.gang(view, pod)
            if gang is not None:
                return gang
    return None


def _pod_gang_disruption(
    view: ClusterView, pod: PodRecord, default_budget: int, minimum_budget: int
) -> GangDisruption | None:
    """The gang context of a gang read from its pods (guardhook.groups.podgangs: Grove, JobSet)."""
    gang = pod_gang(view, pod)
    if gang is None:
        return None
    maker = next(m for m in MAKERS if isinstance(m, PodReadMaker) and m.flavour == gang.maker)
    held = maker.gangs(view, gang.set)
    groups = held if any(g.name == gang.name for g in held) else (*held, gang)
    return GangDisruption(
        pod, gang, gang.set, max(set_budget(groups, default_budget), minimum_budget), groups
    )


def ledger_key(target: SetRef) -> tuple[str, str]:
    """The ledger key of a gang set: (namespace, `<kind>.<name>`)."""
    return (target.namespace, f"{target.kind.lower()}.{target.name}")


def gang_reading(view: ClusterView, disruption: GangDisruption, entries: Entries) -> dict[str, str]:
    """PodGroup name -> why, for the set's gangs that count as broken: not whole in one snapshot of
    the view (taken under its lock), or recorded in `entries` and not yet seen through."""
    doomed: Callable[[PodRecord], str] = Going(view).doomed
    names = {g.name for g in disruption.groups}
    with view.lock:
        pods = {
            g.name: list(g.pods) if isinstance(g, PodGang) else members(view, g) for g in disruption.groups
        }
    broken: dict[str, str] = {}
    for group in disruption.groups:
        if isinstance(group, PodGang):
            health = pod_gang_health(group, tuple(pods[group.name]), doomed)
        else:
            health = gang_health(view, group, pods[group.name], doomed)
        if not health.whole:
            broken[group.name] = "; ".join(health.problems)
    for entry in entries:
        key = str(entry.group)
        if key in names and key not in broken and not replaced(entry, pods.get(key, ())):
            broken[key] = f"{recorded_as(entry)}, not visible yet"
    return broken


def judge_gang_budget(
    view: ClusterView,
    disruption: GangDisruption,
    ledger: Ledger | None,
    may_record: bool,
    ttl: float,
    what: str,
    *,
    cause: str,
) -> Judgement:
    """Allow (and record) or deny with 429 removing `disruption.pod`, as group_budget.judge_budget
    does for an LWS group: from a broken gang always, from a whole one while fewer than B gangs of
    the set are broken."""
    name = disruption.group.name
    pod_read = isinstance(disruption.group, PodGang)
    noun = "group" if pod_read else "PodGroup"
    breaking = (
        f"group {name}" if pod_read else f"PodGroup {disruption.set.namespace}/{name} (disruptionMode all)"
    )

    def plan(entries: Entries) -> tuple[Judgement, Entries | None]:
        broken = gang_reading(view, disruption, entries)
        if name not in broken and len(broken) >= disruption.budget:
            listed = "; ".join(f"{noun} {g} ({why})" for g, why in sorted(broken.items()))
            return (
                too_many(
                    f"{what} would break {breaking} "
                    f"of {disruption.set}, but {len(broken)} of its {len(disruption.groups)} gangs "
                    f"{'is' if len(broken) == 1 else 'are'} already broken and at most {disruption.budget} "
                    f"may be broken at a time: {listed}. Retry once a broken gang is whole again"
                    + stuck_note(view, disruption.set)
                ),
                None,
            )
        now = ledger.now() if ledger is not None else time.time()
        pod = disruption.pod
        record = Disruption(name, pod.name, pod.uid, now + ttl, now, cause)
        kept = tuple(e for e in entries if not superseded(e, record))
        return ALLOW, (*kept, record)

    try:
        if ledger is None:
            return plan(())[0]
        if not may_record:
            return plan(ledger.entries(ledger_key(disruption.set)))[0]
        return ledger.update(ledger_key(disruption.set), plan)
    except LedgerError as exc:
        return too_many(f"cannot consult the eviction ledger ({exc}); retry shortly")
