"""The captured scaling reviews (s21–s34) against a real `guardhook serve` on the sample fleet,
checked against ../shared/fixtures/expected.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Server, expected_answers

SCALING = ("s21", "s23", "s24", "s25", "s26", "s27", "s29", "s30", "s31", "s32", "s33", "s34")


def _entries() -> list[dict[str, Any]]:
    return [e for e in expected_answers()["single"] if e["review"][:3] in SCALING]


def test_every_scaling_review_is_covered() -> None:
    assert sorted(e["review"][:3] for e in _entries()) == sorted(SCALING)


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["review"].split(".")[0])
def test_scaling_review_answer(server: Server, entry: dict[str, Any]) -> None:
    response = server.review(entry["path"], entry["review"])
    assert response["allowed"] is entry["allowed"], response
    if entry["allowed"]:
        assert "status" not in response
        return
    status = response["status"]
    assert status["code"] == entry["code"]
    assert status["message"].startswith(f"[{entry['policy']}]")
    for text in entry.get("message_contains", []):
        assert text in status["message"]


def test_pod_counted_scaler_says_what_to_target(server: Server) -> None:
    message = server.review("/validate", "s21-hpa-worker-sts.validating")["status"]["message"]
    assert "apiVersion: leaderworkerset.x-k8s.io/v1" in message
    assert "kind: LeaderWorkerSet" in message
    assert "name: llm-xl" in message


def test_group_capacity_says_what_is_short(server: Server) -> None:
    message = server.review("/validate", "s34-lws-create-too-big.validating")["status"]["message"]
    assert "1 of 2 new groups" in message
    assert "the second needs 4 pods" in message
    assert "nvidia.com/gpu 8" in message
    assert "room for 0 more" in message


def test_serve_warns_at_start_when_the_lws_controller_is_not_exempt(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "exemptions:\n  users: ['system:serviceaccount:kube-system:generic-garbage-collector']\n"
        "policies:\n  pod-counted-scaler:\n    exemptions: {users: []}\n"
    )
    running = fresh_server("--config", str(config))
    running.logged("no exempt user covers the LWS controller")
    # and with the default exemptions it says nothing of the kind
    default = fresh_server()
    assert "LWS controller" not in default.final_log()
