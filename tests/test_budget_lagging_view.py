"""The group budget when a replica's view lags (issue #21): an eviction the view cannot match to a
whole group is still recorded, and a group counted only through the ledger is judged against the
other broken groups, so a replica that has not seen a group heal cannot break it a second time."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from eviction_helpers import engine, eviction, judge, lws_object, pod_object
from interleavings import apply_watch_event

from guardhook.cluster.view.static import view_from_objects
from guardhook.groups.lws import member_by_name as unseen_member
from guardhook.ledger import Disruption, MemoryLedger

NOW = 1_796_000_000.0
KEY = ("serve", "llm")


def stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pods(groups: int = 2, size: int = 2) -> list[dict[str, Any]]:
    found = [pod_object("llm", g, w, size) for g in range(groups) for w in range(size)]
    for pod in found:
        pod["metadata"]["creationTimestamp"] = stamp(NOW - 600)
    return found


def replacement(pod: dict[str, Any], created: float) -> dict[str, Any]:
    """`pod` recreated by its StatefulSet: same name, a new uid, Ready."""
    new = copy.deepcopy(pod)
    new["metadata"].pop("deletionTimestamp", None)
    new["metadata"]["uid"] += "-again"
    new["metadata"]["creationTimestamp"] = stamp(created)
    new["metadata"]["resourceVersion"] = "900"
    return new


def test_evicting_a_pod_the_view_shows_terminating_is_recorded() -> None:
    objects = pods()
    old = objects[0]  # llm-0, the leader of group 0
    old["metadata"]["deletionTimestamp"] = stamp(NOW - 5)
    view = view_from_objects([lws_object("llm", 2, 2, {}), *objects])
    eng = engine(view, ledger=MemoryLedger(clock=lambda: NOW))
    # The view still shows the old llm-0 going; the API server evicts its Ready replacement.
    assert judge(eng, eviction("llm-0"))["allowed"] is True
    assert [(e.group, e.pod) for e in eng.ledger.entries(KEY)] == [("0", "llm-0")]
    # The view catches up with the replacement, created before the eviction was recorded: group 0
    # still counts (the eviction took the replacement), so group 1 must wait.
    apply_watch_event(view, {"type": "DELETED", "object": old})
    apply_watch_event(view, {"type": "ADDED", "object": replacement(old, NOW - 2)})
    denied = judge(eng, eviction("llm-1"))
    assert denied["status"]["code"] == 429 and "eviction of llm-0 recorded" in denied["status"]["message"]


def test_evicting_an_lws_pod_the_view_does_not_hold_yet_is_recorded() -> None:
    objects = pods()
    gone = objects.pop(1)  # llm-0-1: the view saw the old one go, not its replacement yet
    view = view_from_objects([lws_object("llm", 2, 2, {}), *objects])
    eng = engine(view, ledger=MemoryLedger(clock=lambda: NOW))
    assert judge(eng, eviction("llm-0-1"))["allowed"] is True
    assert [(e.group, e.pod, e.uid) for e in eng.ledger.entries(KEY)] == [("0", "llm-0-1", "")]
    apply_watch_event(view, {"type": "ADDED", "object": replacement(gone, NOW - 1)})
    assert judge(eng, eviction("llm-1-1"))["status"]["code"] == 429


def test_a_replacement_created_after_the_record_frees_the_entry() -> None:
    objects = pods()
    gone = objects.pop(1)
    view = view_from_objects([lws_object("llm", 2, 2, {}), *objects])
    clock = [NOW]
    eng = engine(view, ledger=MemoryLedger(clock=lambda: clock[0]))
    assert judge(eng, eviction("llm-0-1"))["allowed"] is True
    clock[0] += 30
    apply_watch_event(view, {"type": "ADDED", "object": replacement(gone, NOW + 20)})
    assert judge(eng, eviction("llm-1-1"))["allowed"] is True


def test_a_group_counted_only_through_the_ledger_is_judged_against_the_other_groups() -> None:
    view = view_from_objects([lws_object("llm", 3, 2, {}), *pods(groups=3)])
    ledger = MemoryLedger(clock=lambda: NOW)
    # Another replica recorded evictions from groups 0 and 1; this view shows both whole (it lags,
    # or group 0 has healed since and only the entry is left).
    for group in (0, 1):
        name = f"llm-{group}"
        ledger.update(
            KEY,
            lambda e, g=group, n=name: (
                None,
                (*e, Disruption(str(g), n, f"uid-{n}", NOW + 60, NOW, "eviction")),
            ),
        )
    eng = engine(view, ledger=ledger)
    denied = judge(eng, eviction("llm-0-1"))
    assert denied["status"]["code"] == 429
    assert "group 1 (eviction of llm-1 recorded, not visible yet)" in denied["status"]["message"]


def test_a_second_pod_of_a_group_counted_through_the_ledger_alone_is_allowed() -> None:
    view = view_from_objects([lws_object("llm", 3, 2, {}), *pods(groups=3)])
    eng = engine(view, ledger=MemoryLedger(clock=lambda: NOW))
    assert judge(eng, eviction("llm-0"))["allowed"] is True  # kubectl drain's parallel evictions
    assert judge(eng, eviction("llm-0-1"))["allowed"] is True
    assert judge(eng, eviction("llm-1-1"))["status"]["code"] == 429


def test_unseen_member_reads_leader_and_worker_names_of_lwss_in_the_view() -> None:
    view = view_from_objects([lws_object("llm", 2, 3, {}), lws_object("llm-1", 4, 2, {})])
    worker = unseen_member(view, "serve", "llm-1-2")  # worker 2 of group 1 of llm (size 3)
    assert worker is not None and (worker.labels["leaderworkerset.sigs.k8s.io/name"], worker.name) == (
        "llm",
        "llm-1-2",
    )
    leader = unseen_member(view, "serve", "llm-1-3")  # worker 3 >= size 3: leader of group 3 of llm-1
    assert leader is not None and leader.labels["leaderworkerset.sigs.k8s.io/name"] == "llm-1"
    assert leader.labels["leaderworkerset.sigs.k8s.io/group-index"] == "3"
    assert unseen_member(view, "serve", "llm-7") is None  # beyond spec.replicas
    assert unseen_member(view, "serve", "web-0") is None
    assert unseen_member(view, "other", "llm-0") is None
