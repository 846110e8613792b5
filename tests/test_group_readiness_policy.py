"""Policy `group-readiness`: the leader readiness gate added on pods CREATE, built from the captured
pod CREATEs (p01 leader, p02 worker), on a running server and through the engine."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import view_from_objects
from guardhook.config import build_config
from guardhook.groups.ready import GATE, OPT_IN_ANNOTATION

from conftest import Server, load_review, start_server
from readiness_helpers import fleet

STS_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"
GATE_ADDED = [{"op": "add", "path": "/spec/readinessGates", "value": [{"conditionType": GATE}]}]
# One worker runs the whole module (pytest-xdist's loadgroup): its module-scoped server starts once.
pytestmark = pytest.mark.xdist_group("test_group_readiness_policy")


def review(name: str, user: str = STS_CONTROLLER) -> dict[str, Any]:
    """A captured pod CREATE, as the StatefulSet controller sends it in a cluster."""
    body = load_review(name)
    body["request"]["userInfo"] = {
        "username": user,
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
    }
    return body


def leader(user: str = STS_CONTROLLER) -> dict[str, Any]:
    return review("p01-leader-pod-create.mutating", user)


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def judged(body: dict[str, Any], opted_in: bool = True, config: Any = None) -> dict[str, Any]:
    engine = Engine(view_from_objects(fleet(opted_in=opted_in)), build_config(config or {}))
    return engine.judge(body["request"], "mutate").response


@pytest.fixture(scope="module")
def opted_in_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("group-readiness")
    state = tmp / "state.json"
    state.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": fleet(gated=False)}))
    running = start_server(tmp, "--cluster-state", str(state))
    yield running
    running.stop()


def post(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = server.post(path, body)
    assert answer.status_code == 200, answer.text
    return answer.json()["response"]


def test_a_leader_created_by_the_statefulset_controller_gets_the_gate(opted_in_server: Server) -> None:
    response = post(opted_in_server, "/mutate", leader())
    assert response["allowed"] is True
    assert patch_of(response) == GATE_ADDED
    pod = jsonpatch.apply_patch(leader()["request"]["object"], patch_of(response))
    assert pod["spec"]["readinessGates"] == [{"conditionType": GATE}]
    # Reinvocation (reinvocationPolicy IfNeeded) sees the gated pod: no second entry.
    again = leader()
    again["request"]["object"] = pod
    assert patch_of(post(opted_in_server, "/mutate", again)) == []


def test_workers_are_untouched(opted_in_server: Server) -> None:
    response = post(opted_in_server, "/mutate", review("p02-worker-pod-create.mutating"))
    assert response == {"uid": response["uid"], "allowed": True}


def test_the_validating_endpoint_never_patches_pods(opted_in_server: Server) -> None:
    response = post(opted_in_server, "/validate", leader())
    assert "patch" not in response and response["allowed"] is True


def test_an_lws_that_did_not_opt_in_is_left_alone(server: Server) -> None:
    response = post(server, "/mutate", leader())  # the embedded fleet: no annotation
    assert patch_of(response) == [] and response["allowed"] is True


def test_a_leader_that_already_has_the_gate_is_left_alone() -> None:
    body = leader()
    body["request"]["object"]["spec"]["readinessGates"] = [{"conditionType": GATE}]
    assert patch_of(judged(body)) == []


def test_the_gate_is_appended_to_the_pods_own_gates() -> None:
    body = leader()
    body["request"]["object"]["spec"]["readinessGates"] = [{"conditionType": "example.com/lb-ready"}]
    ops = patch_of(judged(body))
    assert ops == [{"op": "add", "path": "/spec/readinessGates/-", "value": {"conditionType": GATE}}]
    gates = jsonpatch.apply_patch(body["request"]["object"], ops)["spec"]["readinessGates"]
    assert gates == [{"conditionType": "example.com/lb-ready"}, {"conditionType": GATE}]


def test_a_pod_without_lws_labels_is_left_alone() -> None:
    body = leader()
    labels = body["request"]["object"]["metadata"]["labels"]
    for key in [k for k in labels if k.startswith("leaderworkerset.sigs.k8s.io/")]:
        del labels[key]
    assert patch_of(judged(body)) == []


def test_user_exemptions_do_not_skip_it_but_namespace_exemptions_do() -> None:
    lws_controller = "system:serviceaccount:lws-system:lws-controller-manager"
    assert patch_of(judged(leader(lws_controller))) == GATE_ADDED
    assert patch_of(judged(leader("kubernetes-admin"))) == GATE_ADDED
    exempt_namespace = {"exemptions": {"namespaces": ["serve"]}}
    assert patch_of(judged(leader(), config=exempt_namespace)) == []


def test_the_delete_guards_still_skip_the_statefulset_controller() -> None:
    body = load_review("s01-worker-delete.validating")
    body["request"]["userInfo"] = {"username": STS_CONTROLLER}
    engine = Engine(view_from_objects(fleet()))
    verdict = engine.judge(body["request"], "validate")
    assert verdict.response["allowed"] is True and verdict.decisions == []


def test_config_can_opt_in_every_lws_and_an_lws_can_still_opt_out() -> None:
    everyone = {"policies": {"group-readiness": {"allLeaderWorkerSets": True}}}
    assert patch_of(judged(leader(), opted_in=False, config=everyone)) == GATE_ADDED
    objects = fleet(opted_in=False)
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    lws["metadata"]["annotations"] = {OPT_IN_ANNOTATION: "false"}
    engine = Engine(view_from_objects(objects), build_config(everyone))
    assert "patch" not in engine.judge(leader()["request"], "mutate").response


def test_turned_off_in_config_it_never_patches() -> None:
    off = {"policies": {"group-readiness": {"actions": []}}}
    assert patch_of(judged(leader(), config=off)) == []


def test_an_lws_the_view_has_not_seen_yet_on_a_stale_view_gets_a_warning_not_a_gate() -> None:
    objects = [o for o in fleet() if o["kind"] != "LeaderWorkerSet"]
    view = view_from_objects(objects)
    view.mark_broken("pods", now=0.0)
    view.stale_after_seconds = 1
    response = Engine(view).judge(leader()["request"], "mutate").response
    assert "patch" not in response
    assert any(w.startswith("[group-readiness]") for w in response["warnings"])


def test_audit_lists_leaders_of_opted_in_lws_without_the_gate(tmp_path: Path) -> None:
    from guardhook.commands.audit import audit
    from guardhook.commands.scan import Located
    from guardhook.config import default_config

    objects = fleet(gated=False)
    found = audit([Located("cluster", o) for o in objects], default_config()).violations
    listed = sorted(f.name for f in found if f.policy == "group-readiness")
    assert listed == ["llm-xl-0", "llm-xl-1", "llm-xl-2", "llm-xl-3"]
    assert all(
        f.action == "Mutate" and "no readiness gate" in f.message
        for f in found
        if f.policy == "group-readiness"
    )
    gated = audit([Located("cluster", o) for o in fleet()], default_config()).violations
    assert not [f for f in gated if f.policy == "group-readiness" and f.action == "Mutate"]
    assert copy.deepcopy(objects) == objects  # audit changed nothing


def test_a_worker_of_a_serving_all_lws_gets_the_gate_too() -> None:
    # Data-parallel groups (guardhook.io/serving-pods: "all"): every pod serves, so every pod is
    # gated on the group (issue 20); without the annotation workers are left alone.
    objects = fleet()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    plain = Engine(view_from_objects(copy.deepcopy(objects)), build_config({}))
    lws["metadata"]["annotations"]["guardhook.io/serving-pods"] = "all"
    serving_all = Engine(view_from_objects(objects), build_config({}))
    worker = review("p02-worker-pod-create.mutating")
    assert patch_of(plain.judge(worker["request"], "mutate").response) == []
    response = serving_all.judge(worker["request"], "mutate").response
    assert patch_of(response) == GATE_ADDED
    assert patch_of(serving_all.judge(leader()["request"], "mutate").response) == GATE_ADDED
