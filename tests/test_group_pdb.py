"""Policy `group-pdb`: captured PDB reviews on the real server, per-group and spanning selectors,
the scale-counting advisory, overlaps, and the other actions."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.config import build_config

from conftest import Server, clean_env, expected_answers, load_review

P = "leaderworkerset.sigs.k8s.io/"
PDB_REVIEWS = [e for e in expected_answers()["single"] if e["review"].startswith(("s18", "s19"))]


@pytest.mark.parametrize("entry", PDB_REVIEWS, ids=lambda e: e["review"])
def test_captured_pdb_reviews_get_the_expected_answer(server: Server, entry: dict[str, Any]) -> None:
    response = server.review(entry["path"], entry["review"])
    assert response["allowed"] is entry["allowed"]
    if "code" in entry:
        assert response["status"]["code"] == entry["code"]
        assert response["status"]["message"].startswith(f"[{entry['policy']}]")


def test_lws_wide_pdb_message_points_to_per_group_budgets(server: Server) -> None:
    message = server.review("/validate", "s18-pdb-lws-wide.validating")["status"]["message"]
    assert "4 groups of LeaderWorkerSet llm-xl" in message
    assert P + "group-index" in message
    assert "group-eviction" in message


def test_per_group_pdb_with_max_unavailable_gets_the_counting_advisory(server: Server) -> None:
    response = server.review("/validate", "s19-pdb-per-group.validating")
    advice = [w for w in response["warnings"] if w.startswith("[group-pdb]")]
    assert len(advice) == 1
    assert "(4 leaders + 3 workers = 7 pods)" in advice[0]
    assert "integer minAvailable" in advice[0]
    assert len(advice[0]) <= 256  # the API server may truncate longer warnings


def pdb_request(selector: dict[str, Any] | None, name: str = "budget", **budget: Any) -> dict[str, Any]:
    request = copy.deepcopy(load_review("s18-pdb-lws-wide.validating")["request"])
    request["name"] = name
    obj = request["object"]
    obj["metadata"]["name"] = name
    obj["spec"] = {"selector": selector, **(budget or {"minAvailable": 4})}
    return request


def engine(
    *extra_objects: dict[str, Any],
    actions: tuple[str, ...] = ("Deny",),
    replicas: int = 4,
    size: int | None = None,
) -> Engine:
    objects = embedded_fleet_objects()
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            obj["spec"]["replicas"] = replicas
            if size is not None:
                obj["spec"]["leaderWorkerTemplate"]["size"] = size
    view = view_from_objects([*objects, *extra_objects])
    return Engine(view, build_config({"policies": {"group-pdb": {"actions": list(actions)}}}), record=False)


def labels(**pins: str) -> dict[str, Any]:
    return {"matchLabels": {P + "name": "llm-xl", **{P + k.replace("_", "-"): v for k, v in pins.items()}}}


def group_pdb_warnings(response: dict[str, Any]) -> list[str]:
    return [w for w in response.get("warnings", []) if w.startswith("[group-pdb]")]


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app": "llm-xl"}},
        {"matchLabels": {"app": "llm-xl", "role": "leader"}},  # the leaders of every group
        {"matchLabels": {P + "worker-index": "1"}},  # one worker in each group
        {"matchExpressions": [{"key": P + "group-index", "operator": "In", "values": ["0", "1"]}]},
        {"matchExpressions": [{"key": P + "group-index", "operator": "NotIn", "values": ["0"]}]},
        {"matchExpressions": [{"key": P + "group-key", "operator": "Exists"}]},
        {},
    ],
    ids=["app", "leaders", "worker-1", "two-groups", "not-group-0", "group-key-exists", "empty"],
)
def test_pdbs_spanning_groups_are_denied(selector: dict[str, Any]) -> None:
    response = engine().judge(pdb_request(selector), "validate").response
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"].startswith("[group-pdb]")


@pytest.mark.parametrize(
    "selector",
    [
        labels(group_index="2"),
        labels(group_key="27481622d97c0eeffbe48cac3192e35c521ed7aa"),
        {"matchLabels": {"app": "web"}},
        {"matchExpressions": [{"key": P + "group-index", "operator": "In", "values": ["0", "9"]}]},
        None,
    ],
    ids=["group-index", "group-key", "unrelated", "one-real-group", "null"],
)
def test_pdbs_within_one_group_or_unrelated_are_allowed(selector: dict[str, Any] | None) -> None:
    response = engine().judge(pdb_request(selector), "validate").response
    assert response["allowed"] is True
    assert group_pdb_warnings(response) == []


def test_a_single_replica_lws_cannot_be_spanned() -> None:
    response = engine(replicas=1).judge(pdb_request(labels()), "validate").response
    assert response["allowed"] is True


@pytest.mark.parametrize(
    "budget",
    [{"minAvailable": 3}, {"maxUnavailable": 1}, {"minAvailable": "75%"}],
    ids=["min", "max", "percent"],
)
def test_a_plain_pdb_over_a_size_1_lws_counts_groups_and_is_allowed(budget: dict[str, Any]) -> None:
    # a group of one pod: the PDB's pods are the groups, so it budgets replicas already
    response = engine(size=1).judge(pdb_request(labels(), **budget), "validate").response
    assert response["allowed"] is True
    assert group_pdb_warnings(response) == []


def test_a_per_group_pdb_over_a_size_1_lws_is_not_advised_to_block_every_eviction() -> None:
    response = (
        engine(size=1).judge(pdb_request(labels(group_index="1"), maxUnavailable=1), "validate").response
    )
    assert response["allowed"] is True
    [advice] = group_pdb_warnings(response)
    assert "integer minAvailable" not in advice  # minAvailable 1 over one pod blocks its every eviction
    assert "one pod (size 1)" in advice and "one PDB over all of llm-xl's pods" in advice
    assert len(advice) <= 256


@pytest.mark.parametrize(
    ("budget", "warned"),
    [({"minAvailable": 4}, False), ({"minAvailable": "100%"}, True), ({"maxUnavailable": 0}, True)],
)
def test_scale_counted_per_group_budgets_are_advised(budget: dict[str, Any], warned: bool) -> None:
    response = engine().judge(pdb_request(labels(group_index="1"), **budget), "validate").response
    assert response["allowed"] is True
    assert bool(group_pdb_warnings(response)) is warned


def test_leader_only_per_group_budget_counts_the_leader_statefulset() -> None:
    selector = labels(group_index="1", worker_index="0")
    response = engine().judge(pdb_request(selector, maxUnavailable=1), "validate").response
    assert "(4 leaders = 4 pods)" in group_pdb_warnings(response)[0]


def existing_pdb(name: str, selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "serve"},
        "spec": {"selector": selector, "minAvailable": 4},
    }


def test_overlapping_an_existing_pdb_on_lws_pods_is_warned() -> None:
    judge = engine(existing_pdb("g1", labels(group_index="1")), existing_pdb("g2", labels(group_index="2")))
    overlap = judge.judge(pdb_request(labels(group_index="1"), name="mine"), "validate").response
    assert overlap["allowed"] is True
    warnings = group_pdb_warnings(overlap)
    assert len(warnings) == 1
    assert "overlaps PDB g1" in warnings[0]
    assert "500" in warnings[0]
    assert len(warnings[0]) <= 256
    apart = judge.judge(pdb_request(labels(group_index="3"), name="mine"), "validate").response
    assert group_pdb_warnings(apart) == []


def test_updating_a_pdb_does_not_overlap_itself() -> None:
    judge = engine(existing_pdb("g1", labels(group_index="1")))
    request = pdb_request(labels(group_index="1"), name="g1")
    request["operation"] = "UPDATE"
    assert group_pdb_warnings(judge.judge(request, "validate").response) == []


def test_warn_and_audit_actions() -> None:
    warned = engine(actions=("Warn",)).judge(pdb_request(labels()), "validate").response
    assert warned["allowed"] is True
    assert group_pdb_warnings(warned)[0].startswith("[group-pdb] PodDisruptionBudget serve/budget can match")
    audited = engine(actions=("Audit",)).judge(pdb_request(labels()), "validate").response
    assert audited["allowed"] is True
    assert "4 groups" in audited["auditAnnotations"]["group-pdb"]


def test_a_stale_view_allows_with_a_warning() -> None:
    stale = engine()
    stale.view.mark_broken("pods", now=0.0)
    stale.view.stale_after_seconds = 1
    response = stale.judge(pdb_request(labels()), "validate").response
    assert response["allowed"] is True
    assert any("not checked" in w for w in group_pdb_warnings(response))


def test_check_flags_a_pdb_manifest_before_any_pod_exists(tmp_path: Any) -> None:
    """`guardhook check` on manifests (an LWS and PDBs, no pods): judged from the templates."""
    lws = next(o for o in embedded_fleet_objects() if o["kind"] == "LeaderWorkerSet")
    wide = pdb_request(labels())["object"]
    per_group = pdb_request(labels(group_index="0"), name="group-0")["object"]
    manifest = tmp_path / "app.json"
    manifest.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [lws, wide, per_group]}))
    command = [sys.executable, "-m", "guardhook", "check", str(manifest)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[group-pdb]" in done.stdout
    assert "serve/budget" in done.stdout
    assert "group-0 can match" not in done.stdout
