"""Policy group-spec: each lint rule fires on its own, a clean spec passes, s35 is warned."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.policies.group_spec import lint, scaled

from conftest import load_review

CLEAN = yaml.safe_load((Path(__file__).parent / "manifests" / "per-group-pdb" / "lws.yaml").read_text())


def with_changes(**changes: Any) -> LeaderWorkerSet:
    obj = copy.deepcopy(CLEAN)
    spec = obj["spec"]
    leader = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    for key, value in changes.items():
        if key == "restartPolicy":
            spec["leaderWorkerTemplate"]["restartPolicy"] = value
        elif key == "rollout":
            spec["rolloutStrategy"] = value
        elif key == "replicas":
            spec["replicas"] = value
        elif key == "leader":
            leader.clear()
            leader.update(value)
    return LeaderWorkerSet(obj)


def test_clean_spec_has_no_findings() -> None:
    assert lint(LeaderWorkerSet(CLEAN), 300) == []


def test_restart_policy_none() -> None:
    [finding] = lint(with_changes(restartPolicy="None"), 300)
    assert "restartPolicy None" in finding


@pytest.mark.parametrize(
    ("rollout", "replicas", "flagged"),
    [
        (None, 3, True),  # LWS defaults: maxUnavailable 1, maxSurge 0
        ({"rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": 0}}, 3, True),
        ({"rollingUpdateConfiguration": {"maxUnavailable": "50%"}}, 4, True),
        ({"rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 0}}, 3, True),
        ({"rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 1}}, 3, False),
        ({"rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": "25%"}}, 3, False),
        (None, 1, False),  # one replica: nothing else would be serving anyway
    ],
)
def test_rollout_that_takes_serving_groups_down(rollout: Any, replicas: int, flagged: bool) -> None:
    findings = lint(with_changes(rollout=rollout, replicas=replicas), 300)
    assert any("rollout takes" in f for f in findings) is flagged


def test_percentages_round_like_the_lws_controller() -> None:
    assert scaled("50%", 3, False, 1) == 1
    assert scaled("10%", 3, True, 0) == 1
    assert scaled(None, 3, True, 0) == 0
    assert scaled("2", 3, True, 0) == 2


HTTP_READY = {"httpGet": {"path": "/ready", "port": 8000}, "periodSeconds": 5}
LONG_STARTUP = {"httpGet": {"path": "/ready", "port": 8000}, "failureThreshold": 120, "periodSeconds": 10}


@pytest.mark.parametrize(
    ("leader", "expected"),
    [
        ({"name": "s", "startupProbe": LONG_STARTUP}, "leader has no readinessProbe"),
        (
            {"name": "s", "readinessProbe": {"tcpSocket": {"port": 8000}}, "startupProbe": LONG_STARTUP},
            "only checks that a TCP port accepts connections",
        ),
        # A failing readiness probe never restarts a container: a short one with no startupProbe
        # just keeps the loading leader out of Service endpoints, which is right.
        ({"name": "s", "readinessProbe": HTTP_READY}, None),
        ({"name": "s", "readinessProbe": {**HTTP_READY, "failureThreshold": 1, "periodSeconds": 1}}, None),
        (
            {
                "name": "s",
                "readinessProbe": HTTP_READY,
                "startupProbe": LONG_STARTUP,
                "livenessProbe": HTTP_READY,
            },
            None,  # the startupProbe holds the short liveness probe off while the weights load
        ),
        (
            {
                "name": "s",
                "readinessProbe": HTTP_READY,
                "livenessProbe": {**HTTP_READY, "initialDelaySeconds": 600},
            },
            None,  # the liveness probe itself waits out the load
        ),
        (
            {"name": "s", "readinessProbe": HTTP_READY, "livenessProbe": HTTP_READY},
            "leader container s: its livenessProbe, with no startupProbe to hold it off, fails after 15s",
        ),
        (
            {
                "name": "s",
                "readinessProbe": HTTP_READY,
                "startupProbe": {**LONG_STARTUP, "failureThreshold": 6},
            },
            "leader container s: its startupProbe fails after 60s, then the kubelet restarts the container "
            "and its whole group",
        ),
    ],
)
def test_leader_probes(leader: dict[str, Any], expected: str | None) -> None:
    findings = lint(with_changes(leader=leader), 300)
    if expected is None:
        assert findings == []
    else:
        assert len(findings) == 1 and expected in findings[0], findings


def test_liveness_without_startup_probe_on_a_worker() -> None:
    obj = copy.deepcopy(CLEAN)
    worker = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    worker["livenessProbe"] = {"httpGet": {"path": "/live", "port": 8000}}
    [finding] = lint(LeaderWorkerSet(obj), 300)
    assert finding.startswith("worker container shard: its livenessProbe, with no startupProbe")
    assert "fails after 30s" in finding and "restarts the container and its whole group" in finding
    assert lint(LeaderWorkerSet(obj), 30) == []  # within weightLoadSeconds
    obj["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "None"
    restarted = [f for f in lint(LeaderWorkerSet(obj), 300) if "livenessProbe" in f]
    assert restarted and "restarts the container, before" in restarted[0]  # the pod alone


def test_restart_policy_default_is_the_deprecated_name_of_none() -> None:
    [finding] = lint(with_changes(restartPolicy="Default"), 300)
    assert "restartPolicy Default restarts a failed pod alone" in finding


def test_surge_advice_states_the_cost_of_a_spare_group() -> None:
    [finding] = lint(with_changes(rollout=None), 300)
    # size 4, 8 GPUs per pod (leader and workers): one spare group is 4 pods and 32 GPUs.
    assert "set maxSurge 1 and maxUnavailable 0" in finding
    assert finding.endswith("needs room for one spare group during a rollout (4 pods, 32 nvidia.com/gpu)")


@pytest.mark.timeout(60)
def test_surge_cost_of_the_largest_size_the_api_server_accepts() -> None:
    # size is an int32: an LWS of 2^31 - 1 pods per group is a valid request, and the spare group's
    # cost must be computed, not counted pod by pod (that took minutes on the webhook's request path).
    obj = copy.deepcopy(CLEAN)
    obj["spec"]["rolloutStrategy"] = None
    obj["spec"]["leaderWorkerTemplate"]["size"] = 2**31 - 1
    [finding] = lint(LeaderWorkerSet(obj), 300)
    assert finding.endswith(f"({2**31 - 1} pods, {8 * (2**31 - 1)} nvidia.com/gpu)")


def test_findings_are_kept_apart_for_one_per_line_reports() -> None:
    obj = copy.deepcopy(CLEAN)
    obj["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "None"
    del obj["spec"]["rolloutStrategy"]
    request = load_review("s35-lws-restart-none.validating")["request"]
    verdict = Engine(embedded_fleet_view(), record=False).judge({**request, "object": obj})
    [decision] = [d for d in verdict.decisions if d.policy == "group-spec"]
    assert len(decision.findings) == 2 and not any("LeaderWorkerSet" in f for f in decision.findings)
    assert decision.message == "LeaderWorkerSet llm: " + "; ".join(decision.findings)


def test_s35_is_allowed_with_group_spec_warnings() -> None:
    request = load_review("s35-lws-restart-none.validating")["request"]
    response = Engine(embedded_fleet_view(), record=False).judge(request).response
    assert response["allowed"] is True
    [warning] = [w for w in response["warnings"] if w.startswith("[group-spec]")]
    assert "restartPolicy None" in warning and "no readinessProbe" in warning


@pytest.mark.parametrize(
    ("annotation", "value", "used"),
    [
        ("guardhook.io/max-disrupted-groups", "two", "the configured maxDisruptedGroups (default 1)"),
        ("guardhook.io/max-disrupted-groups", "-1", "the configured maxDisruptedGroups (default 1)"),
        ("guardhook.io/spare-groups", "-3", "the configured spareGroups (default 0)"),
        ("guardhook.io/serving-pods", "All", '"leaders"'),
    ],
)
def test_an_unreadable_annotation_is_warned_at_admission_naming_the_value_used(
    annotation: str, value: str, used: str
) -> None:
    obj = copy.deepcopy(CLEAN)
    obj["metadata"].setdefault("annotations", {})[annotation] = value
    request = load_review("s35-lws-restart-none.validating")["request"]
    verdict = Engine(embedded_fleet_view(), record=False).judge({**request, "object": obj})
    (decision,) = [d for d in verdict.decisions if d.policy == "group-spec"]
    assert decision.action == "Warn"
    assert decision.findings == (
        f'annotation {annotation}: "{value}" cannot be read; {used} is used instead',
    )
    assert any(w.startswith("[group-spec]") for w in verdict.response.get("warnings", []))


def test_readable_annotations_are_not_findings() -> None:
    obj = copy.deepcopy(CLEAN)
    obj["metadata"]["annotations"] = {
        "guardhook.io/max-disrupted-groups": "2",
        "guardhook.io/spare-groups": "0",
        "guardhook.io/serving-pods": "all",
    }
    assert lint(LeaderWorkerSet(obj), 300) == []


def test_the_built_in_defaults_named_are_the_policies_own() -> None:
    from guardhook.cluster import coverage
    from guardhook.policies.group_capacity import GroupCapacity
    from guardhook.policies.group_eviction import GroupEviction

    assert GroupEviction.params["maxDisruptedGroups"] == coverage.BUILTIN_BUDGET
    assert GroupCapacity.params["spareGroups"] == coverage.BUILTIN_SPARE_GROUPS


def test_a_hash_lws_replacing_groups_immediately_is_warned_that_a_recreate_needs_a_second_groups_room() -> (
    None
):
    obj = copy.deepcopy(CLEAN)
    obj["spec"]["groupIdentity"] = "Hash"
    obj["spec"]["groupReplacementPolicy"] = "Immediate"
    request = load_review("s35-lws-restart-none.validating")["request"]
    response = Engine(embedded_fleet_view(), record=False).judge({**request, "object": obj}).response
    [warning] = [w for w in response["warnings"] if w.startswith("[group-spec]")]
    assert "groupReplacementPolicy Immediate" in warning and "room for a second group" in warning
    assert "leaderworkerset.sigs.k8s.io/group-replacement scheduling gate" in warning
    for policy in ("PostTermination", None):
        quiet = copy.deepcopy(obj)
        if policy is None:
            del quiet["spec"]["groupReplacementPolicy"]
        else:
            quiet["spec"]["groupReplacementPolicy"] = policy
        assert lint(LeaderWorkerSet(quiet), 300) == []
    ordinal = copy.deepcopy(obj)
    del ordinal["spec"]["groupIdentity"]  # Immediate means nothing without Hash identity
    assert lint(LeaderWorkerSet(ordinal), 300) == []
