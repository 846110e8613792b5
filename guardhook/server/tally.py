"""Counters and histograms counted on the request path without prometheus_client's per-call cost.

prometheus_client takes a lock, checks the value and finds the bucket in Python on every `inc` and
`observe`: five of them a review (its answer, its latency, each policy's time and decision) were
~10 µs of a review's ~100 µs in one process (issue 53's profile). Here each request thread counts
into plain dicts of its own (no lock: no other thread writes them; `bisect` finds the bucket in
C), and a scrape sums every thread's dicts into the same families prometheus_client's Counter and
Histogram export: the same names, help, labels, buckets and `_created` series.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

Key = tuple[str, ...]
"""A series: its metric's name, then its label values in the metric's label order."""


@dataclass(frozen=True)
class Family:
    """One exported metric: kind "counter" or "histogram", its name (a counter's without
    `_total`), help, label names and (histograms) bucket upper bounds."""

    kind: str
    name: str
    documentation: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


@dataclass
class _ThreadCounts:
    counters: dict[Key, float] = field(default_factory=dict)
    histograms: dict[Key, list[float]] = field(default_factory=dict)
    """Per series: the count in each bucket (not cumulative; the last is +Inf), then the sum."""
    created: dict[Key, float] = field(default_factory=dict)


class Tally(Collector):
    """Counts for `families`, kept per thread, exported as prometheus families at `collect`.
    Register it on a registry like any collector."""

    def __init__(self, families: Sequence[Family]) -> None:
        self.families = tuple(families)
        self._bounds = {f.name: f.buckets for f in self.families if f.kind == "histogram"}
        self._local = threading.local()
        self._threads: list[_ThreadCounts] = []
        self._lock = threading.Lock()  # only to add a thread's counts to the list, once a thread

    def _mine(self) -> _ThreadCounts:
        counts: _ThreadCounts | None = getattr(self._local, "counts", None)
        if counts is None:
            counts = self._local.counts = _ThreadCounts()
            with self._lock:
                self._threads.append(counts)
        return counts

    def inc(self, key: Key, amount: float = 1.0) -> None:
        """Add `amount` to the counter series `key` (its family's name, then its label values)."""
        counts = self._mine()
        counters = counts.counters
        if key in counters:
            counters[key] += amount
        else:
            counts.created[key] = time.time()
            counters[key] = amount

    def observe(self, key: Key, value: float) -> None:
        """Count `value` in the histogram series `key` (its family's name, then its label values)."""
        counts = self._mine()
        histogram = counts.histograms.get(key)
        if histogram is None:
            bounds = self._bounds[key[0]]
            histogram = counts.histograms[key] = [0.0] * (len(bounds) + 2)
            counts.created[key] = time.time()
            histogram[bisect_left(bounds, value)] += 1  # le: a value on a bound counts in its bucket
        else:
            histogram[bisect_left(self._bounds[key[0]], value)] += 1
        histogram[-1] += value

    def value(self, key: Key) -> float:
        """A counter series' total over every thread (0 when never counted)."""
        return sum(counts.counters.get(key, 0.0) for counts in list(self._threads))

    def collect(self) -> Iterator[Metric]:
        counters: dict[Key, float] = {}
        histograms: dict[Key, list[float]] = {}
        created: dict[Key, float] = {}
        for counts in list(self._threads):
            # dict copies are one C call each: a thread counting meanwhile is not seen half-way
            for key, amount in counts.counters.copy().items():
                counters[key] = counters.get(key, 0.0) + amount
            for key, buckets in counts.histograms.copy().items():
                mine = list(buckets)
                total = histograms.get(key)
                histograms[key] = mine if total is None else [a + b for a, b in zip(total, mine, strict=True)]
            for key, when in counts.created.copy().items():
                created[key] = min(when, created.get(key, when))
        with_created = getattr(prometheus_metrics, "_use_created", True)
        for family in self.families:
            chosen = counters if family.kind == "counter" else histograms
            # in the order the series were first counted, as prometheus_client lists its children
            series = sorted((key for key in chosen if key[0] == family.name), key=created.__getitem__)
            if family.kind == "counter":
                counter = CounterMetricFamily(family.name, family.documentation, labels=family.labels)
                for key in series:
                    counter.add_metric(
                        list(key[1:]), counters[key], created=created[key] if with_created else None
                    )
                yield counter
                continue
            histogram = HistogramMetricFamily(family.name, family.documentation, labels=family.labels)
            bounds = [*map(floatToGoString, family.buckets), "+Inf"]
            for key in series:
                observed = histograms[key]
                cumulative, running = [], 0.0
                for bound, count in zip(bounds, observed[:-1], strict=True):
                    running += count
                    cumulative.append((bound, running))
                histogram.add_metric(list(key[1:]), cumulative, observed[-1])
                if with_created:
                    labels = dict(zip(family.labels, key[1:], strict=True))
                    histogram.samples.append(Sample(family.name + "_created", labels, created[key]))
            yield histogram
