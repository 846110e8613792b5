"""The reflector and store fed by recorded list pages and watch event sequences (no network)."""

from __future__ import annotations

import copy
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from guardhook.cluster.view.live import (
    Backoff,
    Gone,
    LiveView,
    NotServed,
    Reflector,
    Versions,
    WatchError,
    compact_version,
    older,
    snapshot,
)
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.cluster.view.store import KINDS, LEADERWORKERSETS, NODES, PODS, SERVICES, ClusterView
from guardhook.groups.index import group_pods

Step = Any  # a page/event list, or an exception to raise


class Scripted:
    """A Transport replaying recorded list pages and watch streams. When the watch script runs out
    it stops `reflector` (so `run()` returns) and yields nothing."""

    def __init__(self, pages: list[Step] = (), watches: list[Step] = ()) -> None:  # type: ignore[assignment]
        self.pages = deque(pages)
        self.watches = deque(watches)
        self.list_calls: list[str | None] = []
        self.watch_calls: list[str] = []
        self.reflector: Reflector | None = None

    def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
        self.list_calls.append(continue_token)
        step = self.pages.popleft()
        if isinstance(step, BaseException):
            raise step
        return copy.deepcopy(step)

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        self.watch_calls.append(resource_version)
        if not self.watches:
            assert self.reflector is not None
            self.reflector.stop()
            return iter(())
        step = self.watches.popleft()
        if isinstance(step, BaseException):
            raise step
        return iter(copy.deepcopy(step))

    def close(self) -> None:
        pass


@functools.cache
def _fleet() -> list[dict[str, Any]]:
    return embedded_fleet_objects()


def fleet(kind: str) -> list[dict[str, Any]]:
    wanted = {PODS: "Pod", NODES: "Node", LEADERWORKERSETS: "LeaderWorkerSet", SERVICES: "Service"}[kind]
    objects = [copy.deepcopy(o) for o in _fleet() if o.get("kind") == wanted]
    for number, obj in enumerate(objects):
        obj["metadata"]["resourceVersion"] = str(10 + number)
    return objects


