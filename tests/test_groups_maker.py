"""The group maker protocol (guardhook.groups.maker) and its registry (guardhook.groups.makers):
every registered maker answers resolve, snapshot, recreated_pods and sets, for LWS groups (Ordinal,
Hash, Kthena) and Workload API gangs alike."""

from __future__ import annotations

import copy

import group_shapes as shapes
import pytest

from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import PODS
from guardhook.groups import (
    MAKERS,
    GroupMaker,
    SetRef,
    all_sets,
    maker_of,
    recreated_pods,
    resolve,
    snapshot,
    stand_in,
)
from guardhook.groups.grove import GROVE_MAKER
from guardhook.groups.jobset import JOBSET_MAKER
from guardhook.groups.lws import LWS_MAKER
from guardhook.groups.podgroup import POD_GROUP_MAKER
from guardhook.groups.ref import GROVE, JOBSET, KTHENA, LWS_HASH, LWS_ORDINAL, POD_GROUP


def objects(maker: str = "ordinal") -> list:
    found = copy.deepcopy(shapes.fleet())
    if maker == "hash":
        shapes.to_hash(found)
    elif maker == "kthena":
        shapes.to_kthena(found)
    return found + shapes.gang_objects(groups=3, size=2, budget=2)


def record(view, namespace: str, name: str) -> PodRecord:
    pod = view.pod(namespace, name)
    assert pod is not None
    return pod


def test_every_registered_maker_implements_the_protocol_and_flavours_do_not_overlap() -> None:
    assert MAKERS == (LWS_MAKER, POD_GROUP_MAKER, GROVE_MAKER, JOBSET_MAKER)
    for maker in MAKERS:
        assert isinstance(maker, GroupMaker)
    flavours = [f for m in MAKERS for f in m.flavours]
    assert sorted(flavours) == sorted({LWS_ORDINAL, LWS_HASH, KTHENA, POD_GROUP, GROVE, JOBSET})


@pytest.mark.parametrize(
    ("shape", "flavour"), [("ordinal", LWS_ORDINAL), ("hash", LWS_HASH), ("kthena", KTHENA)]
)
def test_an_lws_pod_resolves_through_the_registry_and_its_set_snapshots(shape: str, flavour: str) -> None:
    found = objects(shape)
    view = shapes.view(found)
    pod = next(o for o in found if o["kind"] == "Pod" and o["metadata"]["namespace"] == "serve")
    ref = resolve(view, record(view, "serve", pod["metadata"]["name"]))
    assert ref is not None and ref.maker == flavour
    assert maker_of(ref) is LWS_MAKER
    snap = snapshot(view, ref)
    assert snap is not None
    assert snap.set == SetRef("serve", "LeaderWorkerSet", shapes.LWS)
    assert snap.maker == LWS_MAKER.name
    assert snap.desired == 4 and len(snap.pods) == 4 and ref.key in snap.pods
    assert all(len(pods) == 4 for pods in snap.pods.values())
    assert len(snap.broken) == 0 and snap.budget_annotation is None
    assert snap.counts(ref.key)


