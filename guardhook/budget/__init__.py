"""The group disruption budget, one algorithm for every group maker (issue 47): at most B groups of
one set broken at a time (design.md §2), a set being an LWS, a Workload, or the common controller
owner of Workload API gangs (guardhook.groups.SetRef).

It reads a set only through the group model (guardhook.groups: `snapshot`, one consistent reading
of the set's groups) and the eviction ledger (guardhook.ledger, keyed by set), and knows nothing
of admission: `group-eviction`, `worker-delete`, `group-taint`, `group-resize` and drain planning
turn its verdicts into their answers.

- `limit`: B, from the set's `guardhook.io/max-disrupted-groups` annotation, else the policy's
  `maxDisruptedGroups`, never below `minMaxDisruptedGroups`;
- `reading`: which groups count as broken — not whole in the snapshot, or recorded in the ledger
  and not yet seen through (its docstring states the invariant);
- `decide`: allow a broken group's disruption, a whole group's while fewer than B are broken, and
  record it in one atomic ledger update (a dry run records nothing).
"""

from guardhook.budget.decide import (
    GroupDisruption,
    SetReader,
    Verdict,
    decide,
    group_disruption,
    within_budget,
)
from guardhook.budget.limit import MIN_BUDGET_PARAM, budget_of, budget_source, default_budget, min_budget
from guardhook.budget.reading import reading, recorded_as, replaced, superseded

__all__ = [
    "MIN_BUDGET_PARAM",
    "GroupDisruption",
    "SetReader",
    "Verdict",
    "budget_of",
    "budget_source",
    "decide",
    "default_budget",
    "group_disruption",
    "min_budget",
    "reading",
    "recorded_as",
    "replaced",
    "superseded",
    "within_budget",
]
