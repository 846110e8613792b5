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

from collections.abc import Iterable
from typing import Any

import numpy as np

from guardhook.capacity.index import CapacityIndex, PendingClass
from guardhook.capacity.placing import pod_caps, size_key, vector

UNPLACED = np.iinfo(np.int64).max
"""Order key of a row a class cannot use (not usable, or too full for one pod)."""

RESERVE = 64
"""Rows kept in order past the ones a pending class fills, so that a filled row that loosens
is replaced from them rather than by placing the class again over every row."""

CAPS_KEPT = 8
"""Pod-count arrays (`PendingPlan.caps`) kept per plan before it forgets them all (at 65,000 rows
each is 0.5 MB; a plan's free matrix ~2 MB, and the index keeps at most KEPT_KEPT plans)."""


class _Placed:
    """One pending class's placement, kept per changed row.

    `keys`: the usable rows that hold a pod of the class with their order key (pods it holds, row),
    every such row whose key is at most `threshold` (so any row left out orders after every row
    kept); `fill` / `per_row`: the rows it fills in order and the pods per row (`amounts` the
    same as a map); `limit`: the order key of the last row filled (the largest key there is when
    the class did not place every pod, so that any usable row's move matters)."""

    def __init__(self, entry: PendingClass, request: np.ndarray, n: int) -> None:
        self.request = request
        self.count = entry.count
        self.group_pods = dict(entry.group_pods)
        self.n = n
        self.keys: dict[int, int] = {}
        self.caps: dict[int, int] = {}
        self.threshold = UNPLACED - 1
        self.fill = np.zeros(0, dtype=np.intp)
        self.per_row = np.zeros(0, dtype=np.int64)
        self.amounts: dict[int, int] = {}
        self.limit = UNPLACED - 1

    def place(self, free: np.ndarray, usable: np.ndarray) -> None:
        """Place this class on `free` (changed in place) as `place_pending` places one request,
        keeping the `RESERVE` next rows in order beside the ones it needs."""
        caps = np.where(usable, pod_caps(free, self.request), 0)
        rows = np.flatnonzero(caps >= 1)
        caps = caps[rows]
        keys = caps * self.n + rows  # (count, row) as one sortable number, as place_pending orders
        kept = self.count + RESERVE
        self.threshold = UNPLACED - 1
        if len(rows) > kept:
            part = np.argpartition(keys, kept - 1)[:kept]
            rows, keys, caps = rows[part], keys[part], caps[part]
            self.threshold = int(keys.max())
        self.keys = dict(zip(rows.tolist(), keys.tolist(), strict=True))
        self.caps = dict(zip(rows.tolist(), caps.tolist(), strict=True))
        self._fill()  # every kept row holds a pod and at least `count` are kept: it places them all
        free[self.fill] -= self.per_row[:, None] * self.request

    def _fill(self) -> bool:
        """Fill the kept rows in key order; False when they hold too few pods while rows past
        `threshold` were left out (which could hold the rest)."""
        rows = np.fromiter(self.keys.keys(), dtype=np.intp, count=len(self.keys))
        keys = np.fromiter(self.keys.values(), dtype=np.int64, count=len(self.keys))
        by_key = np.argsort(keys)
        rows, keys = rows[by_key], keys[by_key]
        caps = np.array([self.caps[row] for row in rows.tolist()], dtype=np.int64)
        before = np.concatenate(([0], np.cumsum(caps)[:-1]))
        per_row = np.minimum(caps, np.maximum(self.count - before, 0))
        placed = int(per_row.sum())
        if placed < self.count and self.threshold < UNPLACED - 1:
            return False
        used = per_row > 0
        self.fill, self.per_row = rows[used], per_row[used]
        self.limit = int(keys[used][-1]) if placed >= self.count else UNPLACED - 1
        self.amounts = dict(zip(self.fill.tolist(), self.per_row.tolist(), strict=True))
        return True

    def update(
        self, rows: np.ndarray, old: np.ndarray, new: np.ndarray, usable: np.ndarray
    ) -> dict[int, tuple[int, int]] | None:
        """`rows` went from `old` to `new` free amounts (this class's input; `usable` their
        flags): keep the keys, fill again when the rows filled could differ. Returns the rows
        whose pods moved, {row: (pods before, pods now)}, or None when the kept rows no longer
        suffice (the placement must be made again over every row)."""
        old_keys, _ = self._keys(old, rows, usable)
        new_keys, new_caps = self._keys(new, rows, usable)
        moved = False
        for row, old_key, new_key, caps in zip(
            rows.tolist(), old_keys.tolist(), new_keys.tolist(), new_caps.tolist(), strict=True
        ):
            if old_key == new_key:
                continue
            moved = moved or old_key <= self.limit or new_key <= self.limit
            if new_key <= self.threshold:
                self.keys[row], self.caps[row] = new_key, caps
            else:
                self.keys.pop(row, None)
                self.caps.pop(row, None)
        if not moved:
            return {}
        before = self.amounts
        if not self._fill():
            return None
        return {
            row: (before.get(row, 0), self.amounts.get(row, 0))
            for row in before.keys() | self.amounts.keys()
            if before.get(row, 0) != self.amounts.get(row, 0)
        }

    def _keys(self, free: np.ndarray, rows: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Order keys of `rows` (`free` and `usable` given for them; UNPLACED where no pod fits)
        and the pods each holds."""
        caps = np.where(usable, pod_caps(free, self.request), 0)
        return np.where(caps >= 1, caps * self.n + rows, UNPLACED), caps

    def at(self, rows: Iterable[int]) -> np.ndarray:
        """Pods placed on each of `rows`."""
        return np.array([self.amounts.get(row, 0) for row in rows], dtype=np.int64)

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
        mark, changed = index.changed_since(self._mark)
        if changed is None:
            self._rebuild(index)
            return
        self._mark = mark
        if not len(changed):
            return
        rows = changed.tolist()
        # Each class's input on the rows in play, before and after: the free amounts less what
        # the classes placed before it took. A class whose pods move brings the rows they
        # left or reached into play for the classes after it.
        new_in = index.free_rows(self.resources, changed)
        old_in = self._after[changed]
        for placed in self._classes:
            old_in += placed.at(rows)[:, None] * placed.request
        for at, placed in enumerate(self._classes):
            was = placed.at(rows)
            moved = placed.update(np.array(rows, dtype=np.intp), old_in, new_in, self._usable[rows])
            if moved is None:
                self._rebuild(index)
                return
            in_play = set(rows)
            extra = [row for row in moved if row not in in_play]
            if extra:
                known = self._after[
                    extra
                ]  # their input to this class, unchanged: after + what it and later took
                for later in self._classes[at + 1 :]:
                    known += later.at(extra)[:, None] * later.request
                known += np.array([moved[row][0] for row in extra], dtype=np.int64)[:, None] * placed.request
                rows += extra
                old_in, new_in = np.vstack([old_in, known]), np.vstack([new_in, known])
                was = np.concatenate([was, [moved[row][0] for row in extra]]).astype(np.int64)
            old_in -= was[:, None] * placed.request
            new_in -= placed.at(rows)[:, None] * placed.request
        self._after[rows] = new_in
        for (request, minus), caps in self._caps.items():
            caps[rows] = _caps_of(new_in, request, minus)

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
        self._classes = [_Placed(entry, request, self._n) for entry, request in entries]
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
        the group pods are taken to be placed first)."""
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
