"""Policy `leader-service`: captured Service reviews on the real server, the patch applied with
`jsonpatch`, reinvocation, the other actions, and the Services it must leave alone."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.config import LWS_CONTROLLER, build_config

from conftest import Server, expected_answers, load_review

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
SERVICE_REVIEWS = [
    e for e in expected_answers()["single"] if e["review"].startswith(("s12", "s13", "s14", "s15", "s17"))
]


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


@pytest.mark.parametrize("entry", SERVICE_REVIEWS, ids=lambda e: e["review"])
def test_captured_service_reviews_get_the_expected_answer(server: Server, entry: dict[str, Any]) -> None:
    response = server.review(entry["path"], entry["review"])
    assert response["allowed"] is entry["allowed"]
    if entry.get("patch") == "none":
        assert "patch" not in response
    if "patch_adds" in entry:
        adds = {op["path"]: op["value"] for op in decoded_patch(response) if op["op"] == "add"}
        assert adds == entry["patch_adds"]


@pytest.mark.parametrize("scenario", ["s12", "s13", "s14", "s15", "s17"])
def test_validating_copies_are_allowed_without_warnings(server: Server, scenario: str) -> None:
    review = {
        "s12": "s12-service-app-selector",
        "s13": "s13-service-leader-role",
        "s14": "s14-service-worker-index-0",
        "s15": "s15-service-headless",
        "s17": "s17-service-unrelated",
    }[scenario]
    response = server.review("/validate", review + ".validating")
    assert response["allowed"] is True
    assert "patch" not in response
    assert not any(w.startswith("[leader-service]") for w in response.get("warnings", []))


def test_patch_applied_selects_leaders_and_reinvocation_yields_no_patch(server: Server) -> None:
    body = load_review("s12-service-app-selector.mutating")
    response = server.post("/mutate", body).json()["response"]
    patched = jsonpatch.apply_patch(body["request"]["object"], decoded_patch(response))
    assert patched["spec"]["selector"] == {"app": "llm-xl", WORKER_INDEX: "0"}
    again = copy.deepcopy(body)
    again["request"]["object"] = patched
    reinvoked = server.post("/mutate", again).json()["response"]
    assert reinvoked["allowed"] is True
    assert "patch" not in reinvoked


def engine(*actions: str) -> Engine:
    config = build_config({"policies": {"leader-service": {"actions": list(actions)}}})
    return Engine(embedded_fleet_view(), config, record=False)


def service_request(**spec_changes: Any) -> dict[str, Any]:
    request = copy.deepcopy(load_review("s12-service-app-selector.mutating")["request"])
    request["object"]["spec"].update(spec_changes)
    return request


def test_mutate_is_the_default_and_validate_then_ignores_the_service() -> None:
    default = engine("Mutate")
    assert decoded_patch(default.judge(service_request(), "mutate").response) == [
        {"op": "add", "path": "/spec/selector/leaderworkerset.sigs.k8s.io~1worker-index", "value": "0"}
    ]
    assert default.judge(service_request(), "validate").response == {
        "uid": service_request()["uid"],
        "allowed": True,
    }


def test_deny_action_rejects_on_validate_and_does_not_mutate() -> None:
    deny = engine("Deny")
    response = deny.judge(service_request(), "validate").response
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"].startswith("[leader-service]")
    assert WORKER_INDEX in response["status"]["message"]
    assert "patch" not in deny.judge(service_request(), "mutate").response


def test_warn_and_audit_actions_allow_with_a_warning_or_annotation() -> None:
    warned = engine("Warn").judge(service_request(), "validate").response
    assert warned["allowed"] is True
    assert [w for w in warned["warnings"] if w.startswith("[leader-service]")]
    audited = engine("Audit").judge(service_request(), "validate").response
    assert audited["allowed"] is True
    assert "llm-xl" in audited["auditAnnotations"]["leader-service"]
    assert "warnings" not in audited


def test_deny_action_on_the_real_server(fresh_server: Any, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"policies": {"leader-service": {"actions": ["Deny"]}}}))
    running = fresh_server("--config", str(config))
    denied = running.review("/validate", "s12-service-app-selector.validating")
    assert (denied["allowed"], denied["status"]["code"]) == (False, 403)
    assert denied["status"]["message"].startswith("[leader-service]")
    assert "patch" not in running.review("/mutate", "s12-service-app-selector.mutating")


@pytest.mark.parametrize(
    "changes",
    [
        {"clusterIP": "None"},
        {"type": "ExternalName", "externalName": "example.com", "selector": None},
        {"type": "ExternalName", "externalName": "example.com"},
        {"selector": None},
        {"selector": {}},
    ],
    ids=["headless", "externalname", "externalname-with-selector", "no-selector", "empty-selector"],
)
def test_services_left_alone(changes: dict[str, Any]) -> None:
    response = engine("Mutate").judge(service_request(**changes), "mutate").response
    assert response == {"uid": service_request()["uid"], "allowed": True}


LLM_XL_UID = "0210c3a2-ee71-453c-abc5-3914f5531483"  # the sample fleet's LWS serve/llm-xl


def owned_service_request(uid: str, name: str = "llm-xl") -> dict[str, Any]:
    request = service_request()
    request["object"]["metadata"]["ownerReferences"] = [
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": name, "uid": uid}
    ]
    return request


def test_a_service_owned_by_the_lws_is_left_alone() -> None:
    assert "patch" not in engine("Mutate").judge(owned_service_request(LLM_XL_UID), "mutate").response


@pytest.mark.parametrize(("uid", "name"), [("u", "llm-xl"), ("", "llm-xl"), (LLM_XL_UID, "no-such-lws")])
def test_a_made_up_lws_owner_reference_does_not_switch_the_mutation_off(uid: str, name: str) -> None:
    # Issue 48: any ownerReference naming an LWS used to leave the Service unpinned; only the LWS
    # the view holds with that uid, or the LWS controller sending it, counts now.
    assert decoded_patch(engine("Mutate").judge(owned_service_request(uid, name), "mutate").response)
    from_controller = owned_service_request(uid, name)
    from_controller["userInfo"] = {"username": LWS_CONTROLLER, "groups": ["system:serviceaccounts"]}
    # The LWS controller is exempt from leader-service anyway; the owner check trusts it too.
    assert "patch" not in engine("Mutate").judge(from_controller, "mutate").response


def test_update_with_an_allocated_cluster_ip_is_patched() -> None:
    request = service_request(clusterIP="10.96.0.12", type="LoadBalancer")
    request["operation"] = "UPDATE"
    request["oldObject"] = copy.deepcopy(request["object"])
    assert decoded_patch(engine("Mutate").judge(request, "mutate").response)


def test_a_non_zero_worker_index_is_warned_not_rewritten() -> None:
    request = service_request(selector={"app": "llm-xl", WORKER_INDEX: "2"})
    response = engine("Mutate").judge(request, "mutate").response
    assert "patch" not in response
    assert response["allowed"] is True
    warnings = [w for w in response["warnings"] if w.startswith("[leader-service]") and "do not serve" in w]
    assert len(warnings) == 1
    assert len(warnings[0]) <= 256


def test_a_selector_in_another_namespace_is_unrelated() -> None:
    request = service_request()
    request["namespace"] = "elsewhere"
    request["object"]["metadata"]["namespace"] = "elsewhere"
    assert "patch" not in engine("Mutate").judge(request, "mutate").response


def test_a_stale_view_allows_unchanged_with_a_warning() -> None:
    stale = engine("Mutate")
    stale.view.mark_broken("pods", now=0.0)
    stale.view.stale_after_seconds = 1
    response = stale.judge(service_request(), "mutate").response
    assert response["allowed"] is True
    assert "patch" not in response
    assert any(w.startswith("[leader-service]") and "not checked" in w for w in response["warnings"])
