"""Each enforcement action of each registered policy gives the response shape of design.md §3,
table-driven over the captured reviews and expected.json, generic over REGISTRY: a policy is
tested with every fixture that violates it, with that one action and every other policy off."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.config import build_config
from guardhook.policies import REGISTRY
from guardhook.policies.base import ALLOW, Judgement, Policy, PolicyContext, Violation, target
from guardhook.wire import AdmissionResponse

from conftest import Server, expected_answers, load_review

VALIDATING = ("Deny", "Warn", "Audit")
EXPECTED = expected_answers()


def violating_entries(policy: Policy) -> list[dict[str, Any]]:
    """Single (independent) expected entries in which `policy` is violated."""
    found = []
    for entry in EXPECTED["single"]:
        named = entry.get("policy") or entry.get("warnings_policy")
        if named == policy.id or (entry.get("patch_adds") and policy.can_mutate and _sees(policy, entry)):
            found.append(entry)
    return found


def _sees(policy: Policy, entry: dict[str, Any]) -> bool:
    """Whether `policy` is dispatched the entry's review at all (a patch belongs to a policy that
    sees the request: leader-service's Service patches are not group-readiness's)."""
    request = load_review(entry["review"])["request"]
    return any(t.matches(request) for t in policy.targets)


def violating_sequences(policy: Policy) -> list[list[dict[str, Any]]]:
    """Expected sequences (sent in order to one fresh server) in which `policy` is violated."""
    return [seq for seq in EXPECTED["sequence"] if any(e.get("policy") == policy.id for e in seq)]


def only(policy_id: str, actions: list[str]) -> dict[str, Any]:
    """A config document with `policy_id` at `actions` and every other policy off."""
    return {"policies": {p.id: {"actions": actions if p.id == policy_id else []} for p in REGISTRY}}


def assert_shape(response: AdmissionResponse, policy_id: str, action: str, entry: dict[str, Any]) -> None:
    prefix = f"[{policy_id}]"
    mine = [w for w in response.get("warnings", []) if w.startswith(prefix)]
    if action == "Deny":
        assert response["allowed"] is False
        assert response["status"]["code"] == entry.get("code", 403)
        assert response["status"]["message"].startswith(prefix)
        for text in entry.get("message_contains", []):
            assert text in response["status"]["message"]
        assert policy_id not in response.get("auditAnnotations", {})
    elif action == "Warn":
        assert response["allowed"] is True
        assert mine, response
        assert policy_id not in response.get("auditAnnotations", {})
    elif action == "Audit":
        assert response["allowed"] is True
        annotation = response["auditAnnotations"][policy_id]
        assert annotation
        assert all(annotation not in w for w in mine)  # audited, not warned
    else:  # Mutate
        assert response["allowed"] is True
        ops = json.loads(base64.b64decode(response["patch"]))
        added = {op["path"]: op.get("value") for op in ops if op["op"] == "add"}
        assert entry["patch_adds"].items() <= added.items()


def cases() -> Iterator[Any]:
    for policy in REGISTRY:
        actions = [*VALIDATING, *(["Mutate"] if policy.can_mutate else [])]
        for action in actions:
            yield pytest.param(policy, action, id=f"{policy.id}-{action}")


@pytest.mark.parametrize(("policy", "action"), list(cases()))
def test_each_action_of_each_policy_has_its_response_shape(policy: Policy, action: str) -> None:
    entries = violating_entries(policy)
    if action == "Mutate":
        entries = [e for e in entries if e.get("patch_adds")]
    if not entries:
        if violating_sequences(policy):
            pytest.skip(f"{policy.id} is violated only in a sequence: see test_sequences_on_the_real_server")
        pytest.skip(f"no captured review violates {policy.id}")
    engine = Engine(embedded_fleet_view(), build_config(only(policy.id, [action])), record=False)
    endpoint = "mutate" if action == "Mutate" else "validate"
    for entry in entries:
        response = engine.judge(load_review(entry["review"])["request"], endpoint).response
        assert_shape(response, policy.id, action, entry)


def sequence_cases() -> Iterator[Any]:
    for policy in REGISTRY:
        if violating_sequences(policy):
            for action in VALIDATING:
                yield pytest.param(policy, action, id=f"{policy.id}-{action}")


@pytest.mark.parametrize(("policy", "action"), [*sequence_cases()] or [pytest.param(None, None, id="none")])
def test_sequences_on_the_real_server(
    policy: Policy | None, action: str | None, fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    if policy is None or action is None:
        pytest.skip("no registered policy is violated only in a sequence of captured reviews")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(only(policy.id, [action])))
    server = fresh_server("--config", str(config))
    for sequence in violating_sequences(policy):
        for entry in sequence:
            response = server.review(entry["path"], entry["review"])
            if entry.get("policy") == policy.id:
                assert_shape(response, policy.id, action, entry)


class Fires(Policy):
    """A test double that violates every pods DELETE with its own message."""

    targets = (target("", "pods", "", "DELETE"),)
    default_actions = ("Deny",)

    def __init__(self, policy_id: str) -> None:
        self.id = policy_id  # type: ignore[misc]

    def judge(self, ctx: PolicyContext) -> Judgement:
        return Judgement(violation=Violation(f"{self.id} says no"), advisories=(f"{self.id} advises",))


class Quiet(Fires):
    def judge(self, ctx: PolicyContext) -> Judgement:
        return ALLOW


def combined(actions: dict[str, list[str]], *policies: Policy) -> AdmissionResponse:
    config = build_config({"policies": {pid: {"actions": a} for pid, a in actions.items()}}, policies)
    request = load_review("s01-worker-delete.validating")["request"]
    return Engine(embedded_fleet_view(), config, policies=policies, record=False).judge(request).response


def test_several_policies_combine_into_one_response() -> None:
    a, b, c = Fires("a"), Fires("b"), Quiet("c")
    both_deny = combined({"a": ["Deny"], "b": ["Deny"], "c": ["Deny"]}, a, b, c)
    assert both_deny["allowed"] is False
    assert both_deny["status"]["message"] == "[a] a says no; [b] b says no"
    mixed = combined({"a": ["Warn", "Audit"], "b": ["Deny"], "c": ["Warn"]}, a, b, c)
    assert mixed["allowed"] is False and mixed["status"]["message"] == "[b] b says no"
    assert mixed["warnings"] == ["[a] a advises", "[a] a says no", "[b] b advises"]
    assert mixed["auditAnnotations"] == {"a": "a says no"}
    off = combined({"a": [], "b": ["Audit"], "c": []}, a, b, c)
    assert off["allowed"] is True and off["auditAnnotations"] == {"b": "b says no"}
    assert off["warnings"] == ["[b] b advises"]
