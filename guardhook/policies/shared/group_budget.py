"""The group budget (guardhook.budget) as the policies answer it: `group-eviction`, delete-based
drains (`worker-delete`) and `group-resize` judge a removal with `judge_budget`, which turns the
budget's verdict into a Judgement — a refusal is 429 TooManyRequests, which `kubectl drain`
retries; an allowed removal of a whole group may carry a warning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardhook.budget import GroupDisruption, decide
from guardhook.cluster.annotations import BUDGET_ANNOTATION
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.stuck import stuck_after
from guardhook.ledger import Ledger
from guardhook.policies.base import ALLOW, TOO_MANY_REQUESTS, Judgement, Violation

__all__ = ["BUDGET_ANNOTATION", "judge_budget", "too_many"]


def too_many(message: str) -> Judgement:
    """A denial with 429 TooManyRequests, which `kubectl drain` retries."""
    return Judgement(violation=Violation(message, code=TOO_MANY_REQUESTS))


def judge_budget(
    view: ClusterView,
    disruption: GroupDisruption,
    ledger: Ledger | None,
    may_record: bool,
    params: Mapping[str, Any],
    what: str,
    recorded_advisory: str = "",
    *,
    cause: str,
) -> Judgement:
    """Allow or deny (429) removing `disruption.pod` by the group budget
    (guardhook.budget.decide, which records an allowed removal unless `may_record` is False), with
    the policy's `params` (`ledgerTTLSeconds`, `stuckAfterSeconds`: group-eviction's, shared).
    `what` starts the denial ("evicting pod ns/name"); `recorded_advisory`, when given, is the
    warning an allowed removal of a whole group carries; `cause` (guardhook.ledger.CAUSES) is what
    the entry records."""
    ttl = float(params.get("ledgerTTLSeconds", 120))
    verdict = decide(
        view, disruption, ledger, may_record, ttl, what, cause=cause, stuck_after=stuck_after(params)
    )
    if not verdict.allowed:
        return too_many(verdict.message)
    if recorded_advisory and not verdict.from_broken:
        return Judgement(advisories=(recorded_advisory,))
    return ALLOW
