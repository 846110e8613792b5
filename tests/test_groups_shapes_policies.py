"""The other group makers through the policies that name controllers: a Hash LWS's leader
Deployment and worker StatefulSets under a scaler, its leaders under group-readiness; an LWS a
RoleBasedGroup runs, and a RoleBasedGroupSet, under a scaler; an LWS Kthena serves under a worker
delete and evictions. Requests are the captured ones (s01, s07, s21, s23, s25, p01) aimed at the
fleet turned into each shape (tests/group_shapes.py)."""

from __future__ import annotations

import copy
from typing import Any

import group_shapes as shapes
import pytest

from guardhook.admission.engine import Engine
from guardhook.config import build_config
from guardhook.groups import resolve_object
from guardhook.groups.ready import OPT_IN_ANNOTATION
from guardhook.groups.ref import KTHENA
from guardhook.ledger import MemoryLedger
from guardhook.readiness.desired import plan

from conftest import load_review
from helpers import find


def judge(objects: list, request: dict, mode: str = "validate") -> dict[str, Any]:
    engine = Engine(shapes.view(objects), build_config({}), ledger=MemoryLedger())
    return dict(engine.judge(request, mode).response)


def scaler(review: str, kind: str, name: str, api_version: str = "apps/v1") -> dict[str, Any]:
    request = copy.deepcopy(load_review(review)["request"])
    request["object"]["spec"]["scaleTargetRef"] = {"apiVersion": api_version, "kind": kind, "name": name}
    return request


# ---- Hash: scalers ------------------------------------------------------------------------------


@pytest.mark.parametrize("review", ["s23-hpa-lws.validating", "s25-keda-lws.validating"])
def test_a_scaler_on_a_hash_lws_leader_deployment_is_denied(review: str) -> None:
    objects = shapes.fleet()
    shapes.to_hash(objects)
    response = judge(objects, scaler(review, "Deployment", "llm-xl"))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert (
        "Deployment serve/llm-xl, the leader Deployment of LeaderWorkerSet llm-xl (groupIdentity Hash)"
        in message
    )
    assert "kind: LeaderWorkerSet, name: llm-xl" in message


def test_a_scaler_on_a_deployment_of_an_ordinal_lws_name_is_allowed() -> None:
    response = judge(shapes.fleet(), scaler("s23-hpa-lws.validating", "Deployment", "llm-xl"))
    assert response["allowed"] is True


def test_a_scaler_on_a_hash_worker_statefulset_is_denied() -> None:
    objects = shapes.fleet()
    key, leader = shapes.to_hash(objects)[1]
    # The worker StatefulSet is named after its leader pod (a generated name): the view's leader
    # of that name gives the group, even with no StatefulSet record to read labels from.
    response = judge(objects, scaler("s21-hpa-worker-sts.validating", "StatefulSet", leader))
    assert response["allowed"] is False
    assert f"the worker StatefulSet of group {key} of LeaderWorkerSet llm-xl" in response["status"]["message"]


# ---- Hash: group-readiness ----------------------------------------------------------------------


def opted_in(objects: list) -> None:
    find(objects, "LeaderWorkerSet", "llm-xl")["metadata"].setdefault("annotations", {})[
        OPT_IN_ANNOTATION
    ] = "true"


def test_a_hash_leader_gets_no_second_readiness_gate_and_is_told_why() -> None:
    objects = shapes.fleet()
    groups = shapes.to_hash(objects)
    opted_in(objects)
    body = copy.deepcopy(load_review("p01-leader-pod-create.mutating"))
    body["request"]["object"] = copy.deepcopy(shapes.pod(objects, groups[0][1]))
    body["request"]["name"] = groups[0][1]
    response = judge(objects, body["request"], "mutate")
    assert response["allowed"] is True and "patch" not in response
    assert any(
        "groupIdentity Hash" in w and "leaderworkerset.sigs.k8s.io/group-ready" in w
        for w in response["warnings"]
    )
    # the same leader of the Ordinal fleet gets guardhook's gate
    ordinal = shapes.fleet()
    opted_in(ordinal)
    assert "patch" in judge(ordinal, load_review("p01-leader-pod-create.mutating")["request"], "mutate")


