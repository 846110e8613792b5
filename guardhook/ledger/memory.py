"""An in-memory ledger for one process (static cluster views): one lock makes check-and-record
atomic across the server's request threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from guardhook.ledger.base import Entries, LedgerKey, Plan, StoredKey, T, stored_key


class MemoryLedger:
    """`Ledger` held in a dict, for static views and tests. `clock` returns Unix seconds."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[StoredKey, Entries] = {}

    def now(self) -> float:
        """`clock()`: stamps expiries and checks them."""
        return self.clock()

    def entries(self, target: LedgerKey) -> Entries:
        """The unexpired entries of set `target`."""
        with self._lock:
            return self._unexpired(stored_key(target))

    def update(self, target: LedgerKey, plan: Plan[T]) -> T:
        """Run `plan` and store its entries under the one lock (see `Ledger.update`)."""
        key = stored_key(target)
        with self._lock:
            result, written = plan(self._unexpired(key))
            if written is not None:
                self._entries[key] = written
            return result

    def _unexpired(self, key: StoredKey) -> Entries:
        now = self.now()
        return tuple(e for e in self._entries.get(key, ()) if e.expires > now)