def test_a_snapshot_names_the_broken_groups_and_why_and_the_budget_annotation() -> None:
    found = objects()
    lws = next(o for o in found if o["kind"] == "LeaderWorkerSet")
    lws["metadata"].setdefault("annotations", {})["guardhook.io/max-disrupted-groups"] = "2"
    view = shapes.view(found)
    worker = copy.deepcopy(shapes.pod(found, "llm-xl-1-2"))
    worker["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    view.upsert(PODS, worker)
    snap = LWS_MAKER.snapshot(view, SetRef("serve", "LeaderWorkerSet", shapes.LWS))
    assert snap is not None
    assert list(snap.broken) == ["1"] and "terminating: llm-xl-1-2" in snap.broken["1"]
    assert snap.budget_annotation == "2" and snap.budget_on == "LeaderWorkerSet serve/llm-xl"
    assert not snap.counts("4") and snap.counts("3")


def test_a_hash_lws_with_fewer_groups_than_replicas_counts_its_unnamed_empty_groups() -> None:
    found = objects("hash")
    lws = next(o for o in found if o["kind"] == "LeaderWorkerSet")
    lws["spec"]["replicas"] = 6
    view = shapes.view(found)
    snap = LWS_MAKER.snapshot(view, SetRef("serve", "LeaderWorkerSet", shapes.LWS))
    assert snap is not None
    assert snap.desired == 6 and len(snap.pods) == 4
    assert snap.unnamed_empty == 2 and len(snap.broken) == 2


def test_a_gang_resolves_and_snapshots_its_set_with_the_workload_budget() -> None:
    found = objects()
    view = shapes.view(found)
    gang_pod = next(o for o in found if o["kind"] == "Pod" and o["metadata"]["namespace"] == "train")
    ref = resolve(view, record(view, "train", gang_pod["metadata"]["name"]))
    assert ref is not None and ref.maker == POD_GROUP and maker_of(ref) is POD_GROUP_MAKER
    snap = snapshot(view, ref)
    assert snap is not None
    assert snap.set == SetRef("train", "Workload", "train") and snap.maker == POD_GROUP_MAKER.name
    assert snap.desired == 3 and sorted(snap.pods) == ["train-0", "train-1", "train-2"]
    assert snap.counts("train-1") and not snap.counts("train-9")
    assert snap.budget_annotation == "2" and snap.budget_on.startswith("PodGroup train/")
    assert len(snap.broken) == 0
    assert recreated_pods(view, ref) == ()


def test_a_set_the_view_does_not_hold_has_no_snapshot() -> None:
    view = shapes.view(objects())
    assert LWS_MAKER.snapshot(view, SetRef("serve", "LeaderWorkerSet", "nope")) is None
    assert LWS_MAKER.snapshot(view, SetRef("train", "Workload", "train")) is None
    assert POD_GROUP_MAKER.snapshot(view, SetRef("train", "Workload", "nope")) is None


def test_recreated_pods_are_named_as_each_recreator_names_them() -> None:
    view = shapes.view(objects())
    ref = resolve(view, record(view, "serve", "llm-xl-2-1"))
    assert ref is not None
    assert recreated_pods(view, ref) == ("llm-xl-2", "llm-xl-2-1", "llm-xl-2-2", "llm-xl-2-3")
    kthena = objects("kthena")
    view = shapes.view(kthena)
    ref = resolve(view, record(view, "serve", "llm-xl-1-default-0-2"))
    assert ref is not None and ref.maker == KTHENA
    assert recreated_pods(view, ref) == tuple(f"llm-xl-1-default-0-{i}" for i in range(4))
    hashed = objects("hash")
    view = shapes.view(hashed)
    pod = next(o for o in hashed if o["kind"] == "Pod" and o["metadata"]["namespace"] == "serve")
    ref = resolve(view, record(view, "serve", pod["metadata"]["name"]))
    assert ref is not None and ref.maker == LWS_HASH
    assert recreated_pods(view, ref) == ()  # a Hash group comes back under a new key


def test_sets_lists_every_set_of_every_maker() -> None:
    view = shapes.view(objects())
    assert list(all_sets(view)) == [
        (LWS_MAKER, SetRef("serve", "LeaderWorkerSet", shapes.LWS)),
        (POD_GROUP_MAKER, SetRef("train", "Workload", "train")),
    ]


def test_a_pod_the_view_has_not_seen_is_named_by_its_makers_rules() -> None:
    found = objects()
    found.remove(shapes.pod(found, "llm-xl-2-1"))
    found.remove(shapes.pod(found, "train-1-1"))
    view = shapes.view(found)
    lws_pod = stand_in(view, "serve", "llm-xl-2-1")
    assert lws_pod is not None
    ref = resolve(view, lws_pod)
    assert ref is not None and (ref.maker, ref.key, ref.rank.worker) == (LWS_ORDINAL, "2", 1)
    gang_pod = stand_in(view, "train", "train-1-1")  # train-1 is the one gang short of a pod
    assert gang_pod is not None
    ref = resolve(view, gang_pod)
    assert ref is not None and (ref.maker, ref.key) == (POD_GROUP, "train-1")
    assert stand_in(view, "serve", "llm-xl-9-1") is None  # group 9 is beyond spec.replicas
    assert stand_in(view, "elsewhere", "x") is None


def test_a_set_carried_budget_is_the_smallest_whole_number_its_members_carry() -> None:
    from guardhook.cluster.annotations import BUDGET_ANNOTATION, smallest_budget

    carriers = [
        ({BUDGET_ANNOTATION: "3"}, "Pod ns/c"),
        ({BUDGET_ANNOTATION: "two"}, "Pod ns/a"),  # unreadable: not a whole number
        ({}, "Pod ns/d"),
        ({BUDGET_ANNOTATION: "1"}, "Pod ns/e"),
        ({BUDGET_ANNOTATION: "1"}, "Pod ns/b"),
    ]
    assert smallest_budget(carriers) == ("1", "Pod ns/b")
    assert smallest_budget(carriers[1:3]) == (None, "")


# ---- the door's registry functions (issue 47: readers ask these, never a maker's module) --------


def test_gang_controllers_are_every_makers_in_registry_order_and_worker_delete_defaults_to_them() -> None:
    from guardhook.groups import gang_controllers
    from guardhook.groups.grove import GROVE_OPERATOR
    from guardhook.groups.jobset import JOBSET_CONTROLLER
    from guardhook.policies.worker_delete import POLICY

    assert LWS_MAKER.gang_controllers == () and POD_GROUP_MAKER.gang_controllers == ()
    assert gang_controllers() == (GROVE_OPERATOR, JOBSET_CONTROLLER)
    assert POLICY.params["gangControllers"] == [GROVE_OPERATOR, JOBSET_CONTROLLER]


def test_group_size_is_asked_of_the_maker_whose_set_it_is() -> None:
    import maker_shapes

    from guardhook.groups import group_size

    view = shapes.view(objects() + maker_shapes.grove_pods(replicas=2))
    assert group_size(view, SetRef("serve", "LeaderWorkerSet", shapes.LWS), "3") == 4
    assert group_size(view, SetRef("train", "Workload", "train"), "train-1") == 2
    grove = next(s for m, s in all_sets(view) if m is GROVE_MAKER)
    key = next(iter(GROVE_MAKER.snapshot(view, grove).pods))  # type: ignore[union-attr]
    assert group_size(view, grove, key) == len(GROVE_MAKER.snapshot(view, grove).pods[key])  # type: ignore[union-attr]
    assert group_size(view, SetRef("serve", "LeaderWorkerSet", "nope"), "0") is None
    assert group_size(view, SetRef("train", "Workload", "train"), "train-9") is None


def test_resolve_alone_places_a_pod_by_its_own_metadata_and_reads_no_view() -> None:
    from guardhook.groups import resolve_alone, resolve_object_alone

    found = objects()
    view = shapes.view(found)
    worker = record(view, "serve", "llm-xl-1-2")
    alone, seen = resolve_alone(worker), resolve(view, worker)
    assert alone is not None and seen is not None
    assert (alone.set, alone.key, alone.rank, alone.size) == (seen.set, seen.key, seen.rank, seen.size)
    assert alone.recreator.policy == "" and seen.recreator.policy  # the LWS's restartPolicy: a view's
    assert resolve_object_alone(shapes.pod(found, "llm-xl-1-2")) == alone
    # A Workload API gang is placed by its PodGroup, which only a view holds.
    gang_pod = next(o for o in found if o["kind"] == "Pod" and o["metadata"]["namespace"] == "train")
    assert resolve(view, record(view, "train", gang_pod["metadata"]["name"])) is not None
    assert resolve_object_alone(gang_pod) is None


def test_recreated_group_is_the_lws_templates_pods_and_nothing_for_a_gang() -> None:
    from guardhook.groups import recreated_group

    view = shapes.view(objects())
    pods = recreated_group(view, SetRef("serve", "LeaderWorkerSet", shapes.LWS), "2")
    assert [p["metadata"]["name"] for p in pods] == ["llm-xl-2", "llm-xl-2-1", "llm-xl-2-2", "llm-xl-2-3"]
    assert all(p["status"]["phase"] == "Pending" and "nodeName" not in p["spec"] for p in pods)
    assert recreated_group(view, SetRef("train", "Workload", "train"), "train-1") == []
    assert recreated_group(view, SetRef("serve", "LeaderWorkerSet", "nope"), "2") == []


def test_warm_builds_the_group_index_before_the_first_request() -> None:
    from guardhook.groups import warm
    from guardhook.groups.index import _INDEXES

    view = shapes.view(objects())
    assert view not in _INDEXES
    warm(view)
    assert view in _INDEXES
