"""Every captured kube-apiserver review answered as ../shared/fixtures/expected.json says, by the
real server over TLS (the product contract of design.md with the default configuration)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from conftest import REVIEWS, Server, expected_answers

EXPECTED = expected_answers()
LISTED = {entry["review"] for entry in EXPECTED["single"]}


def mismatches(entry: dict[str, Any], response: dict[str, Any]) -> list[str]:
    """What differs between an expected.json entry and a response (empty when it matches)."""
    problems = []
    if response.get("allowed") is not entry["allowed"]:
        problems.append(f"allowed={response.get('allowed')}")
    status = response.get("status") or {}
    if "code" in entry and status.get("code") != entry["code"]:
        problems.append(f"code={status.get('code')}")
    message = status.get("message") or ""
    if "policy" in entry and not message.startswith(f"[{entry['policy']}]"):
        problems.append(f"message={message!r}")
    problems += [f"message lacks {s!r}" for s in entry.get("message_contains", []) if s not in message]
    patch = json.loads(base64.b64decode(response["patch"])) if response.get("patch") else []
    if entry.get("patch") == "none" and patch:
        problems.append(f"unexpected patch {patch}")
    for path, value in (entry.get("patch_adds") or {}).items():
        if not any(
            op.get("op") == "add" and op.get("path") == path and op.get("value") == value for op in patch
        ):
            problems.append(f"no patch adding {path}={value!r}")
    if "warnings_policy" in entry:
        prefix = f"[{entry['warnings_policy']}]"
        if not any(w.startswith(prefix) for w in response.get("warnings") or []):
            problems.append(f"warnings={response.get('warnings')}")
    return problems


@pytest.mark.parametrize("entry", EXPECTED["single"], ids=lambda e: e["review"])
def test_single_review(entry: dict[str, Any], fresh_server_for_evictions: Server) -> None:
    response = fresh_server_for_evictions.review(entry["path"], entry["review"])
    assert mismatches(entry, response) == []


@pytest.mark.parametrize(
    "review", sorted(p.name for p in REVIEWS.glob("*.mutating.json") if p.name not in LISTED)
)
def test_unlisted_mutating_reviews_are_allowed_without_a_patch(review: str, server: Server) -> None:
    response = server.review("/mutate", review)
    assert response["allowed"] is True
    assert "patch" not in response


@pytest.mark.parametrize("sequence", EXPECTED["sequence"], ids=lambda s: "+".join(e["review"][:3] for e in s))
def test_sequence_on_one_fresh_server(sequence: list[dict[str, Any]], fresh_server: Any) -> None:
    running = fresh_server()
    for step, entry in enumerate(sequence):
        response = running.review(entry["path"], entry["review"])
        assert mismatches(entry, response) == [], f"step {step}: {entry['review']}"


@pytest.fixture
def fresh_server_for_evictions(request: pytest.FixtureRequest, server: Server, fresh_server: Any) -> Server:
    """Evictions are judged with no earlier eviction recorded: each gets a freshly started server."""
    entry = request.node.callspec.params["entry"]
    if "eviction" in entry["review"]:
        return fresh_server()
    return server