def page(items: list[dict[str, Any]], version: str, token: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": version}
    if token:
        meta["continue"] = token
    return {"kind": "List", "metadata": meta, "items": items}


def with_version(obj: dict[str, Any], version: str, ready: bool | None = None) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = version
    if ready is not None:
        for condition in obj["status"]["conditions"]:
            if condition["type"] == "Ready":
                condition["status"] = "True" if ready else "False"
    return obj


def pod_named(name: str) -> dict[str, Any]:
    return next(p for p in fleet(PODS) if p["metadata"]["name"] == name)


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": version}}}


def reflector(kind: str, transport: Scripted, view: ClusterView | None = None) -> Reflector:
    made = Reflector(kind, view or ClusterView("test"), transport, backoff=Backoff(0.001, 0.002))
    transport.reflector = made
    return made


def test_relist_follows_continue_tokens_and_records_the_list_version() -> None:
    pods = fleet(PODS)
    pages = [page(pods[:5], "500", "t1"), page(pods[5:10], "500", "t2"), page(pods[10:], "500")]
    transport = Scripted(pages=pages)
    r = reflector(PODS, transport)
    r.relist()
    assert transport.list_calls == [None, "t1", "t2"]
    assert r.view.count(PODS) == 16
    assert r.resource_version == "500"
    assert len(group_pods(r.view, "serve", "llm-xl", "2")) == 4
    assert r.view.pods_on_node("gpu-node-05")[0].name == "llm-xl-1-1"


def test_expired_continue_token_restarts_the_list_from_the_first_page() -> None:
    pods = fleet(PODS)
    transport = Scripted(pages=[page(pods[:8], "500", "t1"), Gone("expired", 410), page(pods, "600")])
    r = reflector(PODS, transport)
    r.relist()
    assert transport.list_calls == [None, "t1", None]
    assert r.view.count(PODS) == 16 and r.resource_version == "600"


def test_recorded_event_sequence_updates_store_and_indexes() -> None:
    view = ClusterView("test")
    r = reflector(PODS, Scripted(pages=[page(fleet(PODS), "100")]), view)
    r.relist()
    worker = pod_named("llm-xl-0-2")
    leader = pod_named("llm-xl-0")
    node_before = view.node_requested("gpu-node-02")
    assert node_before["nvidia.com/gpu"] == 8
    new_pod = with_version(pod_named("llm-xl-3-3"), "104")
    new_pod["metadata"]["name"] = "llm-xl-3-4"
    new_pod["spec"]["nodeName"] = "gpu-node-16"
    for recorded in [
        event("MODIFIED", with_version(worker, "101", ready=False)),
        event("DELETED", with_version(leader, "102")),
        bookmark("103"),
        event("ADDED", new_pod),
    ]:
        r.apply(recorded)
    assert view.pod("serve", "llm-xl-0-2").ready is False  # type: ignore[union-attr]
    assert view.pod("serve", "llm-xl-0") is None
    group = {p.name for p in group_pods(view, "serve", "llm-xl", "0")}
    assert group == {"llm-xl-0-1", "llm-xl-0-2", "llm-xl-0-3"}
    assert view.node_requested("gpu-node-00").get("nvidia.com/gpu", 0) == 0  # leader's node freed
    assert [p.name for p in view.pods_on_node("gpu-node-16")] == ["llm-xl-3-4"]
    assert r.resource_version == "104"


def test_bookmark_moves_the_resume_point_without_touching_objects() -> None:
    view = ClusterView("test")
    transport = Scripted(pages=[page(fleet(PODS), "100")], watches=[[bookmark("250")]])
    r = reflector(PODS, transport, view)
    r.run()
    assert transport.watch_calls == ["100", "250"]
    assert view.count(PODS) == 16


def test_out_of_order_events_never_undo_a_newer_state() -> None:
    view = ClusterView("test")
    r = reflector(PODS, Scripted(pages=[page(fleet(PODS), "100")]), view)
    r.relist()
    worker = pod_named("llm-xl-0-2")
    r.apply(event("MODIFIED", with_version(worker, "120", ready=False)))
    r.apply(event("MODIFIED", with_version(worker, "110", ready=True)))  # late, older
    assert view.pod("serve", "llm-xl-0-2").ready is False  # type: ignore[union-attr]
    r.apply(event("DELETED", with_version(worker, "115")))  # older than what is held
    assert view.pod("serve", "llm-xl-0-2") is not None
    assert r.resource_version == "120"  # the resume point never moves backwards
    r.apply(event("DELETED", with_version(worker, "121")))
    assert view.pod("serve", "llm-xl-0-2") is None


def test_older_compares_only_integer_versions() -> None:
    assert older("9", "10") and not older("10", "9") and not older("abc", "10") and not older("9", None)


def test_versions_are_kept_compact_and_compare_as_the_text_they_stand_for() -> None:
    assert compact_version("48213977") == 48213977 and compact_version("0") == 0
    for text in ("", "abc", "007", "-3", "1e3", "²"):  # not an integer written plainly: kept as text
        assert compact_version(text) == text
    assert older("9", compact_version("10")) and not older("11", compact_version("10"))
    assert not older("9", compact_version("abc")) and not older("abc", compact_version("10"))
    view = ClusterView("test")
    r = reflector(PODS, Scripted(pages=[page(fleet(PODS), "100")]), view)
    r.relist()
    worker = pod_named("llm-xl-0-2")
    r.apply(event("MODIFIED", with_version(worker, "120", ready=False)))
    assert r.versions[("serve", "llm-xl-0-2")] == 120  # an int, not the text
    r.apply(event("MODIFIED", with_version(worker, "110", ready=True)))  # late: still told
    assert view.pod("serve", "llm-xl-0-2").ready is False  # type: ignore[union-attr]


def test_gone_error_event_relists_and_replaces_the_kind() -> None:
    pods = fleet(PODS)
    survivor_list = [p for p in pods if p["metadata"]["name"] != "llm-xl-1-3"]
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    view = ClusterView("test")
    transport = Scripted(pages=[page(pods, "100"), page(survivor_list, "300")], watches=[[gone], []])
    r = reflector(PODS, transport, view)
    r.run()
    assert transport.list_calls == [None, None]
    assert transport.watch_calls == ["100", "300", "300"]
    assert view.pod("serve", "llm-xl-1-3") is None and view.count(PODS) == 15
    assert r.stats.restarts >= 2


def test_http_410_on_watch_relists() -> None:
    transport = Scripted(pages=[page(fleet(PODS), "100"), page(fleet(PODS), "400")], watches=[Gone("x", 410)])
    r = reflector(PODS, transport)
    r.run()
    assert r.resource_version == "400" and len(transport.list_calls) == 2


def test_broken_watch_marks_the_kind_broken_then_a_reconnect_clears_it() -> None:
    view = ClusterView("test", stale_after_seconds=60)
    for kind in KINDS:
        view.mark_synced(kind)
    seen_broken: list[float] = []

    class Probe(Scripted):
        def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
            seen_broken.append(view.broken_seconds(PODS))
            return super().watch(kind, resource_version, timeout_seconds)

    transport = Probe(
        pages=[page(fleet(PODS), "100")],
        watches=[ConnectionRefusedError("refused"), WatchError("HTTP 500", 500), [bookmark("101")]],
    )
    r = reflector(PODS, transport, view)
    r.run()
    assert seen_broken[0] == 0.0 and seen_broken[2] > 0.0  # broken while it failed
    assert view.broken_seconds(PODS) == 0.0 and not view.is_stale()  # healthy after reconnect
    assert transport.watch_calls == ["100", "100", "100", "101"]  # resumed, no relist
    assert len(transport.list_calls) == 1
    assert r.stats.restarts >= 3


def test_a_watch_broken_longer_than_the_bound_makes_the_view_stale_but_still_synced() -> None:
    view = ClusterView("test", stale_after_seconds=60)
    for kind in KINDS:
        view.mark_synced(kind)
    view.mark_broken(PODS, now=1000.0)
    assert view.synced
    assert not view.is_stale(now=1059.0)
    assert view.is_stale(now=1061.0)
    assert view.broken_seconds(PODS, now=1061.0) == 61.0 and view.broken_seconds(NODES) == 0.0


def test_a_kind_the_server_does_not_serve_is_synced_and_empty(caplog: pytest.LogCaptureFixture) -> None:
    view = ClusterView("test")
    r = Reflector(LEADERWORKERSETS, view, Scripted(pages=[NotServed("404", 404)]), discovery_retry_seconds=30)
    stopper = threading.Timer(0.2, r.stop)
    stopper.start()
    with caplog.at_level(logging.WARNING, "guardhook.cluster.view.live"):
        r.run()
    assert view.count(LEADERWORKERSETS) == 0
    assert LEADERWORKERSETS in view._synced_kinds
    assert r.stats.served is False and view.readable(LEADERWORKERSETS) is False
    assert "does not serve leaderworkersets" in caplog.text


def test_discovery_is_retried_and_a_later_crd_is_picked_up() -> None:
    view = ClusterView("test")
    lws = fleet(LEADERWORKERSETS)
    transport = Scripted(pages=[NotServed("404", 404), page(lws, "900")])
    r = Reflector(LEADERWORKERSETS, view, transport, discovery_retry_seconds=0.01)
    transport.reflector = r
    r.run()
    assert view.lws("serve", "llm-xl") is not None and r.stats.served is True
    assert view.readable(LEADERWORKERSETS) is True


def test_objects_kept_as_dicts_lose_managed_fields_and_last_applied() -> None:
    service = fleet(SERVICES)[0]
    service["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    annotations = service["metadata"].setdefault("annotations", {})
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    view = ClusterView("test")
    reflector(SERVICES, Scripted(pages=[page([service], "5")]), view).relist()
    held = view.service("serve", "llm-xl")
    assert held is not None
    assert "managedFields" not in held["metadata"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in held["metadata"].get("annotations", {})


def test_backoff_doubles_up_to_its_cap_and_resets() -> None:
    backoff = Backoff(initial=1.0, cap=8.0)
    delays = [backoff.next() for _ in range(6)]
    for delay, full in zip(delays, [1.0, 2.0, 4.0, 8.0, 8.0, 8.0], strict=True):
        assert full * 0.8 <= delay <= full  # jittered down by at most 20%
    backoff.reset()
    assert backoff.next() <= 1.0


def test_snapshot_lists_every_kind_once_and_tolerates_a_missing_crd() -> None:
    objects = {kind: [] for kind in KINDS} | {PODS: fleet(PODS), NODES: fleet(NODES)}

    class PerKind(Scripted):
        def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
            if kind == LEADERWORKERSETS:
                raise NotServed("404", 404)
            return page(objects[kind], "7")

    view = snapshot(ClusterView("test"), PerKind())
    assert view.synced and view.count(PODS) == 16 and view.count(NODES) == 22
    assert view.count(LEADERWORKERSETS) == 0


class Blocking(Scripted):
    """Lists one empty page; its watch blocks until `close()` (as an open stream does)."""

    def __init__(self) -> None:
        super().__init__(pages=[page([], "1")])
        self.closed = threading.Event()

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        def stream() -> Iterator[dict[str, Any]]:
            self.closed.wait()
            raise ConnectionResetError("closed")
            yield {}  # pragma: no cover - makes this a generator

        return stream()

    def close(self) -> None:
        self.closed.set()


def test_live_view_syncs_every_kind_and_stop_ends_its_threads() -> None:
    live = LiveView(ClusterView("test"), Blocking).start()
    deadline = time.monotonic() + 10
    while not live.view.synced:
        assert time.monotonic() < deadline, "the live view never synced"
        time.sleep(0.01)
    assert all(thread.is_alive() for thread in live.threads)  # blocked in their watches
    live.stop(timeout=5)
    assert not any(thread.is_alive() for thread in live.threads)
    assert live.view.broken_seconds(PODS) == 0.0  # a stop is not an outage


def test_collect_reports_per_kind_metrics_and_counts_restarts_once() -> None:
    from types import SimpleNamespace

    from guardhook.server.metrics import Metrics

    live = LiveView(ClusterView("test", stale_after_seconds=60), Blocking)
    pods = live.reflectors[PODS]
    pods.transport = Scripted(pages=[page(fleet(PODS), "100")])
    pods.relist()
    pods.stats.restarts = 3
    runtime = SimpleNamespace(metrics=Metrics())
    live.collect(runtime)
    live.collect(runtime)  # a second scrape must not count the same restarts again
    value = runtime.metrics.registry.get_sample_value
    assert value("guardhook_cluster_view_objects", {"kind": "pods"}) == 16
    assert value("guardhook_cluster_view_watch_restarts_total", {"kind": "pods"}) == 3
    assert 0 <= value("guardhook_cluster_view_last_sync_age_seconds", {"kind": "pods"}) < 60
    assert value("guardhook_cluster_view_last_sync_age_seconds", {"kind": "nodes"}) == -1
    assert value("guardhook_cluster_view_stale") == 1  # the other kinds never synced


def test_a_node_with_quantities_above_int64_neither_breaks_the_relist_nor_the_capacity_index() -> None:
    from guardhook.capacity import index_for

    view = ClusterView("test")
    index = index_for(view)  # subscribed: its listener runs inside every node upsert
    nodes = fleet(NODES)
    nodes[0]["status"]["allocatable"].update({"pods": "1e999", "memory": "10Ei"})
    changed = with_version(nodes[1], "900")
    changed["status"]["allocatable"]["nvidia.com/gpu"] = "1e999"
    r = reflector(NODES, Scripted(pages=[page(nodes, "100")]), view)
    r.relist()
    r.apply(event("MODIFIED", changed))
    assert view.count(NODES) == len(nodes) and NODES in view._synced_kinds
    assert view.node(nodes[0]["metadata"]["name"]).allocatable["pods"] == 2**63 - 1  # type: ignore[union-attr]
    free = index.free(["nvidia.com/gpu"])[:, 0].tolist()
    assert 2**63 - 1 in free and len(free) == len(nodes)


def test_versions_read_and_write_by_key_and_keep_no_key_tuples() -> None:
    versions = Versions()
    versions[("a", "web-0")] = 5
    versions[("a", "web-0")] = 6  # replaced: still one
    versions[("b", "web-0")] = "x"
    assert len(versions) == 2 and versions[("a", "web-0")] == 6 and versions.get(("b", "web-0")) == "x"
    assert ("a", "web-0") in versions and ("a", "web-1") not in versions and ("c", "x") not in versions
    assert "a" not in versions and versions.get(("c", "x")) is None
    with pytest.raises(KeyError):
        versions[("a", "web-1")]
    assert versions.pop(("a", "web-0")) == 6 and versions.pop(("a", "web-0")) is None and len(versions) == 1
    assert versions._by_namespace == {"b": {"web-0": "x"}}  # an emptied namespace is dropped
    view = ClusterView("test")
    r = reflector(PODS, Scripted(pages=[page(fleet(PODS), "100")]), view)
    r.relist()
    assert len(r.versions) == view.count(PODS)
    held = view.pod("serve", "llm-xl-0-2")
    names = r.versions._by_namespace["serve"]
    assert held is not None and next(k for k in names if k == held.name) is held.name  # the record's string


def test_versions_put_all_keeps_what_one_by_one_keeps() -> None:
    keys = [("a", "p0"), ("a", "p1"), ("b", "p0"), ("a", "p2"), ("a", "p0")]
    texts = ["10", "007", "x", "", "12"]
    bulk, one_by_one = Versions(), Versions()
    bulk.put_all(keys, texts)
    for key, text in zip(keys, texts, strict=True):
        one_by_one[key] = compact_version(text)
    assert (
        bulk._by_namespace
        == one_by_one._by_namespace
        == {"a": {"p0": 12, "p1": "007", "p2": ""}, "b": {"p0": "x"}}
    )
    assert len(bulk) == 4
    with pytest.raises(ValueError):
        bulk.put_all([("a", "p3")], [])  # a key without its version is a caller's bug
