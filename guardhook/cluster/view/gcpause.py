"""The cyclic garbage collector paused while a reflector applies a list.

A list of 150,000 pods allocates millions of long-lived objects (the view's records and indexes).
Each allocation burst triggers the cyclic collector, and its full collections walk the whole,
growing heap: measured with `bench/view_store.py`, about half the CPU time of applying the initial
list went to collections that found nothing to free (records hold no reference cycles; reference
counting frees the decoded pages). So the collector is paused while any list is applied and
resumed when the last one ends; `guardhook serve` then moves the synced view out of its reach
(`gc.freeze`, guardhook.server.webhook_server.freeze_heap_when_ready).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause `gc` automatic collection for the block. Nested and concurrent blocks (reflectors of
    several kinds listing at once) share one pause; collection resumes when the last block ends,
    and only if it was enabled when the first began (a program that disabled it keeps it off)."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
