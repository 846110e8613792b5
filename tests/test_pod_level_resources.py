"""Pod-level resources (`spec.resources`, KEP-2837, GA in 1.37) in what the scheduler counts, for
templates and for bound and pending pods (issue 37 item 2): the component-helpers `PodRequests`
rule with overhead and init / sidecar containers, group-capacity's answer and model line, and
group-spec's finding. Each case has its control, one change away."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_capacity_models import judge, message, model_of

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.model import PodRecord
from guardhook.cluster.podwire import decode_pod_page, pod_record
from guardhook.cluster.resources import pod_requests
from guardhook.cluster.view.static import view_from_objects
from guardhook.commands.check import check
from guardhook.config import default_config
from guardhook.policies.group_spec import lint

from gpu_cluster import lws_create, node, pod

GI = 1 << 30


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
            {
                "name": "b",
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"nvidia.com/gpu": "1"}},
            },
        ],
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({}, {"cpu": 3000, "memory": 6 * GI, "nvidia.com/gpu": 1}, id="containers-only"),
        pytest.param(
            {"resources": {"requests": {"cpu": "8", "memory": "64Gi"}}},
            {"cpu": 8000, "memory": 64 * GI, "nvidia.com/gpu": 1},
            id="pod-level-requests-replace-the-sum",
        ),
        pytest.param(
            {"resources": {"limits": {"memory": "32Gi"}}},
            {"cpu": 3000, "memory": 32 * GI, "nvidia.com/gpu": 1},
            id="a-pod-level-limit-stands-as-the-request",
        ),
        pytest.param(
            {"resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "4"}}},
            {"cpu": 8000, "memory": 6 * GI, "nvidia.com/gpu": 1},
            id="only-cpu-memory-hugepages-at-pod-level",
        ),
        pytest.param(
            {"resources": {"requests": {"memory": "64Gi"}}, "overhead": {"memory": "1Gi", "cpu": "250m"}},
            {"cpu": 3250, "memory": 65 * GI, "nvidia.com/gpu": 1},
            id="overhead-on-top-of-pod-level",
        ),
        pytest.param(
            {
                "resources": {"requests": {"cpu": "8"}},
                "initContainers": [
                    {
                        "name": "side",
                        "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    },
                    {"name": "init", "resources": {"requests": {"cpu": "16", "memory": "1Gi"}}},
                ],
            },
            {"cpu": 8000, "memory": 7 * GI, "nvidia.com/gpu": 1},
            id="pod-level-cpu-over-init-and-sidecar-memory-from-containers",
        ),
    ],
)
def test_pod_requests_follow_the_resource_helpers(extra: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_requests(_spec(**extra)) == expected


def _pod(spec: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    obj = pod("p", node_name=node_name)
    obj["spec"] = {**spec, **({"nodeName": node_name} if node_name else {})}
    return obj


@pytest.mark.parametrize("node_name", ["", "gpu-0"], ids=["pending", "bound"])
def test_bound_and_pending_pods_read_pod_level_values_on_both_decoding_paths(node_name: str) -> None:
    obj = _pod(_spec(resources={"requests": {"memory": "64Gi"}}), node_name)
    page = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [obj]}).encode()
    typed = pod_record(decode_pod_page(page)["items"][0])
    assert typed == PodRecord.from_object(obj)
    assert typed.requests["memory"] == 64 * GI
    control = PodRecord.from_object(_pod(_spec(), node_name))
    assert control.requests["memory"] == 6 * GI


# ---- group-capacity: a 4 -> 5 scale-up no node has the memory for -----------------------------

NODES = [node(f"n{i}", gpus=16) for i in range(4)]


def _create(
    replicas: int, pod_level: dict[str, str] | None, container_memory: str = "100Gi"
) -> dict[str, Any]:
    """Groups of one pod asking 40 cpu and 8 GPUs (two fit a node) and `container_memory`;
    `pod_level` sets the templates' spec.resources.requests."""
    request = lws_create(replicas=replicas, size=1, gpus=8)
    template = request["object"]["spec"]["leaderWorkerTemplate"]
    for part in ("leaderTemplate", "workerTemplate"):
        spec = template[part]["spec"]
        spec["containers"][0]["resources"]["requests"].update({"cpu": "40", "memory": container_memory})
        if pod_level:
            spec["resources"] = {"requests": dict(pod_level)}
    return request


def test_pod_level_memory_decides_the_fit() -> None:
    # 1500Gi of 2000Gi per pod at pod level: one pod per node, so 5 groups do not fit 4 nodes
    response = judge(NODES, _create(5, {"memory": "1500Gi"}))
    assert response["allowed"] is False, response
    assert "pod-level spec.resources counted (memory 1500Gi; its containers ask memory 100Gi)" in model_of(
        response
    )
    assert "memory 1500Gi" in message(response)


