"""Every registered policy follows its documented failure mode when the cluster view is stale.

Table-driven over REGISTRY, so policies that land later are covered: fail closed (deny, with the
status code the issue names) for worker-delete, group-eviction and group-resize, fail open with a warning for
every other policy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.policies import REGISTRY
from guardhook.policies.base import FORBIDDEN, TOO_MANY_REQUESTS, Policy, stale_judgement

from conftest import REVIEWS

FAIL_CLOSED = {
    "worker-delete": FORBIDDEN,
    "group-eviction": TOO_MANY_REQUESTS,
    "group-resize": TOO_MANY_REQUESTS,
}
IDS = [policy.id for policy in REGISTRY]


def stale_view() -> ClusterView:
    """The sample fleet, synced, with the pod watch broken for twice the bound."""
    view = embedded_fleet_view()
    view.stale_after_seconds = 60
    view.mark_broken(PODS, now=time.monotonic() - 120)
    return view


def captured_requests(policy: Policy) -> list[dict]:
    """The captured validating reviews whose request this policy sees."""
    requests = []
    for path in sorted(Path(REVIEWS).glob("*.validating.json")):
        request = json.loads(path.read_text())["request"]
        if any(t.matches(request) for t in policy.targets):
            requests.append(request)
    return requests


@pytest.mark.parametrize("policy", REGISTRY, ids=IDS)
def test_declared_fail_mode_is_the_documented_one(policy: Policy) -> None:
    assert policy.fail_closed is (policy.id in FAIL_CLOSED)
    if policy.fail_closed:
        assert policy.stale_code == FAIL_CLOSED[policy.id]


@pytest.mark.parametrize("policy", REGISTRY, ids=IDS)
def test_stale_judgement_follows_the_fail_mode(policy: Policy) -> None:
    judgement = stale_judgement(policy, stale_view())
    if policy.fail_closed:
        assert judgement.violation is not None
        assert judgement.violation.code == policy.stale_code
        assert "has not been refreshed for 120s" in judgement.violation.message
    else:
        assert judgement.violation is None
        assert any("not checked" in text for text in judgement.advisories)


@pytest.mark.parametrize("policy", REGISTRY, ids=IDS)
def test_a_stale_view_reaches_the_answer_of_a_captured_request(policy: Policy) -> None:
    requests = captured_requests(policy)
    if not requests:
        pytest.skip(f"no captured review reaches {policy.id}")
    engine = Engine(stale_view(), policies=[policy], record=False)
    # A mutate-only policy (leader-service) runs on /mutate only.
    endpoint = "validate" if set(policy.default_actions) - {"Mutate"} else "mutate"
    if not policy.reads_view:
        fresh = Engine(embedded_fleet_view(), policies=[policy], record=False)
        for request in requests:
            assert engine.judge(request).response == fresh.judge(request).response
        return
    followed = 0
    for request in requests:
        response = engine.judge(request, endpoint).response
        texts = [response.get("status", {}).get("message", ""), *response.get("warnings", [])]
        if not any("cluster view has not been refreshed" in text for text in texts):
            continue  # the policy decided without the view (e.g. a leader delete)
        followed += 1
        if policy.fail_closed:
            assert response["allowed"] is False
            assert response["status"]["code"] == policy.stale_code
        else:
            assert response["allowed"] is True
    assert followed, f"no captured request made {policy.id} consult the stale view"
