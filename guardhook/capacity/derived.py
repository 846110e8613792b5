"""Decision-time arrays kept current per changed row, instead of made again after every change.

A pod change moves one row of the capacity index, yet every array a decision reads (free capacity
after the pending pods are placed, how many pods of a shape each row holds) spans every row: made
again per decision they cost a 65,000-node cluster most of its decision (docs/performance.md).
`PendingPlan` keeps them for one set of resource columns and, at each read, applies only the rows
the index reports changed (`CapacityIndex.changed_since`):

- the free amounts of a changed row are read again (`CapacityIndex.free_rows`);
- the pending placement (guardhook.capacity.placing.place_pending: each class of pending pods fills
  the usable rows in (pods it holds, row) order) is kept as it was unless a changed row's place in
  that order moved at or before the last row a class fills — then the rows filled could differ,
  and the placement is made again over all rows, as before;
- pod counts per request (`caps`) are divided again on the changed rows only.

The answers are those of making everything again (tests/test_capacity_incremental.py compares the
two after random pod, node and claim changes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from guardhook.capacity.index import CapacityIndex, PendingClass
from guardhook.capacity.placing import pod_caps, size_key, vector

UNPLACED = np.iinfo(np.int64).max
"""Order key of a row a class cannot use (not usable, or too full for one pod)."""

CAPS_KEPT = 16
"""Pod-count arrays (`PendingPlan.caps`) kept per plan before it forgets them all."""


class _Placed:
    """One pending class's placement: the rows it fills in order, the pods per row, and the order
    key of the last row filled (`limit`; the largest key there is when the class did not place
    every pod, so that any usable row's move matters)."""

    def __init__(self, entry: PendingClass, request: np.ndarray) -> None:
        self.request = request
        self.count = entry.count
        self.group_pods = dict(entry.group_pods)
        self.fill = np.zeros(0, dtype=np.intp)
        self.per_row = np.zeros(0, dtype=np.int64)
        self.limit = UNPLACED - 1
        self._amounts: dict[int, int] = {}

    def place(self, free: np.ndarray, usable: np.ndarray) -> None:
        """Place this class on `free` (changed in place) exactly as `place_pending` places one
        request, keeping what `moved` needs."""
        caps = np.where(usable, pod_caps(free, self.request), 0)
        rows = np.flatnonzero(caps >= 1)
        order_key = caps[rows] * len(free) + rows  # (count, row) as one sortable number
        count = self.count
        if len(rows) > count > 0:  # every row holds at least one: the tightest `count` suffice
            keep = np.argpartition(order_key, count - 1)[:count]
            rows, order_key = rows[keep], order_key[keep]
        by_order = np.argsort(order_key)
        fill, order_key = rows[by_order], order_key[by_order]
        before = np.concatenate(([0], np.cumsum(caps[fill])[:-1]))
        per_row = np.minimum(caps[fill], np.maximum(count - before, 0))
        used = per_row > 0
        self.fill, self.per_row = fill[used], per_row[used]
        placed = int(self.per_row.sum())
        self.limit = int(order_key[used][-1]) if placed >= count and placed else UNPLACED - 1
        self._amounts = dict(zip(self.fill.tolist(), self.per_row.tolist(), strict=True))
        free[self.fill] -= self.per_row[:, None] * self.request

    def taken(self, rows: np.ndarray) -> np.ndarray:
        """What this class takes from each of `rows` (len(rows) × columns)."""
        pods = np.array([self._amounts.get(row, 0) for row in rows.tolist()], dtype=np.int64)
        return pods[:, None] * self.request

    def moved(self, old: np.ndarray, new: np.ndarray, rows: np.ndarray, usable: np.ndarray, n: int) -> bool:
        """Whether `rows` going from `old` to `new` free amounts (this class's input) could change
        which rows it fills or how many pods each gets."""
        old_key, new_key = self._keys(old, rows, usable, n), self._keys(new, rows, usable, n)
        changed = old_key != new_key
        return bool((changed & ((old_key <= self.limit) | (new_key <= self.limit))).any())

    def _keys(self, free: np.ndarray, rows: np.ndarray, usable: np.ndarray, n: int) -> np.ndarray:
        caps = np.where(usable, pod_caps(free, self.request), 0)
        return np.where(caps >= 1, caps * n + rows, UNPLACED)

    def pods(self) -> np.ndarray:
        """The rows of its pods in placement order (place_pending's answer for this class)."""
        return np.repeat(self.fill, self.per_row)


class PendingPlan:
    """Free capacity over `resources` after the pending pods are placed, kept current per changed
    row (see the module docstring). Read it under the index's lock, after `sync`; the arrays it
    hands out are read-only views that stay valid until the index's state moves."""

    def __init__(self, resources: tuple[str, ...]) -> None:
        self.resources = resources
        self._mark: tuple[int, ...] | None = None
        self._pending_version = -1
        self._n = 0
        self._after = np.zeros((0, len(resources)), dtype=np.int64, order="F")
        self._usable = np.zeros(0, dtype=bool)
        self._classes: list[_Placed] = []
        self._caps: dict[tuple[bytes, bytes], np.ndarray] = {}
        self.rebuilds = 0
        """How many times the whole plan was made again (for tests and profiles)."""

    def sync(self, index: CapacityIndex) -> None:
        """Bring the plan to the index's current state. Hold the index's lock."""
        if self._mark is None or index.pending_version != self._pending_version:
            self._rebuild(index)
            return
        mark, rows = index.changed_since(self._mark)
        if rows is None:
            self._rebuild(index)
            return
        self._mark = mark
        if not len(rows):
            return
        new_base = index.free_rows(self.resources, rows)
        taken = [placed.taken(rows) for placed in self._classes]
        total = np.zeros_like(new_base)
        for part in taken:
            total += part
        old_base = self._after[rows] + total
        before = np.zeros_like(new_base)
        usable = self._usable[rows]
        for placed, part in zip(self._classes, taken, strict=True):
            if placed.moved(old_base - before, new_base - before, rows, usable, self._n):
                self._rebuild(index)
                return
            before += part
        self._after[rows] = new_base - total
        for (request, minus), caps in self._caps.items():
            caps[rows] = _caps_of(self._after[rows], request, minus)

    def _rebuild(self, index: CapacityIndex) -> None:
        self.rebuilds += 1
        self._mark = index.mark()
        self._pending_version = index.pending_version
        pending = index.pending()
        free = index.free(self.resources)
        self._n = len(free)
        self._usable = index.usable()
        entries = [(entry, vector(entry.requests, list(self.resources))) for entry in pending]
        # place_pending's order: largest first, ties in the index's order (a stable sort)
        entries.sort(key=lambda pair: size_key(pair[1]), reverse=True)
        self._classes = [_Placed(entry, request) for entry, request in entries]
        for placed in self._classes:
            placed.place(free, self._usable)
        self._after = free
        self._caps = {}

    def free(self) -> np.ndarray:
        """Free capacity after the pending pods (rows × resources), read-only."""
        return _read_only(self._after)

    def holds(self, free: np.ndarray) -> bool:
        """Whether `free` is this plan's `free()` as it stands (so `caps` answers for it)."""
        return free.base is self._after

    def group_rows(self, namespace: str) -> np.ndarray:
        """Bool per row: receives a pending pod of an LWS group in `namespace` (within a class,
        the group pods are taken to be placed first, as `solver._place_pending` takes them)."""
        taken = np.zeros(self._n, dtype=bool)
        for placed in self._classes:
            group = placed.group_pods.get(namespace, 0)
            if group > 0:
                taken[placed.pods()[:group]] = True
        return taken

    def caps(self, request: np.ndarray, minus: np.ndarray | None = None) -> np.ndarray:
        """Pods of `request` each row holds on `free()` (less `minus` first, floored at 0, when
        given), read-only: `placing.pod_caps` kept per changed row."""
        key = (request.tobytes(), b"" if minus is None else minus.tobytes())
        found = self._caps.get(key)
        if found is None:
            if len(self._caps) >= CAPS_KEPT:
                self._caps.clear()
            found = self._caps[key] = _caps_of(self._after, key[0], key[1])
        return _read_only(found)


def _caps_of(free: np.ndarray, request: bytes, minus: bytes) -> np.ndarray:
    vector_ = np.frombuffer(request, dtype=np.int64)
    if minus:
        free = np.maximum(free - np.frombuffer(minus, dtype=np.int64), 0)
    return pod_caps(free, vector_)


def _read_only(array: np.ndarray) -> np.ndarray:
    view: Any = array.view()
    view.flags.writeable = False
    return view


def plan_for(index: CapacityIndex, resources: tuple[str, ...]) -> PendingPlan:
    """The index's plan over `resources`, brought to its current state. Hold the index's lock."""
    plan: PendingPlan = index.kept(("pending plan", resources), lambda: PendingPlan(resources))
    plan.sync(index)
    return plan
