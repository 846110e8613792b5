"""When a ledger entry stops counting (guardhook.budget.reading, `replaced`): an entry that knows the
pod it removed (its uid exact, `Disruption.pod_created`) is seen through once that pod is gone
and a later pod of its group shows the view past it, whatever second the replacement was created
in; an entry that does not (an older replica's, or one of a pod the view held terminating or not
at all) keeps the time rule. The docs/performance.md drain run 1 fault: a StatefulSet replacement
created within the second of the recording kept the group counted for the entry's whole TTL.
Reviews are the captured ones (s07 eviction, s01 delete, n01 node taint) re-aimed."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import group_shapes as shapes
import maker_shapes as makers
import pytest
from eviction_helpers import engine, eviction, find, fleet_objects, judge

from guardhook.admission.engine import Engine
from guardhook.budget import replaced, superseded
from guardhook.cluster.model import PodRecord, timestamp_seconds
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.config import build_config
from guardhook.ledger import Disruption, MemoryLedger

from conftest import load_review
from helpers import request_of

LWS = ("serve", "llm-xl")
SECOND = "2026-12-07T10:00:00Z"
RECORDED = timestamp_seconds(SECOND) + 0.4  # the ledger's clock, within SECOND
NEXT_SECOND = "2026-12-07T10:00:01Z"


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def drain_delete(objects: list[dict[str, Any]], pod: str) -> dict[str, Any]:
    """s01 (a worker DELETE) re-aimed at `pod`, its stored object as `oldObject`: what `kubectl
    drain --disable-eviction` sends for a pod of a cordoned node."""
    request = request_of(load_review("s01-worker-delete.validating"))
    request["name"] = pod
    request["oldObject"] = copy.deepcopy(find(objects, "Pod", pod))
    return request


def with_precondition(request: dict[str, Any], uid: str) -> dict[str, Any]:
    request["object"]["deleteOptions"] = {"preconditions": {"uid": uid}}
    return request


def terminating(view: ClusterView, pod: dict[str, Any]) -> None:
    view.upsert(PODS, {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": NEXT_SECOND}})


def recreated(view: ClusterView, pod: dict[str, Any], created: str, uid: str = "replacement") -> None:
    """`pod`'s StatefulSet replacement in the view: its name, another uid, Ready."""
    view.upsert(PODS, {**pod, "metadata": {**pod["metadata"], "uid": uid, "creationTimestamp": created}})


# ---- the fault: a replacement created within the second of the recording ------------------------


@pytest.mark.parametrize("how", ["eviction", "delete-drain"])
def test_a_replacement_created_within_the_second_of_the_recording_frees_the_budget(how: str) -> None:
    objects = fleet_objects()
    for node in ("gpu-node-02", "gpu-node-05"):  # llm-xl-0-2 and llm-xl-1-1: a delete-based drain
        find(objects, "Node", node)["spec"]["unschedulable"] = True
    view = view_from_objects(objects)
    eng = engine(view, ledger=MemoryLedger(clock=lambda: RECORDED))
    first, second = ("llm-xl-0-2", "llm-xl-1-1")
    ask = (lambda p: eviction(p)) if how == "eviction" else (lambda p: drain_delete(objects, p))
    assert judge(eng, ask(first))["allowed"] is True
    evicted = find(objects, "Pod", first)
    terminating(view, evicted)
    assert judge(eng, ask(second))["status"]["code"] == 429  # group 0 broken in the view
    recreated(view, evicted, SECOND)  # created in the very second the entry was recorded
    assert judge(eng, ask(second))["allowed"] is True


def test_the_run_1_restart_of_a_whole_group_within_the_second_frees_it() -> None:
    """The LWS controller recreates every pod of the group (RecreateGroupOnPodRestart) within the
    second of the recording: the group is whole and Ready again, the entry is seen through."""
    objects = fleet_objects()
    view = view_from_objects(objects)
    eng = engine(view, ledger=MemoryLedger(clock=lambda: RECORDED))
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    for name in ("llm-xl-0", "llm-xl-0-1", "llm-xl-0-2", "llm-xl-0-3"):
        recreated(view, find(objects, "Pod", name), SECOND, uid=f"new-{name}")
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is True


# ---- what never frees an entry early ------------------------------------------------------------


def test_the_evicted_pod_still_there_keeps_counting_terminating_or_not() -> None:
    """The same uid still counts: terminating (the view counts its group broken), or not at all
    (a PodDisruptionBudget refused the eviction after guardhook allowed it) while another pod of
    the group is newer — until the TTL."""
    objects = fleet_objects()
    view = view_from_objects(objects)
    eng = engine(view, ledger=MemoryLedger(clock=lambda: RECORDED))
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    evicted = find(objects, "Pod", "llm-xl-0-3")
    terminating(view, evicted)
    assert "terminating: llm-xl-0-3" in judge(eng, eviction("llm-xl-2-1"))["status"]["message"]
    view.upsert(PODS, evicted)  # not terminating after all: the eviction never happened
    recreated(view, find(objects, "Pod", "llm-xl-0-1"), NEXT_SECOND)  # a newer pod of group 0
    denied = judge(eng, eviction("llm-xl-2-1"))["status"]["message"]
    assert "group 0 (eviction of llm-xl-0-3 recorded, not visible yet)" in denied


