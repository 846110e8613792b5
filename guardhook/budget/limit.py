"""B, the most groups of one set that may be broken at a time: the set's
`guardhook.io/max-disrupted-groups` annotation (guardhook.groups.SetSnapshot.budget_annotation),
else the policy's `maxDisruptedGroups`, and never below the cluster admin's
`minMaxDisruptedGroups` (group-eviction's, default 0: a tenant's annotation "0" would block every
drain of the nodes its groups run on; issue 48)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardhook.cluster.annotations import BUDGET_ANNOTATION
from guardhook.cluster.model import digits
from guardhook.groups import SetSnapshot

MIN_BUDGET_PARAM = "minMaxDisruptedGroups"
"""The parameter (group-eviction's, shared with worker-delete, group-resize, group-taint) that no
set's B goes below, whatever its annotation says."""
DEFAULT_BUDGET_PARAM = "maxDisruptedGroups"


def default_budget(params: Mapping[str, Any]) -> int:
    """The policy's `maxDisruptedGroups` (1 when unset): B of a set without the annotation."""
    return int(params.get(DEFAULT_BUDGET_PARAM, 1))


def min_budget(params: Mapping[str, Any]) -> int:
    """The policy's `minMaxDisruptedGroups` (0 when unset): the least B of any set."""
    return int(params.get(MIN_BUDGET_PARAM, 0))


def budget_of(snapshot: SetSnapshot, default: int, minimum: int = 0) -> int:
    """B for the set of `snapshot`: its annotation when a whole number, else `default`; never
    below `minimum` (the annotation is the tenant's, the minimum the admin's)."""
    raw = snapshot.budget_annotation
    value = int(raw) if raw is not None and digits(raw) else default
    return max(value, minimum)


def budget_source(snapshot: SetSnapshot, budget: int | None = None) -> str:
    """Where `budget_of(snapshot, ...)` took B from, for messages: the set's annotation when it
    holds a non-negative integer, else the policy's `maxDisruptedGroups` parameter (default 1),
    saying so when an annotation is there but not usable; the cluster minimum when `budget` (B as
    used) is above the annotation's value."""
    raw = snapshot.budget_annotation
    if raw is None:
        return f"config parameter {DEFAULT_BUDGET_PARAM}"
    if digits(raw):
        if budget is not None and int(raw) < budget:
            return f"config parameter {MIN_BUDGET_PARAM}, above annotation {BUDGET_ANNOTATION}: {raw!r}"
        return f"annotation {BUDGET_ANNOTATION}"
    return (
        f"config parameter {DEFAULT_BUDGET_PARAM}; annotation {BUDGET_ANNOTATION}: {raw!r} is not a "
        "whole number"
    )
