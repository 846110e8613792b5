"""guardhook.server.tally counts the request path's metrics per thread and exports exactly what
prometheus_client's own Counter and Histogram export for the same observations (issue 53)."""

from __future__ import annotations

import re
import threading
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from guardhook.server import tally as tally_module
from guardhook.server.metrics import LATENCY_BUCKETS
from guardhook.server.tally import Family, Tally

FAMILIES = (
    Family("counter", "t_requests", "Requests.", ("endpoint", "code")),
    Family("histogram", "t_seconds", "Seconds.", ("endpoint",), LATENCY_BUCKETS),
)
# on a bound, between bounds, below the first and past the last (+Inf)
VALUES = (0.0005, 0.0001, 0.002, 0.0031, 0.01, 7.0, 2.5, 0.00049, 0.3)


def _created_masked(text: bytes) -> str:
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", text.decode())


def test_the_tally_exports_what_prometheus_client_exports_for_the_same_counts() -> None:
    theirs = CollectorRegistry()
    counter = Counter("t_requests", "Requests.", ["endpoint", "code"], registry=theirs)
    histogram = Histogram("t_seconds", "Seconds.", ["endpoint"], buckets=LATENCY_BUCKETS, registry=theirs)
    ours = CollectorRegistry()
    tally = Tally(FAMILIES)
    ours.register(tally)
    for n, value in enumerate(VALUES):
        endpoint, code = ("validate", "200") if n % 3 else ("mutate", "400")
        counter.labels(endpoint, code).inc()
        tally.inc(("t_requests", endpoint, code))
        histogram.labels(endpoint).observe(value)
        tally.observe(("t_seconds", endpoint), value)
    assert _created_masked(generate_latest(ours)) == _created_masked(generate_latest(theirs))
    assert tally.value(("t_requests", "validate", "200")) == 6


def test_counts_from_many_threads_are_all_summed() -> None:
    tally = Tally(FAMILIES)
    each = 2_000

    def count() -> None:
        for _ in range(each):
            tally.inc(("t_requests", "validate", "200"))
            tally.observe(("t_seconds", "validate"), 0.001)

    threads = [threading.Thread(target=count) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tally.value(("t_requests", "validate", "200")) == 8 * each
    registry = CollectorRegistry()
    registry.register(tally)
    assert registry.get_sample_value("t_seconds_count", {"endpoint": "validate"}) == 8 * each
    assert registry.get_sample_value("t_seconds_bucket", {"endpoint": "validate", "le": "0.0005"}) == 0
    assert registry.get_sample_value("t_seconds_bucket", {"endpoint": "validate", "le": "0.001"}) == 8 * each


def test_a_series_counted_by_several_threads_was_created_when_first_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally(FAMILIES)
    for now in (100.0, 200.0):  # a thread counts the series first, another later
        monkeypatch.setattr(tally_module, "time", SimpleNamespace(time=lambda now=now: now))
        counting = threading.Thread(
            target=lambda: (
                tally.inc(("t_requests", "validate", "200")),
                tally.observe(("t_seconds", "validate"), 0.001),
            )
        )
        counting.start()
        counting.join()
    registry = CollectorRegistry()
    registry.register(tally)
    assert registry.get_sample_value("t_requests_created", {"endpoint": "validate", "code": "200"}) == 100.0
    assert registry.get_sample_value("t_seconds_created", {"endpoint": "validate"}) == 100.0
    assert registry.get_sample_value("t_requests_total", {"endpoint": "validate", "code": "200"}) == 2
