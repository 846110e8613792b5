"""Group membership from what the controllers write (issue 20): a pod's controller ownerReference
(leader StatefulSet `<lws>`, worker StatefulSet `<lws>-<g>` owned by the leader pod) together with
the LWS labels. A worker relabelled `worker-index: "0"` stays the worker it is, for deletes,
evictions and drain plans alike, and the answer says its labels were inconsistent. The requests
are the captured ones (s01, s07) and the pods the sample fleet's, relabelled."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from eviction_helpers import engine, eviction

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import GROUP_INDEX_LABEL, NAME_LABEL, WORKER_INDEX_LABEL
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.groups.index import group_pods
from guardhook.groups.placement import member_of_object, member_of_pod
from guardhook.planning.drain import plan_drain
from guardhook.wire import KubeObject

from conftest import load_review
from helpers import find, fleet_view, request_of, set_ready

PARAMS = {"maxDisruptedGroups": 1, "ledgerTTLSeconds": 120}
INCONSISTENT = "its labels were inconsistent"


def relabel(pod: KubeObject, **labels: str) -> KubeObject:
    """`pod` with its LWS position labels overwritten (group / worker), as `kubectl label
    --overwrite` would leave it."""
    keys = {"group": GROUP_INDEX_LABEL, "worker": WORKER_INDEX_LABEL}
    for key, value in labels.items():
        pod["metadata"]["labels"][keys[key]] = value
    return pod


def relabelled_fleet(name: str, **labels: str) -> list[KubeObject]:
    objects = copy.deepcopy(embedded_fleet_objects())
    relabel(find(objects, "Pod", name), **labels)
    return objects


# ---- the rule ---------------------------------------------------------------------------------


def test_a_relabelled_worker_is_the_worker_its_statefulset_makes_it() -> None:
    pod = relabel(
        copy.deepcopy(load_review("s01-worker-delete.validating")["request"]["oldObject"]), worker="0"
    )
    member = member_of_object(pod)
    assert member is not None
    assert (member.is_leader, member.group_index, member.worker_index) == (False, "0", 2)
    assert "worker-index 0" in member.inconsistent and "worker StatefulSet of group 0" in member.inconsistent
    record = member_of_pod(PodRecord.from_object(pod))
    assert record == member  # the view's records and the review's objects read alike


def test_captured_pods_are_consistent() -> None:
    worker = member_of_object(load_review("s01-worker-delete.validating")["request"]["oldObject"])
    leader = member_of_object(load_review("p01-leader-pod-create.mutating")["request"]["object"])
    assert worker is not None and leader is not None
    assert (worker.worker_index, worker.inconsistent) == (2, "")
    assert (leader.is_leader, leader.group_index, leader.inconsistent) == (True, "4", "")


def test_a_leader_labelled_a_worker_is_judged_as_a_worker() -> None:
    leader = relabel(
        copy.deepcopy(load_review("p01-leader-pod-create.mutating")["request"]["object"]), worker="3"
    )
    member = member_of_object(leader)
    assert member is not None
    assert (member.is_leader, member.worker_index) == (False, 3)
    assert "leader StatefulSet" in member.inconsistent


def test_the_view_files_a_relabelled_worker_under_its_real_group() -> None:
    view = fleet_view(lambda objects: relabel(find(objects, "Pod", "llm-xl-0-1"), group="9", worker="0"))
    assert "llm-xl-0-1" in {p.name for p in group_pods(view, "serve", "llm-xl", "0")}
    assert group_pods(view, "serve", "llm-xl", "9") == []


# ---- delete, eviction, drain ------------------------------------------------------------------


def test_deleting_a_worker_relabelled_as_leader_is_denied_and_says_so() -> None:
    request = request_of(load_review("s01-worker-delete.validating"))
    relabel(request["oldObject"], worker="0")
    view = fleet_view(lambda objects: relabel(find(objects, "Pod", "llm-xl-0-2"), worker="0"))
    response = dict(Engine(view).judge(request, "validate").response)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith("[worker-delete]") and "is worker 2 of group 0" in message
    assert INCONSISTENT in message


def _broken_group_1(objects: list[KubeObject]) -> None:
    set_ready(find(objects, "Pod", "llm-xl-1-2"), False)


def test_evicting_a_worker_relabelled_into_a_group_beyond_replicas_counts_against_its_own_group() -> None:
    # Group 1 is broken and the budget is 1: evicting a worker of group 0 must wait. Relabelled as
    # the leader of a group beyond spec.replicas it would have been let through as being scaled away.
    objects = relabelled_fleet("llm-xl-0-3", group="9", worker="0")
    _broken_group_1(objects)
    response: dict[str, Any] = dict(
        engine(view_from_objects(objects)).judge(eviction("llm-xl-0-3"), "validate").response
    )
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert "would break group 0" in response["status"]["message"]
    assert INCONSISTENT in response["status"]["message"]


def test_a_drain_plan_counts_a_relabelled_worker_in_its_real_group() -> None:
    # llm-xl-0-1 runs on gpu-node-01: draining that node breaks group 0, whatever its labels say.
    objects = relabelled_fleet("llm-xl-0-1", group="9", worker="0")
    planned = plan_drain(objects, ["gpu-node-01"], PARAMS)
    [row] = [lws for lws in planned.lws if lws.name == "llm-xl"]
    assert row.losing == ("0",)
    assert [[(g.lws, g.group) for g in wave.groups] for wave in planned.waves] == [[("llm-xl", "0")]]


# ---- the name label removed or changed (issue 48) ---------------------------------------------


def unname(pod: KubeObject, name: str | None) -> KubeObject:
    """`pod` with its `leaderworkerset.sigs.k8s.io/name` label removed (None) or set to `name`, as
    `kubectl label pod <pod> leaderworkerset.sigs.k8s.io/name-` (or `=<name> --overwrite`) leaves it."""
    labels = pod["metadata"]["labels"]
    labels.pop(NAME_LABEL)
    if name is not None:
        labels[NAME_LABEL] = name
    return pod


@pytest.mark.parametrize("name", [None, "no-such-lws"])
def test_a_worker_without_its_name_label_is_the_member_its_owners_make_it(name: str | None) -> None:
    pod = unname(copy.deepcopy(load_review("s01-worker-delete.validating")["request"]["oldObject"]), name)
    member = member_of_object(pod)
    assert member is not None
    assert (member.lws_name, member.group_index, member.worker_index) == ("llm-xl", "0", 2)
    assert "its controller makes LWS llm-xl" in member.inconsistent
    assert member_of_pod(PodRecord.from_object(pod)) == member


@pytest.mark.parametrize("name", [None, "no-such-lws"])
def test_a_leader_without_its_name_label_is_its_groups_leader(name: str | None) -> None:
    pod = unname(copy.deepcopy(load_review("p01-leader-pod-create.mutating")["request"]["object"]), name)
    member = member_of_object(pod)
    assert member is not None
    assert (member.lws_name, member.group_index, member.is_leader) == ("llm-xl", "4", True)


def test_a_statefulset_pod_with_no_lws_label_is_no_member() -> None:
    pod = copy.deepcopy(load_review("s01-worker-delete.validating")["request"]["oldObject"])
    pod["metadata"]["labels"] = {"app": "web"}
    assert member_of_object(pod) is None


@pytest.mark.parametrize("name", [None, "no-such-lws"])
def test_evicting_a_worker_whose_name_label_was_removed_waits_as_with_the_label(name: str | None) -> None:
    # Group 1 is broken and the budget is 1: evicting a worker of group 0 must wait (429), whatever
    # its name label says. Before issue 48 the unlabelled worker was no member and was let through.
    objects = copy.deepcopy(embedded_fleet_objects())
    unname(find(objects, "Pod", "llm-xl-0-3"), name)
    _broken_group_1(objects)
    view = view_from_objects(objects)
    assert "llm-xl-0-3" in {p.name for p in group_pods(view, "serve", "llm-xl", "0")}
    response: dict[str, Any] = dict(engine(view).judge(eviction("llm-xl-0-3"), "validate").response)
    assert response["allowed"] is False
    assert response["status"]["code"] == 429
    assert "would break group 0" in response["status"]["message"]


@pytest.mark.parametrize("name", [None, "no-such-lws"])
def test_deleting_a_worker_whose_name_label_was_removed_is_denied(name: str | None) -> None:
    # `kubectl label pod llm-xl-0-2 leaderworkerset.sigs.k8s.io/name-` then `kubectl delete pod`:
    # the delete reaches worker-delete (no objectSelector on the label) and is judged by the owners.
    request = request_of(load_review("s01-worker-delete.validating"))
    unname(request["oldObject"], name)
    view = fleet_view(lambda objects: unname(find(objects, "Pod", "llm-xl-0-2"), name))
    response = dict(Engine(view).judge(request, "validate").response)
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        "[worker-delete] pod serve/llm-xl-0-2 is worker 2 of group 0 of LeaderWorkerSet llm-xl"
    )
