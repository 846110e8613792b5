"""The other disruption actors through a real `guardhook serve` over TLS: a marked worker's
DELETE, Kueue's controller, and a delete-based drain of cordoned nodes (recorded between requests)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from guardhook.cluster.view.static import embedded_fleet_objects

from conftest import Server, load_review
from helpers import find


def review_with(mutate: Callable[[dict[str, Any]], None], name: str = "s01-worker-delete.validating") -> dict:
    review = load_review(name)
    mutate(review["request"])
    return review


def cordoned_fleet(tmp_path: Path, *nodes: str) -> Path:
    objects = copy.deepcopy(embedded_fleet_objects())
    for node in nodes:
        find(objects, "Node", node)["spec"]["unschedulable"] = True
    path = tmp_path / "cordoned.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def test_marked_worker_and_kueue_deletes_are_allowed_and_an_admin_delete_is_not(server: Server) -> None:
    denied = server.review("/validate", "s01-worker-delete.validating")
    assert denied["allowed"] is False and denied["status"]["code"] == 403
    assert "kubectl delete pod -n serve llm-xl-0 --cascade=foreground" in denied["status"]["message"]

    def preempted(request: dict[str, Any]) -> None:
        request["userInfo"] = {"username": "system:kube-scheduler", "groups": ["system:authenticated"]}
        request["oldObject"]["status"]["conditions"].append(
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        )

    answer = server.post("/validate", review_with(preempted)).json()["response"]
    assert answer["allowed"] is True
    assert "PreemptionByScheduler" in answer["auditAnnotations"]["worker-delete-disruption-target"]

    def kueue(request: dict[str, Any]) -> None:
        request["userInfo"] = {"username": "system:serviceaccount:kueue-system:kueue-controller-manager"}

    assert server.post("/validate", review_with(kueue)).json()["response"] == {
        "uid": load_review("s01-worker-delete.validating")["request"]["uid"],
        "allowed": True,
    }


def test_delete_based_drain_on_a_real_server(tmp_path: Path, fresh_server: Callable[..., Server]) -> None:
    # s01 deletes llm-xl-0-2 (gpu-node-02); s05 is a dry-run delete of llm-xl-1-2 (gpu-node-06).
    server = fresh_server("--cluster-state", str(cordoned_fleet(tmp_path, "gpu-node-02", "gpu-node-06")))
    dry = server.review("/validate", "s05-worker-delete-dryrun.validating")
    assert dry["allowed"] is True and "cordoned node gpu-node-06" in dry["warnings"][0]
    first = server.review("/validate", "s01-worker-delete.validating")
    assert first["allowed"] is True and first["warnings"][0].startswith("[worker-delete]")
    again = server.review("/validate", "s05-worker-delete-dryrun.validating")  # the dry run recorded nothing,
    assert again["allowed"] is False and again["status"]["code"] == 429  # but s01 did
    assert "group 0 (delete of llm-xl-0-2 recorded" in again["status"]["message"]
