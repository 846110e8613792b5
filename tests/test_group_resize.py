"""Policy group-resize: in-place resizes (`pods/resize` UPDATE) of group members, with and without
a container restart, under each LWS restartPolicy, judged by the engine and by a real TLS server.
Reviews are the captured s01 (a worker of serve/llm-xl) re-aimed as a resize, as the API server
sends one: subResource "resize", the whole Pod as object and oldObject."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from eviction_helpers import eviction, find, fleet_objects

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import PODS
from guardhook.config import build_config
from guardhook.ledger import MemoryLedger
from guardhook.policies.group_resize import Restart, restarts

from conftest import Server, clean_env, load_review
from helpers import request_of

Objects = list[dict[str, Any]]
VPA = "system:serviceaccount:kube-system:vpa-updater"
RESTARTS_MEMORY = [
    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
    {"resourceName": "memory", "restartPolicy": "RestartContainer"},
]


def with_resize_policy(policy: list[dict[str, str]] | None) -> Callable[[Objects], None]:
    """Every fleet pod's container `shard` with `resizePolicy` (as the LWS template would give)."""

    def edit(objects: Objects) -> None:
        for pod in (o for o in objects if o["kind"] == "Pod"):
            if policy is not None:
                pod["spec"]["containers"][0]["resizePolicy"] = copy.deepcopy(policy)

    return edit


def fleet(*edits: Callable[[Objects], None]) -> Objects:
    objects = fleet_objects()
    for edit in edits:
        edit(objects)
    return objects


def restart_policy(policy: str | None) -> Callable[[Objects], None]:
    def edit(objects: Objects) -> None:
        if policy is not None:
            find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
                policy
            )

    return edit


def resize(
    pod: str, objects: Objects, user: str = VPA, dry_run: bool = False, **resources: str
) -> dict[str, Any]:
    """s01 re-aimed as a resize of `pod` (its object in `objects`) setting container `shard`'s
    requests to `resources` (e.g. memory="1600Gi")."""
    request = request_of(load_review("s01-worker-delete.validating"))
    old = copy.deepcopy(find(objects, "Pod", pod))
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"]["requests"].update(resources)
    request.update(
        name=pod,
        operation="UPDATE",
        subResource="resize",
        requestSubResource="resize",
        object=new,
        oldObject=old,
        dryRun=dry_run,
        options={"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-patch"},
        userInfo={"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]},
    )
    return request


def engine(objects: Objects, ledger: MemoryLedger | None = None, raw: Any = None) -> Engine:
    return Engine(view_from_objects(objects), build_config(raw or {}), ledger=ledger or MemoryLedger())


def respond(eng: Engine, request: dict[str, Any]) -> dict[str, Any]:
    return dict(eng.judge(request, "validate").response)


# ---- which containers a resize restarts -----------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "change", "restarting"),
    [
        (None, {"memory": "1600Gi"}, []),  # no resizePolicy: NotRequired for every resource
        (RESTARTS_MEMORY, {"cpu": "100"}, []),
        (RESTARTS_MEMORY, {"memory": "1600Gi"}, [Restart("shard", ("memory",))]),
        (RESTARTS_MEMORY, {"cpu": "100", "memory": "1600Gi"}, [Restart("shard", ("memory",))]),
        (RESTARTS_MEMORY, {}, []),  # nothing changed
    ],
)
def test_a_resize_restarts_a_container_only_for_a_changed_resource_with_restart_container(
    policy: list[dict[str, str]] | None, change: dict[str, str], restarting: list[Restart]
) -> None:
    objects = fleet(with_resize_policy(policy))
    request = resize("llm-xl-0-2", objects, **change)
    assert restarts(request["object"], request["oldObject"]) == restarting


def test_a_limit_change_counts_and_a_sidecar_is_judged_too() -> None:
    old = {"spec": {"initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {}}]}}
    new = copy.deepcopy(old)
    new["spec"]["initContainers"][0]["resources"] = {"limits": {"cpu": "2"}}
    new["spec"]["initContainers"][0]["resizePolicy"] = [
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"}
    ]
    assert restarts(new, old) == [Restart("proxy", ("cpu",))]


# ---- judged by the group budget -----------------------------------------------------------------


@pytest.mark.parametrize("policy", [None, "RecreateGroupOnPodRestart", "RecreateGroupAfterStart"])
def test_a_restarting_resize_under_a_recreating_policy_is_a_group_disruption(policy: str | None) -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), restart_policy(policy))
    ledger = MemoryLedger()
    eng = engine(objects, ledger)
    first = respond(eng, resize("llm-xl-0-2", objects, memory="1600Gi"))
    assert first["allowed"] is True
    (warning,) = first["warnings"]
    shown = policy or "RecreateGroupOnPodRestart"
    assert warning.startswith("[group-resize] resizing pod serve/llm-xl-0-2 restarts container shard")
    assert f"under restartPolicy {shown} the LWS controller then recreates the whole group 0" in warning
    assert [(e.group, e.pod) for e in ledger.entries(("serve", "llm-xl"))] == [("0", "llm-xl-0-2")]
    # a second group over budget 1: 429, naming the group already down
    second = respond(eng, resize("llm-xl-1-1", objects, memory="1600Gi"))
    assert second["allowed"] is False and second["status"]["code"] == 429
    assert second["status"]["reason"] == "TooManyRequests"
    message = second["status"]["message"]
    assert "resizing pod serve/llm-xl-1-1" in message and "would break group 1" in message
    assert "group 0 (resize of llm-xl-0-2 recorded" in message
    # the same group again: already counted, allowed
    assert respond(eng, resize("llm-xl-0-3", objects, memory="1600Gi"))["allowed"] is True


