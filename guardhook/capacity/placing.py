"""Pod placement on free node capacity, the arithmetic the capacity solver and the kept pending
placement (guardhook.capacity.derived) share: how many pods of a request a row holds, and
pending pods placed where they fit most tightly (see guardhook.capacity.solver's docstring)."""

from __future__ import annotations

import numpy as np


def pod_caps(free: np.ndarray, request: np.ndarray) -> np.ndarray:
    """How many pods of `request` (vector over free's columns, pods slot > 0) each row holds."""
    caps: np.ndarray | None = None
    # Column by column (contiguous in an F-order matrix); the request is a handful of numbers, read
    # as Python ints rather than through numpy's per-call overhead.
    for column, amount in enumerate(request.tolist()):
        if amount <= 0:
            continue
        quotients = free[:, column] // amount
        caps = quotients if caps is None else np.minimum(caps, quotients, out=caps)
    assert caps is not None, "every request holds a pods slot"
    return np.maximum(caps, 0, out=caps)


def place_pending(
    free: np.ndarray, usable: np.ndarray, requests: list[np.ndarray], counts: list[int]
) -> list[np.ndarray]:
    """Place `counts[i]` pods of `requests[i]` (distinct vectors) one at a time, largest first, each
    on the usable row where it fits most tightly (fewest such pods left; lowest row on ties),
    subtracting from `free` in place. Returns, per request, the rows of its pods in placement order
    (shorter when some fit nowhere: those claim nothing).

    One vector pass per request, not per pod: placing a pod lowers its row's count by exactly one,
    so the tightest row stays tightest until full, and one-at-a-time placement is the same as
    filling rows in (count, row) order."""
    placed: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(requests)
    order = sorted(range(len(requests)), key=lambda i: size_key(requests[i]), reverse=True)
    for i in order:
        request = requests[i]
        caps = np.where(usable, pod_caps(free, request), 0)
        rows = np.flatnonzero(caps >= 1)
        order_key = caps[rows] * len(free) + rows  # (count, row) as one sortable number
        if len(rows) > counts[i] > 0:  # every row holds at least one: the tightest counts[i] suffice
            keep = np.argpartition(order_key, counts[i] - 1)[: counts[i]]
            rows, order_key = rows[keep], order_key[keep]
        fill = rows[np.argsort(order_key)]
        before = np.concatenate(([0], np.cumsum(caps[fill])[:-1]))
        per_row = np.minimum(caps[fill], np.maximum(counts[i] - before, 0))
        used = per_row > 0
        fill, per_row = fill[used], per_row[used]
        free[fill] -= per_row[:, None] * request
        placed[i] = np.repeat(fill, per_row)
    return placed


def vector(requests: dict[str, int], resources: list[str]) -> np.ndarray:
    """`requests` as an int64 vector over `resources` (0 where absent)."""
    return np.array([requests.get(name, 0) for name in resources], dtype=np.int64)


def size_key(request: np.ndarray) -> tuple[list[int], list[int]]:
    """Sort key of a request vector for placement, largest first (its amounts sorted, then as given)."""
    values = request.tolist()
    return sorted(values, reverse=True), values
