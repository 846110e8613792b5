"""`guardhook_lws_spare_groups{namespace,name}`: exported by the real server, recomputed from the view
by a background thread (never by a scrape), following the view as it changes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from test_metrics import scrape, value

from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.server import spare_metrics
from guardhook.server.spare_metrics import SPARE_METRIC, SpareGroupsCollector

from conftest import Server
from helpers import fleet_view

XL = {"namespace": "serve", "name": "llm-xl"}


def wait_for(check: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_the_server_exports_spare_groups_of_the_sample_fleet(server: Server) -> None:
    # gpu-node-16..19 are free: room for one more 4-pod group of llm-xl.
    wait_for(lambda: (SPARE_METRIC, tuple(sorted(XL.items()))) in scrape(server))
    assert value(scrape(server), SPARE_METRIC, **XL) == 1


def test_every_per_lws_gauge_labels_its_lws_alike(server: Server) -> None:
    # One convention, `namespace` and `name`, so rules and panels can join the gauges.
    wait_for(lambda: (SPARE_METRIC, tuple(sorted(XL.items()))) in scrape(server))
    per_lws = {
        name: dict(labels) for name, labels in scrape(server) if dict(labels).get("namespace") == "serve"
    }
    assert SPARE_METRIC in per_lws and "guardhook_lws_groups_desired" in per_lws
    assert {name: set(labels) for name, labels in per_lws.items()} == {
        name: {"namespace", "name"} for name in per_lws
    }


def sample(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value(SPARE_METRIC, XL)


def test_the_gauge_follows_the_view() -> None:
    view = fleet_view()
    registry = CollectorRegistry()
    collector = SpareGroupsCollector(lambda: view, interval=0.05)
    registry.register(collector)
    try:
        wait_for(lambda: sample(registry) == 1)
        for key in view.keys(PODS):
            if key[1].startswith("llm-xl-3"):
                view.remove(PODS, key)  # group 3 gone: its 4 nodes are free
        wait_for(lambda: sample(registry) == 2)
    finally:
        collector.stop()


def test_nothing_is_reported_before_the_view_has_synced() -> None:
    view = ClusterView(source="live")
    collector = SpareGroupsCollector(lambda: view, interval=0.05)
    try:
        collector.refresh()
        assert f"{SPARE_METRIC}{{" not in generate_latest(_registry_of(collector)).decode()
    finally:
        collector.stop()


def test_only_the_background_thread_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    counted_on: list[str] = []
    real = spare_metrics.each_spare

    def counting(view: ClusterView) -> Any:
        counted_on.append(threading.current_thread().name)
        return real(view)

    monkeypatch.setattr(spare_metrics, "each_spare", counting)
    view = fleet_view()
    collector = SpareGroupsCollector(lambda: view, interval=0.05)
    registry = _registry_of(collector)
    try:
        wait_for(lambda: sample(registry) == 1)
        for _ in range(20):
            generate_latest(registry)  # scrapes read the snapshot
        assert counted_on and set(counted_on) == {"guardhook-spare-groups"}
    finally:
        collector.stop()


def test_stop_ends_the_thread() -> None:
    view = fleet_view()
    collector = SpareGroupsCollector(lambda: view, interval=0.05)
    collector.stop()
    collector.thread.join(timeout=20)
    assert not collector.thread.is_alive()


def _registry_of(collector: SpareGroupsCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry
