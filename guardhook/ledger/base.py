"""The ledger's shared types: a recorded disruption, the `Ledger` protocol and its error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Disruption:
    """One recorded eviction: the group it broke, the evicted pod (name and uid), when the entry
    expires and when it was recorded (wall-clock Unix seconds, since several replicas share it;
    `recorded` 0.0: unknown, as in entries written before it existed)."""

    group: int
    pod: str
    uid: str
    expires: float
    recorded: float = 0.0

    def to_json(self) -> dict[str, Any]:
        raw = {"group": self.group, "pod": self.pod, "uid": self.uid, "expires": self.expires}
        return {**raw, "recorded": self.recorded} if self.recorded else raw

    @staticmethod
    def from_json(raw: Any) -> Disruption | None:
        """An entry from its JSON form; None for a malformed one (dropped, never fatal)."""
        if not isinstance(raw, dict):
            return None
        group, expires = raw.get("group"), raw.get("expires")
        if not isinstance(group, int) or isinstance(group, bool) or not isinstance(expires, int | float):
            return None
        recorded = raw.get("recorded")
        at = float(recorded) if isinstance(recorded, int | float) and not isinstance(recorded, bool) else 0.0
        return Disruption(group, str(raw.get("pod") or ""), str(raw.get("uid") or ""), float(expires), at)


Entries = tuple[Disruption, ...]
LwsKey = tuple[str, str]
"""(namespace, LWS name): one ledger record per LeaderWorkerSet."""

Plan = Callable[[Entries], tuple[T, Entries | None]]
"""Given the unexpired entries, returns (result, new entries to write, or None to write nothing)."""


class LedgerError(RuntimeError):
    """The ledger could not be read or written (API server unreachable, too many conflicts)."""


class Ledger(Protocol):
    """Where allowed disruptions are recorded, per LWS."""

    def now(self) -> float:
        """The ledger's clock (Unix seconds): the one clock that both stamps an entry's `expires`
        (callers add the TTL to it) and decides which entries have expired."""
        ...

    def entries(self, lws: LwsKey) -> Entries:
        """The unexpired entries of `lws`. Raises LedgerError."""
        ...

    def update(self, lws: LwsKey, plan: Plan[T]) -> T:
        """Run `plan` on the unexpired entries and write what it returns, atomically: no other
        update of `lws` (in this process or another replica) lands between the read and the
        write. `plan` may run more than once (after a write conflict). Raises LedgerError."""
        ...