def test_a_resize_without_restart_is_allowed_under_every_policy() -> None:
    for policy in (None, "RecreateGroupAfterStart", "None"):
        objects = fleet(with_resize_policy(RESTARTS_MEMORY), restart_policy(policy))
        ledger = MemoryLedger()
        answer = respond(engine(objects, ledger), resize("llm-xl-0-2", objects, cpu="100"))
        assert answer == {"uid": answer["uid"], "allowed": True}, policy
        assert ledger.entries(("serve", "llm-xl")) == ()


def test_a_restarting_resize_under_restart_policy_none_is_allowed_with_a_warning() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), restart_policy("None"))
    ledger = MemoryLedger()
    eng = engine(objects, ledger)
    for pod in ("llm-xl-0-2", "llm-xl-1-1"):
        answer = respond(eng, resize(pod, objects, memory="1600Gi"))
        assert answer["allowed"] is True
        assert "under restartPolicy None the LWS controller does not recreate" in answer["warnings"][0]
    assert ledger.entries(("serve", "llm-xl")) == ()


def test_resizes_and_evictions_share_one_budget() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY))
    eng = engine(objects)
    assert respond(eng, eviction("llm-xl-0-3"))["allowed"] is True
    assert respond(eng, resize("llm-xl-1-1", objects, memory="1600Gi"))["status"]["code"] == 429


def test_a_resize_while_another_group_is_doomed_by_a_taint_is_429_naming_it() -> None:
    def taint(objects: Objects) -> None:
        find(objects, "Node", "gpu-node-06")["spec"] = {
            "taints": [{"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"}]
        }

    objects = fleet(with_resize_policy(RESTARTS_MEMORY), taint)
    denied = respond(engine(objects), resize("llm-xl-0-2", objects, memory="1600Gi"))
    assert denied["status"]["code"] == 429
    assert (
        "NoExecute taint example.com/maintenance=true:NoExecute on node gpu-node-06"
        in denied["status"]["message"]
    )


def test_a_dry_run_is_judged_the_same_and_records_nothing() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY))
    ledger = MemoryLedger()
    answer = respond(engine(objects, ledger), resize("llm-xl-0-2", objects, dry_run=True, memory="1600Gi"))
    assert answer["allowed"] is True and ledger.entries(("serve", "llm-xl")) == ()


def test_vpa_is_not_exempt_and_the_budget_parameter_follows_group_eviction() -> None:
    config = build_config({"policies": {"group-eviction": {"maxDisruptedGroups": 2}}})
    assert not config.exemptions.exempts({"username": VPA}, "serve")
    assert config.settings("group-resize").params["maxDisruptedGroups"] == 2


def test_stale_view_answers_429() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY))
    eng = engine(objects)
    eng.view.mark_broken(PODS, now=0.0)
    assert respond(eng, resize("llm-xl-0-2", objects, memory="1600Gi"))["status"]["code"] == 429


# ---- `guardhook review` and a real TLS server ------------------------------------------------------


def test_review_judges_a_resize_offline(tmp_path: Path) -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), lambda o: o.remove(find(o, "Pod", "llm-xl-1-1")))
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(objects))
    review = tmp_path / "resize.json"
    review_body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": resize("llm-xl-0-2", objects, memory="1600Gi"),
    }
    review.write_text(json.dumps(review_body))
    printed = subprocess.run(
        [sys.executable, "-m", "guardhook", "review", str(review), "--cluster-state", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(tmp_path),
    )
    response = json.loads(printed.stdout)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 429, printed
    assert "group 1 (3 of 4 pods exist)" in response["status"]["message"]


def test_real_server_warns_and_records_a_restarting_resize(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY))
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(objects))
    server = fresh_server("--cluster-state", str(state))
    answers = []
    for pod in ("llm-xl-0-2", "llm-xl-1-1"):
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        review["request"] = resize(pod, objects, memory="1600Gi")
        posted = server.post("/validate", review)
        assert posted.status_code == 200
        answers.append(posted.json()["response"])
    assert answers[0]["allowed"] is True and answers[0]["warnings"][0].startswith("[group-resize]")
    assert answers[1]["allowed"] is False and answers[1]["status"]["code"] == 429
