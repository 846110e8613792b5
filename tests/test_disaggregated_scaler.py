"""`pod-counted-scaler` on the LeaderWorkerSets a DisaggregatedSet runs (disaggregatedset.x-k8s.io/v1,
lws KEP-849), from the captured s23-hpa-lws / s25-keda-lws / s21-hpa-worker-sts reviews; and
`leader-service` leaving the DisaggregatedSet's own Services alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.store import ClusterView
from guardhook.wire import KubeObject

from conftest import load_review
from helpers import find, fleet_view

DS_OWNER = {
    "apiVersion": "disaggregatedset.x-k8s.io/v1",
    "kind": "DisaggregatedSet",
    "name": "myds",
    "uid": "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d",
    "controller": True,
}
DS_LABELS = {
    "app": "myds-0-prefill",
    "disaggregatedset.x-k8s.io/name": "myds",
    "disaggregatedset.x-k8s.io/role": "prefill",
    "disaggregatedset.x-k8s.io/slice": "0",
    "disaggregatedset.x-k8s.io/revision": "6ad7c921",
}
REVISIONED = "myds-0-6ad7c921-prefill"
ROLE_SCALER = "kind: DisaggregatedSetRoleScaler, name: myds-prefill"


def owned_by_ds(lws: KubeObject, role_label: bool = True) -> None:
    """Make `lws` one the DisaggregatedSet controller created (lws_manager.go: ownerReference and labels)."""
    lws["metadata"]["ownerReferences"] = [dict(DS_OWNER)]
    labels = (
        dict(DS_LABELS) if role_label else {k: v for k, v in DS_LABELS.items() if not k.endswith("/role")}
    )
    lws["metadata"].setdefault("labels", {}).update(labels)


def fleet_with_ds_lws(role_label: bool = True) -> ClusterView:
    """The sample fleet's LWS llm-xl owned by DisaggregatedSet myds, plus its next-revision-named copy."""

    def edit(objects: list[KubeObject]) -> None:
        lws = find(objects, "LeaderWorkerSet", "llm-xl")
        owned_by_ds(lws, role_label)
        revisioned = copy.deepcopy(lws)
        revisioned["metadata"].update(name=REVISIONED, uid="rev-uid")
        objects.append(revisioned)

    return fleet_view(edit)


def judge(request: dict[str, Any], view: ClusterView | None = None) -> dict[str, Any]:
    return dict(Engine(view or fleet_with_ds_lws(), record=False).judge(request, "validate").response)


def aimed_at(review: str, name: str) -> dict[str, Any]:
    request = copy.deepcopy(load_review(review)["request"])
    request["object"]["spec"]["scaleTargetRef"]["name"] = name
    return request


@pytest.mark.parametrize(
    ("review", "scaler"),
    [("s23-hpa-lws.validating", "HorizontalPodAutoscaler"), ("s25-keda-lws.validating", "KEDA ScaledObject")],
)
@pytest.mark.parametrize("target", ["llm-xl", REVISIONED])
def test_scaler_on_an_lws_of_a_disaggregated_set_is_denied_naming_the_role_scaler(
    review: str, scaler: str, target: str
) -> None:
    response = judge(aimed_at(review, target))
    assert (response["allowed"], response["status"]["code"]) == (False, 403)
    message = response["status"]["message"]
    assert message.startswith(f"[pod-counted-scaler] {scaler} serve/")
    assert f"LeaderWorkerSet serve/{target}, which DisaggregatedSet myds runs for role prefill" in message
    assert "replaced at the next rollout" in message
    assert f"apiVersion: disaggregatedset.x-k8s.io/v1, {ROLE_SCALER}" in message
    assert "scaling.mode: External" in message


@pytest.mark.parametrize("review", ["s23-hpa-lws.validating", "s25-keda-lws.validating"])
def test_scaler_on_a_plain_lws_is_still_allowed(review: str) -> None:
    response = judge(load_review(review)["request"], fleet_view())
    assert response["allowed"] is True and not response.get("warnings")


def test_scaler_on_the_role_scaler_itself_is_allowed() -> None:
    request = copy.deepcopy(load_review("s23-hpa-lws.validating")["request"])
    request["object"]["spec"]["scaleTargetRef"] = {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetRoleScaler",
        "name": "myds-prefill",
    }
    response = judge(request)
    assert response["allowed"] is True and not response.get("warnings")


@pytest.mark.parametrize("review", ["s23-hpa-lws.validating", "s21-hpa-worker-sts.validating"])
def test_an_lws_without_a_role_label_names_the_disaggregated_set_and_where_the_role_is(review: str) -> None:
    # The role scaler is `<ds>-<role>` (lws scaler_manager.go ScalerName); with no role label the
    # LWS's name `<ds>-<slice>-<revision>-<role>` cannot tell the role either (it may hold dashes).
    response = judge(load_review(review)["request"], fleet_with_ds_lws(role_label=False))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.endswith(
        "kind: DisaggregatedSetRoleScaler, name: myds- followed by the role's name from the "
        "DisaggregatedSet's spec.roles (this LeaderWorkerSet has no disaggregatedset.x-k8s.io/role "
        "label naming its role)"
    )
    assert "<" not in message and "prefill" not in message  # no placeholder, no guessed role


def test_lws_not_in_the_view_is_allowed_and_a_stale_view_says_so() -> None:
    request = aimed_at("s23-hpa-lws.validating", "not-there")
    assert judge(request)["allowed"] is True and not judge(request).get("warnings")
    stale = fleet_with_ds_lws()
    stale.mark_broken("pods", now=0.0)
    response = judge(request, stale)
    assert response["allowed"] is True
    assert any(w.startswith("[pod-counted-scaler]") and "not checked" in w for w in response["warnings"])
    # the LWS the view holds shows its owner whatever the view's freshness
    assert judge(load_review("s23-hpa-lws.validating")["request"], stale)["allowed"] is False


def test_scaler_on_a_worker_statefulset_of_a_disaggregated_lws_names_the_role_scaler() -> None:
    response = judge(load_review("s21-hpa-worker-sts.validating")["request"])
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "worker StatefulSet of group 0 of LeaderWorkerSet llm-xl" in message
    assert ROLE_SCALER in message and "kind: LeaderWorkerSet" not in message


@pytest.mark.parametrize("review", ["s15-service-headless.mutating", "s12-service-app-selector.mutating"])
def test_leader_service_leaves_the_disaggregated_sets_services_alone(review: str) -> None:
    request = copy.deepcopy(load_review(review)["request"])
    request["object"]["metadata"]["ownerReferences"] = [dict(DS_OWNER)]
    if "headless" in review:
        request["object"]["spec"]["clusterIP"] = "None"  # service_manager.go sets it explicitly
    response = Engine(fleet_with_ds_lws(), record=False).judge(request, "mutate").response
    assert response == {"uid": request["uid"], "allowed": True}
