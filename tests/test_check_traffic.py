"""`guardhook check` and `guardhook audit` on what #23 adds: InferencePools (both versions), data-parallel
LWSs (`guardhook.io/serving-pods`), selectors that select nothing, scalers on a DisaggregatedSet's LWS."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pool_helpers import POOL_VERSIONS, pool_spec

from guardhook.cluster.view.manifests import load_paths
from guardhook.commands.main import main

from conftest import FIXTURES, REPO
from fake_apiserver import running_fake

LWS = yaml.safe_load(
    (REPO / "tests" / "manifests" / "service" / "lws.yaml").read_text()
)  # serve/llm, app: llm
P = "leaderworkerset.sigs.k8s.io/"


def pool(version: str, selector: dict[str, str], name: str = "llm-pool") -> dict[str, Any]:
    group, api_version = POOL_VERSIONS[version]
    return {
        "apiVersion": f"{group}/{api_version}",
        "kind": "InferencePool",
        "metadata": {"name": name, "namespace": "serve"},
        "spec": pool_spec(version, selector),
    }


def service(selector: dict[str, str], name: str = "llm-api") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "serve"},
        "spec": {"selector": selector, "ports": [{"port": 8000}]},
    }


def lws(annotations: dict[str, str] | None = None, leader_template: bool = True) -> dict[str, Any]:
    obj = copy.deepcopy(LWS)
    if annotations:
        obj["metadata"]["annotations"] = annotations
    if not leader_template:
        del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    return obj


def check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: dict[str, Any]
) -> tuple[int, list[str], str]:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    code = main(["check", str(path)])
    captured = capsys.readouterr()
    prefix = f"{path}: "
    return code, [line.removeprefix(prefix) for line in captured.out.splitlines()], captured.err


def ours(lines: list[str], policy: str = "leader-service") -> list[str]:
    return [line for line in lines if f"[{policy}]" in line]


@pytest.mark.parametrize("version", ["v1", "v1alpha2"])
def test_check_mutates_a_pool_that_reaches_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    code, lines, _ = check(tmp_path, capsys, lws(), pool(version, {"app": "llm"}))
    assert code == 0
    [line] = ours(lines)
    assert line.startswith("InferencePool serve/llm-pool: Mutate [leader-service]")
    # the same pool already narrowed is clean
    code, lines, _ = check(tmp_path, capsys, lws(), pool(version, {"app": "llm", P + "worker-index": "0"}))
    assert (code, ours(lines)) == (0, [])


def test_check_notes_a_pool_without_its_lws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check(tmp_path, capsys, pool("v1", {"app": "llm"}))
    assert code == 0 and "InferencePool serve/llm-pool: not judged by [leader-service]" in err


def test_check_says_a_selector_selects_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = check(tmp_path, capsys, lws(), service({"app": "llm", P + "role": "leader"}))
    assert code == 0
    [line] = ours(lines)
    assert line.startswith("Service serve/llm-api: Advisory [leader-service] selects no pod")
    assert '{app: llm, leaderworkerset.sigs.k8s.io/worker-index: "0"}' in line


@pytest.mark.parametrize("kind", ["Service", "v1", "v1alpha2"])
def test_a_selector_said_to_select_nothing_gets_no_not_judged_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    # leader-service judged it (it selects no pod, with a selector that works): a note saying it
    # could not be judged and asking for the LWS that is already in the input contradicts that
    selector = {P + "role": "leader"}
    obj = service(selector) if kind == "Service" else pool(kind, selector)
    code, lines, err = check(tmp_path, capsys, lws(), obj)
    assert code == 0
    [line] = ours(lines)
    assert "selects no pod" in line
    assert "not judged" not in err


def test_check_leaves_a_data_parallel_lws_in_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = (lws({"guardhook.io/serving-pods": "all"}), service({"app": "llm"}), pool("v1", {"app": "llm"}))
    code, lines, _ = check(tmp_path, capsys, *objects)
    assert (code, ours(lines)) == (0, [])


def test_check_hints_at_the_annotation_without_a_leader_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = check(tmp_path, capsys, lws(leader_template=False), service({"app": "llm"}))
    assert code == 0
    assert [line.split(" [")[0] for line in ours(lines)] == [
        "Service serve/llm-api: Mutate",
        "Service serve/llm-api: Advisory",
    ]
    assert 'guardhook.io/serving-pods: "all"' in ours(lines)[1]


def test_check_warns_about_an_unreadable_serving_pods_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = check(tmp_path, capsys, lws({"guardhook.io/serving-pods": "everyone"}))
    assert code == 0
    assert any(
        "[group-spec]" in line and 'guardhook.io/serving-pods: "everyone" cannot be read' in line
        for line in lines
    )


@pytest.mark.parametrize("kind", ["HorizontalPodAutoscaler", "ScaledObject"])
def test_check_denies_a_scaler_on_a_disaggregated_sets_lws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    child = lws()
    child["metadata"]["name"] = "myds-0-6ad7c921-prefill"
    child["metadata"]["labels"] = {
        "disaggregatedset.x-k8s.io/name": "myds",
        "disaggregatedset.x-k8s.io/role": "prefill",
    }
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "disaggregatedset.x-k8s.io/v1",
            "kind": "DisaggregatedSet",
            "name": "myds",
            "uid": "u",
            "controller": True,
        }
    ]
    ref = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": "myds-0-6ad7c921-prefill",
    }
    scaler = {
        "apiVersion": "autoscaling/v2" if kind == "HorizontalPodAutoscaler" else "keda.sh/v1alpha1",
        "kind": kind,
        "metadata": {"name": "prefill-scaler", "namespace": "serve"},
        "spec": {"scaleTargetRef": ref, "maxReplicas": 8}
        if kind == "HorizontalPodAutoscaler"
        else {"scaleTargetRef": ref, "triggers": [{"type": "cpu", "metadata": {"value": "60"}}]},
    }
    code, lines, _ = check(tmp_path, capsys, child, scaler)
    assert code == 1
    [line] = ours(lines, "pod-counted-scaler")
    assert line.startswith(f"{kind} serve/prefill-scaler: Deny [pod-counted-scaler]")
    assert "kind: DisaggregatedSetRoleScaler, name: myds-prefill" in line
    # the same scaler on a plain LWS is allowed
    plain = copy.deepcopy(scaler)
    plain["spec"]["scaleTargetRef"]["name"] = "llm"
    code, lines, _ = check(tmp_path, capsys, lws(), plain)
    assert (code, ours(lines, "pod-counted-scaler")) == (0, [])


def fleet_with_pools() -> list[dict[str, Any]]:
    objects = [copy.deepcopy(m.obj) for m in load_paths([FIXTURES / "fleet"])]
    return [
        *objects,
        pool("v1", {"app": "llm-xl"}, "xl-pool"),
        pool("v1alpha2", {"app": "llm-xl"}, "xl-old-pool"),
    ]


def test_audit_judges_pools_of_a_cluster_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": fleet_with_pools()}))
    assert main(["audit", "--cluster-state", str(state), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {
        (v["kind"], v["name"], v["apiVersion"])
        for v in document["violations"]
        if v["policy"] == "leader-service"
    } == {
        ("InferencePool", "xl-pool", "inference.networking.k8s.io/v1"),
        ("InferencePool", "xl-old-pool", "inference.networking.x-k8s.io/v1alpha2"),
    }


def test_live_audit_lists_served_pools_and_notes_the_unserved_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [o for o in fleet_with_pools() if o["apiVersion"] != "inference.networking.x-k8s.io/v1alpha2"]
    with running_fake(unserved={"scaledobjects", "inference.networking.x-k8s.io/v1alpha2"}) as fake:
        fake.load(objects)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        assert main(["audit", "--kubeconfig", str(kubeconfig), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [v["name"] for v in document["violations"] if v["policy"] == "leader-service"] == ["xl-pool"]
    assert any(
        "inference.networking.x-k8s.io/v1alpha2" in note and "not served" in note
        for note in document["notes"]
    )
