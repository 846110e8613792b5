"""Background passes over every LWS (the spare-group refresh, the per-LWS gauges of a scrape) give
the GIL away between LWS, so a request thread never waits for a whole pass (bench/background.py
measures what that does to decisions at fleet scale)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from guardhook.cluster import giveway
from guardhook.cluster.giveway import CHUNK
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.groups import counts as groups
from guardhook.planning import spare
from guardhook.server.metrics import GroupCollector, Metrics
from guardhook.server.spare_metrics import SpareGroupsCollector
from guardhook.wire import KubeObject

from helpers import PodPage, find, fleet_view

NAMES = ("llm-xl", "llm-xl-copy", "llm-xl-other")


def _three_lws(objects: list[KubeObject]) -> None:
    original = find(objects, "LeaderWorkerSet", "llm-xl")
    for name in NAMES[1:]:
        copied = copy.deepcopy(original)
        copied["metadata"]["name"] = name
        objects.append(copied)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What happened, in order: "gave way" each time giveway gave the GIL away. Only
    `giveway.give_way` is replaced: patching `time.sleep` would stop every other thread's sleeps
    too (a background thread of another test once died of it)."""
    happened: list[str] = []

    def give_way() -> None:
        happened.append("gave way")

    monkeypatch.setattr(giveway, "give_way", give_way)
    return happened


def test_each_item_is_computed_after_the_way_was_given_for_the_one_before(events: list[str]) -> None:
    def items() -> Iterator[int]:
        for n in range(3):
            events.append(f"computed {n}")
            yield n

    assert list(giveway.giving_way(items())) == [0, 1, 2]
    assert events == ["computed 0", "gave way", "computed 1", "gave way", "computed 2", "gave way"]


def _record_calls(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, verb: str, events: list[str]
) -> None:
    """Patch `module.name(view, lws)` to note "<verb> <lws name>" in `events` before it runs."""
    real = getattr(module, name)

    def recording(view: Any, lws: Any) -> Any:
        events.append(f"{verb} {lws.name}")
        return real(view, lws)

    monkeypatch.setattr(module, name, recording)


def test_the_spare_refresh_solves_one_lws_at_a_time(
    events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_calls(monkeypatch, spare, "spare_groups", "solved", events)
    view = fleet_view(_three_lws)
    collector = SpareGroupsCollector(lambda: view, interval=3600)
    collector.stop()
    collector.thread.join(timeout=20)  # its own first refresh, at start, is not this test's
    events.clear()
    collector.refresh()
    assert sorted(events[::2]) == [f"solved {name}" for name in sorted(NAMES)]
    assert events[1::2] == ["gave way"] * 3  # after each LWS, before the next is solved
    assert set(collector._snapshot) == {("serve", name) for name in NAMES}


def test_a_scrape_counts_the_groups_of_one_lws_at_a_time(
    events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_calls(monkeypatch, groups, "count_groups", "counted", events)
    view = fleet_view(_three_lws)
    families = list(GroupCollector(lambda: view).collect())
    assert events == [event for name in sorted(NAMES) for event in (f"counted {name}", "gave way")]
    assert {sample.labels["name"] for sample in families[0].samples} == set(NAMES)


def test_a_scrape_gives_way_between_the_families_it_writes(events: list[str]) -> None:
    metrics = Metrics()
    families = list(metrics.registry.collect())
    events.clear()
    text = metrics.render().decode()
    assert events == ["gave way"] * len(families)
    assert all(f"# TYPE {family.name}" in text for family in families)


def _pods(count: int) -> list[KubeObject]:
    template = find(embedded_fleet_objects(), "Pod", "llm-xl-0-1")
    pods = []
    for n in range(count):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"extra-{n}"
        pods.append(pod)
    return pods


def test_a_relist_of_a_served_view_gives_way_between_slices(events: list[str]) -> None:
    view = fleet_view()  # synced: requests are judged from it
    before = set(view.keys(PODS))
    Reflector(PODS, view, PodPage(_pods(2 * CHUNK + 1))).relist()
    slices_applied, slices_removed = 3, -(-len(before) // CHUNK)
    assert events == ["gave way"] * (slices_applied + slices_removed)
    assert set(view.keys(PODS)) == {("serve", f"extra-{n}") for n in range(2 * CHUNK + 1)}


def test_the_first_list_runs_without_pauses(events: list[str]) -> None:
    view = ClusterView("live")  # nothing judges from a view that never synced
    Reflector(PODS, view, PodPage(_pods(2 * CHUNK + 1))).relist()
    assert events == [] and view.count(PODS) == 2 * CHUNK + 1


def test_a_slice_is_applied_under_one_hold_of_the_lock() -> None:
    view = fleet_view()
    taken = []

    class Counting:
        def __init__(self, lock: Any) -> None:
            self.lock = lock

        def __enter__(self) -> None:
            taken.append(1)
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()

    before = view.count(PODS)
    view.lock = Counting(view.lock)  # type: ignore[assignment]
    held = view.upsert_all(PODS, _pods(CHUNK))
    outer = len(taken)
    assert held == [("serve", f"extra-{n}") for n in range(CHUNK)]
    assert view.count(PODS) == before + CHUNK and outer == 1  # one hold for the slice, none per pod
