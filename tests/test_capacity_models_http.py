"""group-capacity's 2026 models through the real TLS server and `guardhook review`, on reviews
built from the captured LWS scale reviews (s29: 1 new group of llm-xl, s30: 2, s31: replicas 6)
and cluster states written as manifests (DRA objects, gated pods, a Karpenter NodePool)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.policies.group_capacity import MODEL_ANNOTATION

from conftest import Server, clean_env, load_review
from gpu_cluster import dra_cluster, node, node_pool, pod, review_of

LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"


def llm_xl() -> dict[str, Any]:
    """The sample fleet's LWS serve/llm-xl (4 groups of 4 pods × 8 GPUs), none of its pods running."""
    (lws,) = [
        o
        for o in embedded_fleet_objects()
        if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == "llm-xl"
    ]
    return copy.deepcopy(lws)


def state(tmp: Path, objects: list[dict[str, Any]]) -> Path:
    path = tmp / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def post(server: Server, request: dict[str, Any]) -> dict[str, Any]:
    answer = server.post("/validate", review_of(request))
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["response"])


def captured(name: str, user: str = "") -> dict[str, Any]:
    request = copy.deepcopy(load_review(name)["request"])
    if user:
        request["userInfo"] = {"username": user, "groups": ["system:serviceaccounts"]}
    return request


# 4 DRA nodes of 8 GPUs: room for exactly one new group of llm-xl; 12 Kueue-gated pods waiting.
DRA_STATE = [
    llm_xl(),
    *dra_cluster(nodes=4),
    *[pod(f"queued-{i}", gates=("kueue.x-k8s.io/admission",)) for i in range(12)],
]


def test_dra_gated_pods_kueue_and_exemptions_on_a_running_server(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = fresh_server("--cluster-state", str(state(tmp_path, DRA_STATE)))
    one = post(server, captured("s29-lws-scale-up-1.validating"))
    assert one["allowed"] is True and not one.get("warnings")
    model = one["auditAnnotations"][MODEL_ANNOTATION]
    assert "counted DRA devices for nvidia.com/gpu (DeviceClass gpu.nvidia.com)" in model
    assert "12 gated pods ignored" in model
    two = post(server, captured("s30-lws-scale-up-2.validating"))
    assert two["allowed"] is False
    assert "1 of 2 new groups" in two["status"]["message"] and "Model:" in two["status"]["message"]
    # the LWS controller's account (the DisaggregatedSet controller) is judged on LWS scale-ups
    assert post(server, captured("s30-lws-scale-up-2.validating", LWS_CONTROLLER))["allowed"] is False
    # an LWS Kueue admits gets the same shortfall as a warning
    queued = captured("s31-lws-patch-replicas-6.validating")
    queued["object"]["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "gpu-queue"
    answer = post(server, queued)
    assert answer["allowed"] is True
    assert "managed by Kueue (queue gpu-queue)" in answer["warnings"][0]


def test_a_karpenter_pool_that_can_grow_turns_the_denial_into_a_warning(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    labels = {"karpenter.sh/nodepool": "gpu-h100"}
    objects = [
        llm_xl(),
        *[node(f"h100-{i}", gpus=8, labels=labels) for i in range(4)],
        node_pool("gpu-h100", limits={"nodes": "10"}),
    ]
    server = fresh_server("--cluster-state", str(state(tmp_path, objects)))
    answer = post(server, captured("s30-lws-scale-up-2.validating"))
    assert answer["allowed"] is True
    (warning,) = answer["warnings"]
    assert "1 of 2 new groups" in warning
    assert "needs 4 new nodes from NodePool gpu-h100; limits allow 6" in warning


def test_guardhook_review_states_the_model(tmp_path: Path) -> None:
    cluster = state(tmp_path, DRA_STATE)
    review = tmp_path / "s30.json"
    review.write_text(json.dumps(load_review("s30-lws-scale-up-2.validating")))
    args = [sys.executable, "-m", "guardhook", "review", str(review), "--cluster-state", str(cluster)]
    done = subprocess.run(args, capture_output=True, text=True, env=clean_env(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)["response"]
    assert response["allowed"] is False
    assert "counted DRA devices for nvidia.com/gpu" in response["auditAnnotations"][MODEL_ANNOTATION]
    assert "12 gated pods ignored" in response["status"]["message"]