def test_a_replica_that_has_not_seen_the_evicted_pod_yet_still_counts_it() -> None:
    """Replica A evicts a pod created lately (uid "recent"); replica B's view still holds the one
    before it under that name (another uid, created earlier) and the group whole. The evicted uid
    is absent from B's view, but no pod there is newer than it: B cannot tell its removal from its
    own lag, and counts the entry."""
    objects = fleet_objects()
    lagging = view_from_objects(objects)
    ahead = view_from_objects(objects)
    recent = find(objects, "Pod", "llm-xl-0-3")
    recreated(ahead, recent, SECOND, uid="recent")
    shared = MemoryLedger(clock=lambda: RECORDED + 60)
    assert judge(engine(ahead, ledger=shared), eviction("llm-xl-0-3"))["allowed"] is True
    (entry,) = shared.entries(LWS)
    assert (entry.uid, entry.pod_created) == ("recent", timestamp_seconds(SECOND))
    denied = judge(engine(lagging, ledger=shared), eviction("llm-xl-2-1"))
    assert denied["status"]["code"] == 429
    assert "group 0 (eviction of llm-xl-0-3 recorded" in denied["status"]["message"]


def test_an_entry_that_does_not_know_its_pod_keeps_the_time_rule() -> None:
    """An entry without `pod_created` (an older guardhook's, in the Lease during an upgrade) counts
    past a replacement created within the second of its recording, and stops at one created in
    a later second."""
    objects = fleet_objects()
    view = view_from_objects(objects)
    evicted = find(objects, "Pod", "llm-xl-0-3")
    ledger = MemoryLedger(clock=lambda: RECORDED)
    legacy = Disruption("0", "llm-xl-0-3", evicted["metadata"]["uid"], RECORDED + 120, RECORDED, "eviction")
    ledger.update(LWS, lambda _: (None, (legacy,)))
    eng = engine(view, ledger=ledger, record=False)
    recreated(view, evicted, SECOND)
    assert judge(eng, eviction("llm-xl-2-1"))["status"]["code"] == 429
    recreated(view, evicted, NEXT_SECOND)
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is True


# ---- which recorders know the pod they remove ----------------------------------------------------


@pytest.mark.parametrize(
    ("precondition", "shown_terminating", "knows"),
    [
        (None, False, True),
        (None, True, False),
        ("own", False, True),
        ("own", True, True),
        ("other", False, False),
    ],
    ids=[
        "view-holds-it",
        "view-holds-it-terminating",
        "precondition-its-uid",
        "precondition-its-uid-terminating",
        "precondition-another-uid",
    ],
)
def test_an_eviction_knows_its_pod_from_its_precondition_or_a_live_pod_of_the_view(
    precondition: str | None, shown_terminating: bool, knows: bool
) -> None:
    """A pod the view shows terminating may already be its replacement under that name (kubectl
    drain evicts by name, with no uid precondition): only a `deleteOptions.preconditions.uid`
    naming the view's pod makes that entry exact."""
    objects = fleet_objects()
    view = view_from_objects(objects)
    pod = find(objects, "Pod", "llm-xl-0-3")
    if shown_terminating:
        terminating(view, pod)
    eng = engine(view, ledger=MemoryLedger(clock=lambda: RECORDED))
    request = eviction("llm-xl-0-3")
    if precondition is not None:
        own = pod["metadata"]["uid"]
        with_precondition(request, own if precondition == "own" else "someone-else")
    assert judge(eng, request)["allowed"] is True
    (entry,) = eng.ledger.entries(LWS)
    assert entry.pod_created == (timestamp_seconds(pod["metadata"]["creationTimestamp"]) if knows else 0.0)


def test_delete_drains_and_taints_know_the_pod_they_remove() -> None:
    objects = fleet_objects()
    find(objects, "Node", "gpu-node-02")["spec"]["unschedulable"] = True
    eng = Engine(
        view_from_objects(objects),
        build_config({"policies": {"group-eviction": {"maxDisruptedGroups": 2}}}),
        ledger=MemoryLedger(clock=lambda: RECORDED),
    )
    assert judge(eng, drain_delete(objects, "llm-xl-0-2"))["allowed"] is True
    taint = request_of(load_review("n01-node-taint-noexecute.validating"))  # gpu-node-06: llm-xl-1-2
    taint["userInfo"] = {"username": "kubernetes-admin", "groups": ["system:masters"]}
    assert judge(eng, taint)["allowed"] is True
    created = {e.pod: e.pod_created for e in eng.ledger.entries(LWS)}
    born = {n: timestamp_seconds(find(objects, "Pod", n)["metadata"]["creationTimestamp"]) for n in created}
    assert sorted(created) == ["llm-xl-0-2", "llm-xl-1-2"] and created == born and all(born.values())


