"""Which groups of one set are broken, and why, without holding every group: a LeaderWorkerSet's
`spec.replicas` is an int32 (up to 2^31 - 1) and all its groups with no pods are broken alike.
What a set's snapshot (guardhook.groups.maker.SetSnapshot) holds, what the budget counts
(guardhook.budget) and what plans and messages name (`describe_broken`)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping

from guardhook.groups.keys import GroupKey, key_order, ordinal, ordinal_key

EMPTY_GROUPS_LISTED = 20
"""Messages name at most this many groups with no pods, then say how many more there are."""


class BrokenGroups(Mapping[GroupKey, str]):
    """group key (an ordinal, or a Hash group's key) -> why, for the groups of one LWS the view
    shows not whole, without holding every index: `spec.replicas` is an int32 (up to 2^31 - 1)
    and all groups with no pods are broken alike. `listed`: the broken groups that have pods (and
    groups added since, e.g. from the ledger); every index below `replicas` not in `populated`
    is broken with `empty_why` (None when a group with no pods counts as whole, i.e. size 0;
    a Hash LWS's such groups are counted, never named). Lookups and len() are O(1); iterating
    visits every broken group, so callers that only need membership or a count must not
    iterate, and messages use `describe_broken` (bounded)."""

    def __init__(
        self,
        listed: Mapping[GroupKey, str],
        replicas: int,
        populated: Collection[GroupKey],
        empty_why: str | None,
        recorded: Collection[GroupKey] = (),
        hashed: bool = False,
    ) -> None:
        self.listed = dict(listed)
        self.replicas = replicas
        self.populated = frozenset(populated)
        self.empty_why = empty_why
        self.recorded = frozenset(recorded)
        """The groups counted only through a ledger entry (the view shows them whole)."""
        self.hashed = hashed
        """A Hash LWS's groups: those with no pods have no key, so they are counted, never named."""

    def _empty(self, index: GroupKey) -> bool:
        # A Hash group with no pods has no key to name it by: such groups are only counted.
        number = ordinal(index)
        if self.empty_why is None or number is None:
            return False
        return 0 <= number < self.replicas and index not in self.populated

    @property
    def empty_count(self) -> int:
        """How many broken groups have no pods (and are not listed)."""
        if self.empty_why is None:
            return 0
        listed_empty = sum(1 for index in self.listed if self._empty(index))
        return max(0, self.replicas - len(self.populated)) - listed_empty

    def __getitem__(self, index: GroupKey) -> str:
        if index in self.listed:
            return self.listed[index]
        if self._empty(index):
            return self.empty_why  # type: ignore[return-value]  # _empty implies not None
        raise KeyError(index)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, str) and (index in self.listed or self._empty(index))

    def __len__(self) -> int:
        return len(self.listed) + self.empty_count

    def empty_indexes(self) -> Iterator[GroupKey]:
        """The unlisted groups with no pods, ascending (lazily: there may be 2^31 of them); none for
        a Hash LWS, whose groups with no pods have no key."""
        if self.empty_why is None or self.hashed:
            return iter(())
        keys = (ordinal_key(i) for i in range(self.replicas))
        return (key for key in keys if key not in self.populated and key not in self.listed)

    def __iter__(self) -> Iterator[GroupKey]:
        return heapq.merge(sorted(self.listed, key=key_order), self.empty_indexes(), key=key_order)

    def shown(self, limit: int = EMPTY_GROUPS_LISTED) -> list[GroupKey]:
        """The broken groups a listing names, ascending: every listed one and the first `limit`
        with no pods (`len(self) - len(shown)` are left unnamed)."""
        empty = itertools.islice(self.empty_indexes(), limit)
        return list(heapq.merge(sorted(self.listed, key=key_order), empty, key=key_order))

    def with_pods(self) -> BrokenGroups:
        """A copy holding only the broken groups that have pods (`populated`): the groups with
        none — never made, or every pod gone — are left out (`empty_count` 0)."""
        listed = {key: why for key, why in self.listed.items() if key in self.populated}
        return BrokenGroups(listed, self.replicas, self.populated, None, self.recorded, self.hashed)

    def with_group(self, index: GroupKey, why: str) -> BrokenGroups:
        """A copy with group `index` broken for `why`, unless it is broken already."""
        return self.with_groups((index,), why)

    def with_groups(self, indexes: Iterable[GroupKey], why: str, recorded: bool = False) -> BrokenGroups:
        """A copy with every group in `indexes` broken for `why`, unless broken already;
        `recorded`: they count only through the ledger (see `recorded`)."""
        listed = dict(self.listed)
        added = set()
        for index in indexes:
            if index not in self:
                listed[index] = why
                added.add(index)
        marked = self.recorded | added if recorded else self.recorded
        return BrokenGroups(listed, self.replicas, self.populated, self.empty_why, marked, self.hashed)


def describe_broken(broken: BrokenGroups, label: str = "group") -> str:
    """`group 1 (why); group 3 (why)`, or "none" (`label` names one group: "group", "PodGroup").
    Every broken group with pods is named, and at most EMPTY_GROUPS_LISTED of those with no pods,
    then "and N more groups with no pods (why)"."""
    shown = broken.shown()
    parts = [f"{label} {index} ({broken[index]})" for index in shown]
    more = len(broken) - len(shown)
    if more > 0:
        # a Hash LWS's groups with no pods have no key: counted, never named
        counted = f"and {more} more" if parts else str(more)
        parts.append(f"{counted} group{'s' if more > 1 else ''} with no pods ({broken.empty_why})")
    return "; ".join(parts) or "none"


def groups_broken(count: int, replicas: int | None = None, unit: str = "group") -> str:
    """`1 of its 4 groups is broken` / `2 of its groups are broken`: a count of broken groups (or
    `unit`s: "gang") with the verb agreeing."""
    total = f"{replicas} " if replicas is not None else ""
    return f"{count} of its {total}{unit}s {'is' if count == 1 else 'are'}"