def test_the_readiness_plan_leaves_hash_leaders_alone_and_says_so() -> None:
    objects = shapes.fleet()
    shapes.to_hash(objects)
    opted_in(objects)
    result = plan(shapes.view(objects))
    assert not [e for e in result.entries if e.lws == "llm-xl"]
    assert any("groupIdentity Hash" in w for w in result.warnings)


# ---- RoleBasedGroup -----------------------------------------------------------------------------


def rbg_owned(objects: list, rbg: str = "chat", role: str = "decode") -> None:
    """LWS llm-xl as RoleBasedGroup `rbg` runs it for `role` (here under the fleet's name)."""
    meta = find(objects, "LeaderWorkerSet", "llm-xl")["metadata"]
    meta["ownerReferences"] = [
        {
            "apiVersion": "workloads.x-k8s.io/v1alpha2",
            "kind": "RoleBasedGroup",
            "name": rbg,
            "uid": "u-rbg",
            "controller": True,
        }
    ]
    meta.setdefault("labels", {}).update(
        {"rbg.workloads.x-k8s.io/group-name": rbg, "rbg.workloads.x-k8s.io/role-name": role}
    )


@pytest.mark.parametrize("review", ["s23-hpa-lws.validating", "s25-keda-lws.validating"])
def test_a_scaler_on_an_lws_a_role_based_group_runs_is_denied_naming_its_adapter(review: str) -> None:
    objects = shapes.fleet()
    rbg_owned(objects)
    response = judge(objects, load_review(review)["request"])
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "which RoleBasedGroup chat runs for role decode" in message
    assert "kind: RoleBasedGroupScalingAdapter, name: chat-decode" in message


def test_a_scaler_on_a_role_based_group_set_is_warned_about() -> None:
    request = scaler("s23-hpa-lws.validating", "RoleBasedGroupSet", "chats", "workloads.x-k8s.io/v1alpha2")
    response = judge(shapes.fleet(), request)
    assert response["allowed"] is True
    assert any("RoleBasedGroupSet serve/chats" in w for w in response["warnings"])


# ---- Kthena -------------------------------------------------------------------------------------


def test_a_kthena_pod_resolves_with_the_size_of_the_lws_spec() -> None:
    objects = shapes.fleet()
    shapes.to_kthena(objects)
    ref = resolve_object(shapes.view(objects), shapes.pod(objects, "llm-xl-2-default-0-3"))
    assert ref is not None
    assert (ref.maker, ref.key, str(ref.rank), ref.size, ref.restart) == (
        KTHENA,
        "2",
        "worker 3",
        4,
        ("llm-xl-2-default-0-0",),
    )
    assert ref.recreator.field == "recoveryPolicy" and ref.recreator.policy == "RoleRecreate"


def test_a_kthena_worker_delete_names_the_entry_pod_and_kthena_recovery() -> None:
    objects = shapes.fleet()
    shapes.to_kthena(objects)
    response = judge(objects, shapes.delete_request(shapes.pod(objects, "llm-xl-1-default-0-2")))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "served by Kthena ModelServing llm-xl" in message
    assert "kubectl delete pod -n serve llm-xl-1-default-0-0" in message
    assert (
        "under recoveryPolicy RoleRecreate the Kthena ModelServing controller recreates the whole group"
        in message
    )
    assert "llm-xl-1 " not in message and "LWS controller" not in message


def test_kthena_evictions_keep_to_the_budget() -> None:
    objects = shapes.fleet()
    shapes.to_kthena(objects)
    engine = Engine(shapes.view(objects), build_config({}), ledger=MemoryLedger())
    first = engine.judge(shapes.eviction_request("llm-xl-0-default-0-1"), "validate").response
    second = engine.judge(shapes.eviction_request("llm-xl-3-default-0-1"), "validate").response
    assert (first["allowed"], second["allowed"]) == (True, False)
    assert "group 0 (eviction of llm-xl-0-default-0-1 recorded" in second["status"]["message"]