# ---- gangs: a replacement under another name ------------------------------------------------------


def test_a_gang_pod_replaced_under_another_name_frees_the_budget() -> None:
    """A Workload API gang's pods are a Job's (generated names): the replacement never has the
    evicted pod's name, so only the uid rule can see the entry through before its TTL."""
    objects = shapes.fleet() + shapes.gang_objects(groups=3, size=2)
    view = shapes.view(objects)
    eng = Engine(view, build_config({}), ledger=MemoryLedger(clock=lambda: RECORDED))

    def evict(name: str) -> dict[str, Any]:
        return dict(eng.judge(shapes.eviction_request(name, "train"), "validate").response)

    assert evict("train-0-1")["allowed"] is True
    assert evict("train-2-1")["status"]["code"] == 429
    gone = shapes.pod(objects, "train-0-1")
    view.remove(PODS, ("train", "train-0-1"))
    replacement = copy.deepcopy(gone)
    replacement["metadata"].update(name="train-0-x7k2p", uid="uid-train-0-x7k2p", creationTimestamp=SECOND)
    view.upsert(PODS, replacement)
    assert evict("train-2-1")["allowed"] is True


@pytest.mark.parametrize(
    ("pods", "namespace", "evicted", "renamed", "other"),
    [
        (
            makers.grove_pods,
            "infer",
            "disagg-0-prefill-aaaaa",
            "disagg-0-prefill-zzzzz",
            "disagg-2-decode-aaaaa",
        ),
        (
            makers.jobset_pods,
            "batch",
            "train-workers-0-0-xk2p9",
            "train-workers-0-0-r7t4q",
            "train-workers-2-1-xk2p9",
        ),
    ],
    ids=["grove", "jobset"],
)
def test_grove_and_jobset_pods_replaced_under_another_name_free_the_budget(
    pods: Any, namespace: str, evicted: str, renamed: str, other: str
) -> None:
    objects = [o for o in shapes.fleet() if o["kind"] == "Node"] + pods()
    view = shapes.view(objects)
    eng = Engine(view, build_config({}), ledger=MemoryLedger(clock=lambda: RECORDED))

    def evict(name: str) -> dict[str, Any]:
        return dict(eng.judge(shapes.eviction_request(name, namespace), "validate").response)

    assert evict(evicted)["allowed"] is True
    assert evict(other)["status"]["code"] == 429
    replacement = copy.deepcopy(makers.named(objects, evicted))
    view.remove(PODS, (namespace, evicted))
    replacement["metadata"].update(name=renamed, uid=f"uid-{renamed}", creationTimestamp=SECOND)
    view.upsert(PODS, replacement)
    assert evict(other)["allowed"] is True


# ---- the rules themselves -------------------------------------------------------------------------


def record(uid: str, created: str, name: str = "p-0") -> PodRecord:
    return PodRecord(
        "ns", name, uid, {}, {}, "n", "Running", True, False, (), created=timestamp_seconds(created)
    )


def test_replaced_by_uid_needs_the_pod_gone_and_a_later_pod_of_the_group() -> None:
    born = timestamp_seconds("2026-12-01T00:00:00Z")
    entry = Disruption("0", "p-0", "u0", RECORDED + 120, RECORDED, "eviction", born)
    older = record("u-1", "2026-11-30T00:00:00Z")
    same_second = record("u1", stamp(born))
    assert replaced(entry, [record("u1", SECOND)])  # within the second of the recording
    assert replaced(entry, [record("u1", SECOND, "p-0-x"), record("u2", SECOND, "p-1")])  # another name
    assert not replaced(entry, [older])  # a lagging view: the one before it
    assert not replaced(entry, [same_second])  # no later second: cannot tell
    assert not replaced(entry, [record("u0", stamp(born)), record("u2", SECOND, "p-1")])  # still there
    legacy = Disruption("0", "p-0", "u0", RECORDED + 120, RECORDED, "eviction")
    assert not replaced(legacy, [record("u1", SECOND)])
    assert replaced(legacy, [record("u1", NEXT_SECOND)])


def test_a_record_that_knows_its_pod_supersedes_only_an_entry_that_does_too() -> None:
    knows = Disruption("0", "p-0", "u0", 200.0, 10.0, "eviction", 5.0)
    blind = Disruption("0", "p-0", "u0", 200.0, 10.0, "eviction")
    later_knows = Disruption("0", "p-0", "u0", 300.0, 20.0, "eviction", 5.0)
    later_blind = Disruption("0", "p-0", "u0", 300.0, 20.0, "eviction")
    assert superseded(knows, later_knows) and superseded(knows, later_blind)
    assert superseded(blind, later_blind) and not superseded(blind, later_knows)
