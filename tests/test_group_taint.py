"""Policy group-taint on Nodes: the captured node UPDATEs (n01 taint NoExecute, n02 untaint, n03
cordon) judged by the engine, by `guardhook review` and by a real TLS server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.config import build_config
from guardhook.groups.index import group_index

from conftest import Server, clean_env, load_review
from helpers import find, fleet_view, request_of

TAINT = "n01-node-taint-noexecute.validating"  # gpu-node-06 runs llm-xl-1-2 (group 1)


def taint_request(effect: str = "NoExecute", user: str = "kubernetes-admin") -> dict[str, Any]:
    request = request_of(load_review(TAINT))
    request["object"]["spec"]["taints"][0]["effect"] = effect
    groups = ["system:nodes"] if user.startswith("system:node:") else ["system:masters"]
    request["userInfo"] = {"username": user, "groups": [*groups, "system:authenticated"]}
    return request


def group_0_broken(objects: list[dict[str, Any]]) -> None:
    objects.remove(find(objects, "Pod", "llm-xl-0-1"))


def tolerate(pod: str, **toleration: Any) -> Callable[[list[dict[str, Any]]], None]:
    def edit(objects: list[dict[str, Any]]) -> None:
        group_0_broken(objects)
        find(objects, "Pod", pod)["spec"].setdefault("tolerations", []).append(toleration)

    return edit


def answer(request: dict[str, Any], view: ClusterView | None = None, raw: Any = None) -> dict[str, Any]:
    engine = Engine(view or fleet_view(), build_config(raw or {}))
    return dict(engine.judge(request, "validate").response)


def warnings(response: dict[str, Any]) -> list[str]:
    return [w for w in response.get("warnings", []) if w.startswith("[group-taint]")]


# ---- the rule, table-driven ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "edit", "request_edit", "warned"),
    [
        ("one group lost, none broken: within budget 1", None, None, False),
        ("one group lost, group 0 already broken", group_0_broken, None, True),
        (
            "tolerated forever (Exists on the key)",
            tolerate("llm-xl-1-2", key="example.com/maintenance", operator="Exists", effect="NoExecute"),
            None,
            False,
        ),
        (
            "tolerated forever (Equal, same value)",
            tolerate("llm-xl-1-2", key="example.com/maintenance", value="true", effect="NoExecute"),
            None,
            False,
        ),
        ("tolerates every taint (empty key, Exists)", tolerate("llm-xl-1-2", operator="Exists"), None, False),
        (
            "toleration for another value",
            tolerate("llm-xl-1-2", key="example.com/maintenance", value="false", effect="NoExecute"),
            None,
            True,
        ),
        (
            "toleration for NoSchedule only",
            tolerate("llm-xl-1-2", key="example.com/maintenance", operator="Exists", effect="NoSchedule"),
            None,
            True,
        ),
        (
            "timed toleration: evicted later",
            tolerate("llm-xl-1-2", key="example.com/maintenance", operator="Exists", tolerationSeconds=300),
            None,
            True,
        ),
        (
            "NoSchedule taint",
            group_0_broken,
            lambda r: r["object"]["spec"]["taints"][0].update(effect="NoSchedule"),
            False,
        ),
        (
            "PreferNoSchedule taint",
            group_0_broken,
            lambda r: r["object"]["spec"]["taints"][0].update(effect="PreferNoSchedule"),
            False,
        ),
        (
            "taint already there (another field changed)",
            group_0_broken,
            lambda r: r.update(oldObject=json.loads(json.dumps(r["object"]))),
            False,
        ),
        (
            "taint value changed: a new taint",
            group_0_broken,
            lambda r: r.update(
                oldObject={
                    **r["object"],
                    "spec": {
                        "taints": [{"key": "example.com/maintenance", "value": "old", "effect": "NoExecute"}]
                    },
                }
            ),
            True,
        ),
        (
            "node CREATE carrying the taint",
            group_0_broken,
            lambda r: r.update(operation="CREATE", oldObject=None),
            True,
        ),
    ],
)
def test_node_taint_table(case: str, edit: Any, request_edit: Any, warned: bool) -> None:
    request = taint_request()
    if request_edit is not None:
        request_edit(request)
    response = answer(request, fleet_view(edit))
    assert response["allowed"] is True, case
    assert bool(warnings(response)) is warned, (case, response)


def test_warning_names_the_lws_the_groups_and_the_pods() -> None:
    (warning,) = warnings(answer(taint_request(), fleet_view(group_0_broken)))
    assert "NoExecute taint example.com/maintenance=true:NoExecute on node gpu-node-06" in warning
    assert "LeaderWorkerSet serve/llm-xl would lose 1 whole group of 4: group 1 (llm-xl-1-2)" in warning
    assert "already broken: group 0 (3 of 4 pods exist)" in warning
    assert "at most 1 may be broken at a time (config parameter maxDisruptedGroups)" in warning
    assert "annotation" not in warning  # the budget came from the config, not the LWS


def test_timed_toleration_is_named_in_the_message() -> None:
    edit = tolerate("llm-xl-1-2", key="example.com/maintenance", operator="Exists", tolerationSeconds=300)
    (warning,) = warnings(answer(taint_request(), fleet_view(edit)))
    assert "llm-xl-1-2 after its 300s toleration" in warning


def test_two_groups_on_one_node_exceed_budget_one() -> None:
    def crowd(objects: list[dict[str, Any]]) -> None:
        find(objects, "Pod", "llm-xl-2-1")["spec"]["nodeName"] = "gpu-node-06"

    (warning,) = warnings(answer(taint_request(), fleet_view(crowd)))
    assert "would lose 2 whole groups of 4: group 1 (llm-xl-1-2); group 2 (llm-xl-2-1)" in warning
    assert "already broken: none" in warning


def test_budget_annotation_and_parameter() -> None:
    def budget_0(objects: list[dict[str, Any]]) -> None:
        find(objects, "LeaderWorkerSet", "llm-xl")["metadata"].setdefault("annotations", {})[
            "guardhook.io/max-disrupted-groups"
        ] = "0"

    (warning,) = warnings(answer(taint_request(), fleet_view(budget_0)))
    assert "at most 0 may be broken at a time (annotation guardhook.io/max-disrupted-groups)" in warning
    raw = {"policies": {"group-taint": {"maxDisruptedGroups": 2}}}
    assert not warnings(answer(taint_request(), fleet_view(group_0_broken), raw))


@pytest.mark.parametrize(
    ("actions", "allowed", "where"), [(["Deny"], False, "status"), (["Audit"], True, "auditAnnotations")]
)
def test_deny_and_audit_are_configurable(actions: list[str], allowed: bool, where: str) -> None:
    raw = {"policies": {"group-taint": {"actions": actions}}}
    response = answer(taint_request(), fleet_view(group_0_broken), raw)
    assert response["allowed"] is allowed
    assert where in response and not warnings(response)
    if not allowed:
        assert response["status"]["code"] == 403
        assert response["status"]["message"].startswith("[group-taint]")


@pytest.mark.parametrize("review", ["n02-node-untaint.validating", "n03-node-cordon.validating"])
def test_untaint_and_cordon_are_plain_allows(review: str) -> None:
    response = answer(request_of(load_review(review)), fleet_view(group_0_broken))
    assert response == {"uid": load_review(review)["request"]["uid"], "allowed": True}


def test_stale_view_fails_open_with_a_warning() -> None:
    view = fleet_view(group_0_broken)
    view.mark_broken(PODS, now=0.0)
    response = answer(taint_request(), view)
    assert response["allowed"] is True
    (warning,) = warnings(response)
    assert "not checked" in warning


def test_node_lifecycle_controller_and_kubelets_are_exempt() -> None:
    for user in ("system:serviceaccount:kube-system:node-controller", "system:node:gpu-node-06"):
        response = answer(taint_request(user=user), fleet_view(group_0_broken))
        assert response["allowed"] is True and not warnings(response)


# ---- `guardhook review` and a real TLS server -------------------------------------------------------


def fleet_file(tmp_path: Path, edit: Callable[[list[dict[str, Any]]], None]) -> Path:
    from guardhook.cluster.view.static import embedded_fleet_objects

    objects = json.loads(json.dumps(embedded_fleet_objects()))
    edit(objects)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def review_cli(tmp_path: Path, review: str, *flags: str) -> dict[str, Any]:
    source = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "reviews" / f"{review}.json"
    printed = subprocess.run(
        [sys.executable, "-m", "guardhook", "review", str(source), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(tmp_path),
    )
    assert printed.returncode == 0, printed.stderr
    return dict(json.loads(printed.stdout)["response"])


def test_review_command_on_the_node_fixtures(tmp_path: Path) -> None:
    state = fleet_file(tmp_path, group_0_broken)
    for review in ("n01-node-taint-noexecute.validating", "n01-node-taint-noexecute.mutating"):
        assert review_cli(tmp_path, review) == {"uid": load_review(review)["request"]["uid"], "allowed": True}
    tainted = review_cli(tmp_path, TAINT, "--cluster-state", str(state))
    assert tainted["allowed"] is True and "serve/llm-xl" in warnings(tainted)[0]
    for review in ("n02-node-untaint.validating", "n03-node-cordon.validating"):
        assert "warnings" not in review_cli(tmp_path, review, "--cluster-state", str(state))


def test_real_server_answers_the_node_fixtures(tmp_path: Path, fresh_server: Callable[..., Server]) -> None:
    server = fresh_server("--cluster-state", str(fleet_file(tmp_path, group_0_broken)))
    tainted = server.review("/validate", TAINT)
    assert tainted["allowed"] is True and warnings(tainted)
    assert server.review("/validate", "n03-node-cordon.validating") == {
        "uid": load_review("n03-node-cordon.validating")["request"]["uid"],
        "allowed": True,
    }
    assert server.review("/validate", "n02-node-untaint.validating")["allowed"] is True


def test_an_lws_of_int32_max_replicas_is_judged_from_its_pods() -> None:
    def huge(objects: list[dict[str, Any]]) -> None:
        find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["replicas"] = 2**31 - 1

    view = fleet_view(huge)
    index = group_index(view)
    real, calls = index.pods, [0]

    def group_pods(namespace: str, lws_name: str, key: str) -> list[Any]:
        calls[0] += 1
        assert calls[0] < 5_000, "group_pods called once per group key: work grows with replicas"
        return real(namespace, lws_name, key)

    index.pods = group_pods  # type: ignore[method-assign]
    (warning,) = warnings(answer(taint_request(), view))
    assert f"would lose 1 whole group of {2**31 - 1}: group 1 (llm-xl-1-2)" in warning
    assert "already broken: group 4 (0 of 4 pods exist); group 5 (0 of 4 pods exist); " in warning
    assert f"; and {2**31 - 1 - 24} more groups with no pods (0 of 4 pods exist); at most 1" in warning
