"""Requests the worker (guardhook.server.readahead) refuses before the app sees them, counted by
reason for `/metrics` (guardhook.server.metrics.RefusalCollector): those never reach the app's
`guardhook_requests_total`. The worker's event loop counts, a scrape reads: one process."""

from __future__ import annotations

from collections import Counter

REASONS = {
    "no-client-certificate": 401,
    "bytes-in-flight": 503,
    "plain-http": 400,
}
"""Each reason the worker refuses a request for, and the HTTP status it answers."""

_counts: Counter[str] = Counter()


def refused(reason: str) -> None:
    """Count one request refused for `reason` (a key of REASONS)."""
    _counts[reason] += 1


def counts() -> dict[str, int]:
    """The refusals so far by reason, every reason present (0 when none)."""
    return {reason: _counts[reason] for reason in REASONS}
