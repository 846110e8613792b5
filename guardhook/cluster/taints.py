"""Which pods a NoExecute taint evicts: the toleration rules of Kubernetes' taint manager.

A toleration matches a taint (core/v1 `Toleration.ToleratesTaint`) when its effect is empty or
equal, its key is equal (or empty with operator Exists: every key), and, for operator Equal (the
default), its value is equal. A NoExecute taint evicts a pod unless a matching toleration has no
`tolerationSeconds`; with only timed tolerations the pod is evicted once the shortest one expires
(the taint eviction controller's minimum toleration time), so it is still lost, only later.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from guardhook.cluster.model import Taint, Toleration

NO_EXECUTE = "NoExecute"


class TaintLike(Protocol):
    """A node taint (model.Taint) or a device taint (dra.DeviceTaint): both match tolerations the
    same way (KEP-5055 reuses core/v1's toleration semantics for devices)."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


def tolerates(toleration: Toleration, taint: TaintLike) -> bool:
    """Whether `toleration` matches `taint`, as core/v1 `Toleration.ToleratesTaint` defines it: an
    empty effect matches every effect, an empty key every key (validation allows that only with
    Exists), Exists any value, Equal (or "") an equal value; an unknown operator matches nothing.
    The one matcher for the taint managers (guardhook.cluster.taints.eviction_delay) and the
    scheduler's TaintToleration filter (guardhook.capacity.shapes.PodShape.tolerates_all)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("Equal", "") and toleration.value == taint.value


def eviction_delay(tolerations: Iterable[Toleration], taints: Iterable[TaintLike]) -> int | None:
    """Seconds until the NoExecute taints among `taints` evict a pod with `tolerations`: 0 at once,
    N after the shortest matching `tolerationSeconds` (negative counts as 0), None when every such
    taint is tolerated forever (or there is none)."""
    tolerations = tuple(tolerations)
    delays: list[int] = []
    for taint in taints:
        if taint.effect != NO_EXECUTE:
            continue
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            delays.append(0)
        elif all(t.seconds is not None for t in matching):
            delays.append(max(0, min(t.seconds or 0 for t in matching)))
    return min(delays) if delays else None


def added_no_execute(new: Iterable[Taint], old: Iterable[Taint]) -> tuple[Taint, ...]:
    """The NoExecute taints in `new` that `old` does not hold (same key, value and effect)."""
    before = set(old)
    return tuple(t for t in new if t.effect == NO_EXECUTE and t not in before)
