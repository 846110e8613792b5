"""`guardhook_lws_spare_groups{namespace,lws}`: how many more whole groups of each LWS fit in free
capacity now (guardhook.planning.spare), from the live view.

The count runs the capacity solver per LWS, so it is never computed on a request (admission or
scrape): a background thread recomputes a snapshot every `interval` seconds and a scrape reads the
latest one. The thread holds the collector only weakly and ends once the collector is gone.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from guardhook.cluster.giveway import giving_way
from guardhook.cluster.view.store import ClusterView
from guardhook.planning.spare import each_spare

log = logging.getLogger(__name__)

SPARE_METRIC = "guardhook_lws_spare_groups"
DEFAULT_INTERVAL_SECONDS = 5.0


class SpareGroupsCollector(Collector):
    """Serves the latest spare-group snapshot of `view()` (called on each recompute), refreshed
    every `interval` seconds by a daemon thread started with the collector. Nothing is reported
    until the view has synced."""

    def __init__(self, view: Callable[[], ClusterView], interval: float = DEFAULT_INTERVAL_SECONDS) -> None:
        self.view = view
        self.interval = interval
        self._snapshot: dict[tuple[str, str], int] = {}
        self._stop = threading.Event()
        args = (weakref.ref(self), self._stop, interval)
        self.thread = threading.Thread(
            target=_refresh_loop, args=args, name="guardhook-spare-groups", daemon=True
        )
        self.thread.start()

    def refresh(self) -> None:
        """Recompute the snapshot from the current view (skipped until the view has synced)."""
        view = self.view()
        if not view.synced:
            return
        # One LWS at a time, giving the GIL away between them (guardhook.cluster.giveway); the
        # snapshot is replaced whole, so a scrape sees one.
        self._snapshot = dict(giving_way(each_spare(view)))

    def stop(self) -> None:
        """End the refresh thread."""
        self._stop.set()

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            SPARE_METRIC,
            "More whole groups of a LeaderWorkerSet that fit in free capacity now (capacity solver, "
            "spare reserve ignored; recomputed every few seconds).",
            labels=["namespace", "name"],  # as every per-LWS gauge
        )
        for (namespace, name), spare in sorted(self._snapshot.items()):
            family.add_metric([namespace, name], spare)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


def _refresh_loop(ref: weakref.ref[SpareGroupsCollector], stop: threading.Event, interval: float) -> None:
    while not stop.is_set():
        collector = ref()
        if collector is None:
            return
        try:
            collector.refresh()
        except Exception:  # a metric must never take the server down; try again next round
            log.exception("spare groups could not be counted")
        del collector
        stop.wait(interval)
