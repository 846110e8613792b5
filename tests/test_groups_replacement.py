"""A Hash LWS's group replacement (lws PR #1050): while a group tears down, its replacement leader
waits behind the `leaderworkerset.sigs.k8s.io/group-replacement` gate under a new key; the two are
one disrupted group for the budget (guardhook.groups.replacement). The fleet is the sample one
made Hash (tests/group_shapes.to_hash); evictions are the captured s07."""

from __future__ import annotations

import copy

import group_shapes as shapes

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import GROUP_INDEX_LABEL, GROUP_KEY_LABEL
from guardhook.config import build_config
from guardhook.groups import SetRef
from guardhook.groups.lws import LWS_MAKER
from guardhook.ledger import MemoryLedger

NEW_KEY = "f" * 40


def replacing(gated: bool = True) -> tuple[list, dict[int, tuple[str, str]]]:
    """The Hash fleet with group 1 tearing down (its leader terminating) and, when `gated`, its
    replacement leader under key NEW_KEY held by the group-replacement gate."""
    objects = shapes.fleet()
    groups = shapes.to_hash(objects)
    old_leader = shapes.pod(objects, groups[1][1])
    replacement = copy.deepcopy(old_leader)
    old_leader["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    meta = replacement["metadata"]
    meta.update(
        name=f"{shapes.REPLICA_SET}-zzzzz", uid="uid-replacement", creationTimestamp="2026-12-07T00:00:01Z"
    )
    meta["labels"][GROUP_INDEX_LABEL] = NEW_KEY
    meta["labels"][GROUP_KEY_LABEL] = NEW_KEY
    replacement["spec"].pop("nodeName", None)
    replacement["spec"]["schedulingGates"] = [{"name": "leaderworkerset.sigs.k8s.io/group-replacement"}]
    replacement["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    if gated:
        objects.append(replacement)
    return objects, groups


def test_a_group_tearing_down_and_its_gated_replacement_are_one_broken_group() -> None:
    objects, groups = replacing()
    view = shapes.view(objects)
    snap = LWS_MAKER.snapshot(view, SetRef("serve", "LeaderWorkerSet", shapes.LWS))
    assert snap is not None
    key = groups[1][0]
    assert list(snap.broken.listed) == [key]
    assert (
        f"its replacement group {NEW_KEY} waits behind the leaderworkerset.sigs.k8s.io/group-replacement gate"
        in (snap.broken.listed[key])
    )


def test_one_replacement_spends_one_of_the_budget() -> None:
    objects, groups = replacing()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    lws["metadata"].setdefault("annotations", {})["guardhook.io/max-disrupted-groups"] = "2"
    eng = Engine(shapes.view(objects), build_config({}), ledger=MemoryLedger())
    response = eng.judge(shapes.eviction_request(shapes.hash_worker(groups, 2, 1)), "validate").response
    assert response["allowed"] is True  # one group down (1 and its replacement), budget 2


def test_a_gated_leader_with_no_group_tearing_down_stays_broken() -> None:
    objects, groups = replacing()
    shapes.pod(objects, groups[1][1])["metadata"].pop("deletionTimestamp")
    view = shapes.view(objects)
    snap = LWS_MAKER.snapshot(view, SetRef("serve", "LeaderWorkerSet", shapes.LWS))
    assert snap is not None and NEW_KEY in snap.broken.listed
