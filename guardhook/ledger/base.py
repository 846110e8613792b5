"""The ledger's shared types: a recorded disruption, the `Ledger` protocol and its error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from guardhook.cluster.lws import LWS_KIND
from guardhook.groups.keys import GroupKey, ordinal, ordinal_key
from guardhook.groups.ref import SetRef

T = TypeVar("T")


CAUSES = ("eviction", "delete", "resize", "taint")
"""What an entry records: an allowed eviction (group-eviction), pod delete (worker-delete), resize
restart (group-resize), or a NoExecute taint that dooms the group (group-taint)."""


@dataclass(frozen=True, slots=True)
class Disruption:
    """One recorded disruption of a group: the group, the pod it removes (name and uid; for a taint,
    a pod of the group the taint evicts), when the entry expires and when it was recorded
    (wall-clock Unix seconds, since several replicas share it; `recorded` 0.0: unknown, as in
    entries written before it existed), and its `cause`, one of CAUSES ("" in entries written
    before it existed, or naming a cause this version does not know)."""

    group: GroupKey
    """The group's key, a string: its ordinal ("3") or a Hash group's 40-character key
    (guardhook.groups.keys.GroupKey)."""
    pod: str
    uid: str
    expires: float
    recorded: float = 0.0
    cause: str = ""

    def to_json(self) -> dict[str, Any]:
        # An ordinal stays a JSON number on the wire: the Lease format every replica (and every
        # earlier version) reads.
        number = ordinal(self.group)
        group: int | str = self.group if number is None else number
        raw: dict[str, Any] = {"group": group, "pod": self.pod, "uid": self.uid, "expires": self.expires}
        if self.recorded:
            raw["recorded"] = self.recorded
        if self.cause:
            raw["cause"] = self.cause
        return raw

    @staticmethod
    def from_json(raw: Any) -> Disruption | None:
        """An entry from its JSON form; None for a malformed one (dropped, never fatal). An unknown
        `cause` (a newer replica's) reads as "": the entry still counts, only its wording is lost."""
        if not isinstance(raw, dict):
            return None
        group, expires = raw.get("group"), raw.get("expires")
        if (
            not isinstance(group, int | str)
            or isinstance(group, bool)
            or not isinstance(expires, int | float)
        ):
            return None
        recorded = raw.get("recorded")
        at = float(recorded) if isinstance(recorded, int | float) and not isinstance(recorded, bool) else 0.0
        cause = raw.get("cause")
        known = cause if isinstance(cause, str) and cause in CAUSES else ""
        key = ordinal_key(group) if isinstance(group, int) else group
        return Disruption(
            key, str(raw.get("pod") or ""), str(raw.get("uid") or ""), float(expires), at, known
        )


Entries = tuple[Disruption, ...]
StoredKey = tuple[str, str]
"""How a set's record is stored (and its Lease named): (namespace, name) for a LeaderWorkerSet,
(namespace, `<kind>.<name>`, lower-case kind) for any other set, e.g. a Workload API gang set —
the keys every earlier version wrote, so an upgrade under a drain keeps every reservation."""

LedgerKey = SetRef | StoredKey
"""What the ledger is keyed by: a set (guardhook.groups.SetRef), or its stored form as is."""


def stored_key(target: LedgerKey) -> StoredKey:
    """The stored form of `target` (see StoredKey); a stored key is returned as it is."""
    if not isinstance(target, SetRef):
        return target
    if target.kind == LWS_KIND:
        return (target.namespace, target.name)
    return (target.namespace, f"{target.kind.lower()}.{target.name}")


Plan = Callable[[Entries], tuple[T, Entries | None]]
"""Given the unexpired entries, returns (result, new entries to write, or None to write nothing)."""


class LedgerError(RuntimeError):
    """The ledger could not be read or written (API server unreachable, too many conflicts)."""


class Ledger(Protocol):
    """Where allowed disruptions are recorded, per set (a SetRef, or its StoredKey)."""

    def now(self) -> float:
        """The ledger's clock (Unix seconds): the one clock that both stamps an entry's `expires`
        (callers add the TTL to it) and decides which entries have expired."""
        ...

    def entries(self, target: LedgerKey) -> Entries:
        """The unexpired entries of set `target`. Raises LedgerError."""
        ...

    def update(self, target: LedgerKey, plan: Plan[T]) -> T:
        """Run `plan` on the unexpired entries and write what it returns, atomically: no other
        update of `target` (in this process or another replica) lands between the read and the
        write. `plan` may run more than once (after a write conflict). Raises LedgerError."""
        ...
