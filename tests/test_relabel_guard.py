"""Issue 48, item 1: a pod UPDATE that removes or changes a `leaderworkerset.sigs.k8s.io/` label of
a group member is denied by worker-delete unless the LWS or StatefulSet controller sends it (a
worker without its name label slipped past every objectSelector). The updates are built from the
captured worker DELETE (s01): same pod, same user shape, operation UPDATE with the relabelled pod
as `object`, as `kubectl label pod llm-xl-0-2 leaderworkerset.sigs.k8s.io/name-` sends it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import GROUP_INDEX_LABEL, NAME_LABEL, WORKER_INDEX_LABEL
from guardhook.config import LWS_CONTROLLER

from conftest import load_review
from helpers import fleet_view, request_of

TENANT = {"username": "tenant", "groups": ["system:authenticated"]}


def relabel_update(
    pod: str = "s01-worker-delete.validating", user: dict[str, Any] | None = None, **changes: str | None
) -> Any:
    """The s01 request turned into the UPDATE that sets (a value) or removes (None) labels."""
    request = request_of(load_review(pod))
    new = copy.deepcopy(request["oldObject"])
    for key, value in changes.items():
        label = {"name": NAME_LABEL, "group": GROUP_INDEX_LABEL, "worker": WORKER_INDEX_LABEL}.get(key, key)
        if value is None:
            new["metadata"]["labels"].pop(label, None)
        else:
            new["metadata"]["labels"][label] = value
    request.update(
        operation="UPDATE",
        object=new,
        options={"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
        userInfo=user or TENANT,
    )
    return request


def answer(request: Any) -> dict[str, Any]:
    return dict(Engine(fleet_view()).judge(request, "validate").response)


@pytest.mark.parametrize(
    "changes",
    [
        {"name": None},
        {"name": "no-such-lws"},
        {"group": "7"},
        {"worker": "0"},
        {"name": None, "worker": None},
    ],
)
def test_removing_or_changing_a_members_lws_labels_is_denied(changes: dict[str, str | None]) -> None:
    response = answer(relabel_update(**changes))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith(
        "[worker-delete] pod serve/llm-xl-0-2 is worker 2 of group 0 of LeaderWorkerSet llm-xl"
    )
    assert response["status"]["code"] == 403


@pytest.mark.parametrize(
    "user",
    [
        {"username": LWS_CONTROLLER, "groups": ["system:serviceaccounts"]},
        {"username": "system:serviceaccount:kube-system:statefulset-controller", "groups": []},
    ],
)
def test_the_lws_and_statefulset_controllers_may_change_them(user: dict[str, Any]) -> None:
    assert answer(relabel_update(user=user, name=None))["allowed"] is True


def test_other_labels_and_added_lws_labels_are_left_alone() -> None:
    assert answer(relabel_update(app="other", team="a"))["allowed"] is True
    assert answer(relabel_update(**{"leaderworkerset.sigs.k8s.io/extra": "x"}))["allowed"] is True


def test_a_pod_of_no_group_may_be_relabelled() -> None:
    request = relabel_update(name=None)
    for obj in (request["object"], request["oldObject"]):
        obj["metadata"]["labels"] = {
            "app": "web",
            **({NAME_LABEL: "x"} if obj is request["oldObject"] else {}),
        }
        obj["metadata"]["ownerReferences"] = []
        obj["metadata"]["name"] = "web-1"
    request["name"] = "web-1"
    # A bare pod labelled with a name but no position is no member: its labels are its own.
    assert answer(request)["allowed"] is True


def test_a_worker_statefulset_without_its_lws_labels_is_still_guarded() -> None:
    # s27 (an update of worker StatefulSet llm-xl-0's replicas) with every LWS label removed from
    # the StatefulSet in the request and in the view: still an LWS worker StatefulSet by its name.
    request = request_of(load_review("s27-sts-update-worker.validating"))
    for key in ("object", "oldObject"):
        request[key]["metadata"]["labels"] = {}

    def strip(objects: list[Any]) -> None:
        for obj in objects:
            if obj["kind"] == "StatefulSet":
                obj["metadata"]["labels"] = {}

    response = dict(Engine(fleet_view(strip)).judge(request, "validate").response)
    assert response["allowed"] is False
    assert response["status"]["message"].startswith("[pod-counted-scaler]")


# ---- the floor holds the same rule (evaluated by cel-python as the API server would) ------------


FLOOR_CASES = [
    ({"name": None}, TENANT, True),
    ({"name": "no-such-lws"}, TENANT, True),
    ({"worker": "0"}, TENANT, True),
    ({"app": "other"}, TENANT, False),
    ({"leaderworkerset.sigs.k8s.io/extra": "x"}, TENANT, False),
    ({"name": None}, {"username": LWS_CONTROLLER, "groups": ["system:serviceaccounts"]}, False),
    ({"name": None}, {"username": "system:serviceaccount:kube-system:statefulset-controller"}, False),
]


@pytest.mark.parametrize(("changes", "user", "denied"), FLOOR_CASES)
def test_the_floor_agrees_with_the_webhook_on_relabelling(
    changes: dict[str, str | None], user: dict[str, Any], denied: bool
) -> None:
    from guardhook.config import default_config
    from guardhook.floor.evaluate import evaluate_floor
    from guardhook.floor.export import export_floor

    request = relabel_update(user=user, **changes)
    floor = evaluate_floor(export_floor(default_config()).objects, copy.deepcopy(request))
    assert not floor.errors, floor.errors
    floor_denied = any("'guardhook-floor-worker-delete'" in text for text in floor.denied)
    assert floor_denied is denied
    assert (answer(request)["allowed"] is False) is denied


def test_the_floor_lets_a_ready_worker_be_updated_otherwise() -> None:
    # The delete rule is for DELETEs only: an UPDATE of a Ready worker that keeps its LWS labels
    # (an annotation, say) passes the floor.
    from guardhook.config import default_config
    from guardhook.floor.evaluate import evaluate_floor
    from guardhook.floor.export import export_floor

    request = relabel_update()
    request["object"]["metadata"].setdefault("annotations", {})["note"] = "x"
    floor = evaluate_floor(export_floor(default_config()).objects, request)
    assert not floor.errors and not floor.denied
