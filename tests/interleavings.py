"""Deterministic interleavings of budget decisions with the view's watch events.

A decision is a sequence of steps: every call it makes on the cluster view and every read and
write of the ledger (for the Lease ledger, each GET and PUT). `Steps` numbers them as they happen
and runs injected actions before step n — a watch event applied through the view's own update
path (`Reflector.apply`), or a whole other decision (a concurrent request, on this replica or
another) — so a test can place an event between every pair of steps, one run per position.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.ledger import MemoryLedger
from guardhook.ledger.lease import LeaseLedger

Action = Callable[[], None]


class Steps:
    """Numbers the steps of the decisions under test; `at(n, action)` runs `action` before step n
    (or, for `finish`, after the last step). Actions run with counting paused, so an injected
    decision runs as one block between two steps of the outer one."""

    def __init__(self) -> None:
        self.count = 0
        self.labels: list[str] = []
        self.actions: dict[int, list[Action]] = {}
        self.paused = False

    def at(self, n: int, action: Action) -> None:
        self.actions.setdefault(n, []).append(action)

    def step(self, label: str) -> None:
        if self.paused:
            return
        n = self.count
        self.count += 1
        self.labels.append(label)
        self._run(self.actions.pop(n, []))

    def finish(self) -> None:
        """Run, once each, the actions no step reached (positions after the last step); what they
        put off again is dropped (nothing follows that could decide differently)."""
        pending = [action for n in sorted(self.actions) for action in self.actions[n]]
        self.actions.clear()
        self._run(pending)
        self.actions.clear()

    def _run(self, actions: list[Action]) -> None:
        for action in actions:
            self.paused = True
            try:
                action()
            finally:
                self.paused = False


class SteppedView:
    """`view` with every public method call counted as a step of `steps`."""

    def __init__(self, view: ClusterView, steps: Steps) -> None:
        self._view = view
        self._steps = steps

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._view, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._steps.step(f"view.{name}")
            return attr(*args, **kwargs)

        return counted


def stepped_ledger(ledger: Any, steps: Steps) -> Any:
    """Count `ledger`'s reads and writes as steps: a Lease ledger's GETs and PUTs (so another
    decision can land between its read and its compare-and-swap), a memory ledger's calls."""
    names = ("_read", "_write") if isinstance(ledger, LeaseLedger) else ("entries", "update")
    for name in names:
        original = getattr(ledger, name)

        def counted(*args: Any, _name: str = name, _original: Any = original) -> Any:
            steps.step(f"ledger.{_name}")
            return _original(*args)

        setattr(ledger, name, counted)
    return ledger


def when_unlocked(ledger: Any, steps: Steps, n: int, action: Action) -> Action:
    """`action`, deferred step by step while `ledger` (a MemoryLedger) holds its lock: a
    concurrent request would block on it there, so it runs once the update is done."""

    def run() -> None:
        if isinstance(ledger, MemoryLedger) and ledger._lock.locked():
            steps.at(steps.count, run)  # before the next step (or at finish)
            return
        action()

    return run


def terminating_event(pod: dict[str, Any], resource_version: int) -> dict[str, Any]:
    """The MODIFIED watch event the API server sends once pod `pod` is being deleted."""
    changed = copy.deepcopy(pod)
    changed["metadata"]["deletionTimestamp"] = "2026-12-01T12:00:00Z"
    changed["metadata"]["deletionGracePeriodSeconds"] = 30
    changed["metadata"]["resourceVersion"] = str(resource_version)
    return {"type": "MODIFIED", "object": changed}


def apply_watch_event(view: ClusterView, event: dict[str, Any]) -> None:
    """Apply `event` to `view` the way the live view does (a pods Reflector; no transport used)."""
    Reflector(PODS, view, transport=None).apply(event)  # type: ignore[arg-type]
