"""Long passes over the view give the GIL, and the view's lock, away as they go.

The serving process judges admission requests in threads that share one interpreter lock, and the
view's lock, with its background work: a reflector applying a relist (150,000 pods after a `410
Gone`), the spare-group refresh (the capacity solver once per LWS, every few seconds) and the
per-LWS gauges of a /metrics scrape (the health of every group). At fleet scale such a pass is
tens of milliseconds to seconds of Python. A thread keeps the GIL until it blocks or the
interpreter's switch interval (5 ms) forces it out, and a lock taken and released per object is
taken again by the same running thread before a woken waiter gets to it: measured with
`bench/background.py` (5,000 nodes, 500 LWS), a decision's p99 went from ~0.5 ms to 1-8 ms while
a refresh or scrape ran, and to 130 ms during a pod relist. So these passes work in small steps
(one LWS, or `CHUNK` objects under one hold of the view's lock) and give the GIL away between
steps (`time.sleep(0)` releases it), so a waiting request thread runs before the next step.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

Item = TypeVar("Item")

CHUNK = 16
"""Objects a relist applies (or removes) under one hold of the view's lock: a few hundred
microseconds (bench/background.py: of 8, 16, 32, 64 and 256, 16 gave the lowest p99 during a relist)."""


def give_way() -> None:
    """Give the GIL away once (`time.sleep(0)`), so a thread waiting for it runs now."""
    time.sleep(0)


def giving_way(items: Iterable[Item]) -> Iterator[Item]:
    """Each of `items` (best computed lazily, one step at a time), with the GIL given away after
    each (`give_way`): a request thread waiting for it runs before the next item is computed."""
    for item in items:
        yield item
        give_way()


def chunks(items: Sequence[Item], size: int = CHUNK) -> Iterator[Sequence[Item]]:
    """`items` in consecutive slices of at most `size`."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