def test_control_the_same_requests_at_container_level_are_denied_alike() -> None:
    response = judge(NODES, _create(5, None, container_memory="1500Gi"))
    assert response["allowed"] is False
    assert "pod-level" not in model_of(response)


def test_control_without_pod_level_resources_five_fit() -> None:
    assert judge(NODES, _create(5, None))["allowed"] is True


def test_control_four_fit_with_pod_level_memory() -> None:
    assert judge(NODES, _create(4, {"memory": "1500Gi"}))["allowed"] is True


def test_bound_pods_with_pod_level_resources_take_their_node_memory() -> None:
    """A bound pod whose pod-level memory fills its node leaves no room there (control: the same
    pod with its containers' 100Gi only)."""
    spec = copy.deepcopy(_create(1, None)["object"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"])
    spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "0"
    spec["containers"][0]["resources"]["limits"] = {}
    filler = _pod({**spec, "resources": {"requests": {"memory": "1900Gi"}}}, "n0")
    assert judge(NODES + [filler], _create(4, {"memory": "1500Gi"}))["allowed"] is False
    assert judge(NODES + [_pod(spec, "n0")], _create(4, {"memory": "1500Gi"}))["allowed"] is True


# ---- group-spec: pod-level requests the API server refuses ------------------------------------


def test_group_spec_reports_pod_level_requests_below_the_containers() -> None:
    lws = LeaderWorkerSet(_create(1, {"memory": "64Gi"})["object"])
    findings = lint(lws, 300)
    assert any(
        "pod-level spec.resources.requests[memory] 64Gi is below its containers' aggregate request 100Gi" in f
        for f in findings
    ), findings
    control = LeaderWorkerSet(_create(1, {"memory": "128Gi"})["object"])
    assert not any("pod-level" in f for f in lint(control, 300))


def test_group_spec_through_the_engine_warns() -> None:
    response = dict(Engine(view_from_objects([]), record=False).judge(_create(1, {"cpu": "10"})).response)
    assert "spec.resources.requests[cpu] 10 is below its containers' aggregate request 40" in " ".join(
        response.get("warnings", [])
    )


def test_check_reports_the_pod_level_values_it_judged(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": NODES}))
    for replicas, denied in ((5, True), (4, False)):
        path = tmp_path / f"lws-{replicas}.yaml"
        path.write_text(yaml.safe_dump(_create(replicas, {"memory": "1500Gi"})["object"]))
        result = check([str(path)], default_config(), cluster_state=[str(cluster)])
        found = [f for f in result.findings if f.policy == "group-capacity"]
        if denied:
            (finding,) = found
            assert "pod-level spec.resources counted (memory 1500Gi; its containers ask memory 100Gi)" in (
                finding.message
            )
        else:
            assert [f.outcome for f in found] in ([], ["allowed"])  # control: four fit


# ---- a bound pod mid pod-level resize (KEP-5419): the larger of spec and status ---------------------


def _resizing(status_memory: str, reason: str = "") -> dict[str, Any]:
    """A bound pod whose pod-level memory request was resized down to 32Gi in its spec while the
    kubelet still reports `status_memory` allocated and actuated (and, with `reason`, a
    PodResizePending condition)."""
    obj = _pod(_spec(resources={"requests": {"memory": "32Gi"}}), "gpu-0")
    status: dict[str, Any] = {
        "phase": "Running",
        "allocatedResources": {"cpu": "3", "memory": status_memory},
        "resources": {"requests": {"cpu": "3", "memory": status_memory}},
    }
    if reason:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": reason}]
    obj["status"] = status
    return obj


def _both_paths(obj: dict[str, Any]) -> dict[str, int]:
    page = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [obj]}).encode()
    typed = pod_record(decode_pod_page(page)["items"][0])
    assert typed == PodRecord.from_object(obj)
    return typed.requests


def test_a_pod_mid_resize_holds_the_larger_of_spec_and_status() -> None:
    assert _both_paths(_resizing("64Gi"))["memory"] == 64 * GI  # the kubelet has not shrunk it yet
    assert _both_paths(_resizing("16Gi"))["memory"] == 32 * GI  # control: the spec is larger
    # an Infeasible resize leaves the spec out: what the kubelet holds counts
    assert _both_paths(_resizing("16Gi", "Infeasible"))["memory"] == 16 * GI
    assert _both_paths(_resizing("16Gi", "Deferred"))["memory"] == 32 * GI  # control: Deferred keeps it
