"""The one reader of guardhook's own annotation values (`guardhook.io/...` on a LeaderWorkerSet),
as docs/policies.md states them: a switch (`group-readiness`, `group-pdbs`) is exactly `"true"` or
`"false"`, a count (`max-disrupted-groups`, `spare-groups`) one or more ASCII digits, and
`serving-pods` exactly `leaders` or `all` (guardhook.cluster.lws). No case folding and no trimmed
spaces: `" true"` or `"True"` is unreadable for every policy alike, and group-spec, `audit` and
the `annotation-unreadable` gap say so (guardhook.cluster.coverage); Kubernetes itself reads its
boolean annotations with the same exactness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from guardhook.cluster.model import digits

TRUE, FALSE = "true", "false"

BUDGET_ANNOTATION = "guardhook.io/max-disrupted-groups"
"""B, the groups of a set that may be broken at once (group-eviction and every budget)."""
SPARE_GROUPS_ANNOTATION = "guardhook.io/spare-groups"
"""Whole groups of room group-capacity keeps free beside a scale-up."""
GROUP_READINESS_ANNOTATION = "guardhook.io/group-readiness"
"""The switch that opts an LWS into the group-readiness gate."""
GROUP_PDBS_ANNOTATION = "guardhook.io/group-pdbs"
"""The switch that opts an LWS into (or out of) the per-group PDBs."""


def switch(annotations: Mapping[str, str], key: str) -> bool | None:
    """True for exactly "true", False for exactly "false", None when absent or unreadable."""
    value = annotations.get(key)
    if value == TRUE:
        return True
    if value == FALSE:
        return False
    return None


def switch_unreadable(annotations: Mapping[str, str], key: str) -> bool:
    """Whether the switch `key` is set to something other than "true" or "false"."""
    value = annotations.get(key)
    return value is not None and value not in (TRUE, FALSE)


def count(annotations: Mapping[str, str], key: str, default: int) -> int:
    """A non-negative integer annotation (ASCII digits only), or `default` when absent or unreadable."""
    raw = annotations.get(key, "")
    return int(raw) if digits(raw) else default


def count_unreadable(annotations: Mapping[str, str], key: str) -> bool:
    """Whether the count `key` is set to something that is not one or more ASCII digits."""
    raw = annotations.get(key)
    return raw is not None and not digits(raw)


def smallest_budget(carriers: Iterable[tuple[Mapping[str, str], str]]) -> tuple[str | None, str]:
    """The smallest whole `guardhook.io/max-disrupted-groups` among `carriers` ((annotations, what
    carries them, e.g. "Pod ns/name")), and what carries it (the first such by that description on
    a tie); (None, "") when none carries a whole number. A set whose budget its members carry (pods,
    PodGroups) takes the strictest."""
    found = sorted((count(annotations, BUDGET_ANNOTATION, -1), on) for annotations, on in carriers)
    value, on = next(((v, o) for v, o in found if v >= 0), (-1, ""))
    return (str(value), on) if value >= 0 else (None, "")
