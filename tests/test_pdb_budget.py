"""Whether a PodDisruptionBudget will refuse an eviction, as the API server's eviction handler
decides it (pods ignored by phase, unhealthy pods, status or spec-computed room)."""

from __future__ import annotations

from eviction_helpers import pod_object

from guardhook.cluster.model import PodRecord
from guardhook.cluster.pdb_budget import matching_pdbs, refusal, room


def group_pods(ready: list[bool]) -> list[PodRecord]:
    return [
        PodRecord.from_object(pod_object("llm", 0, w, len(ready), ready=ok)) for w, ok in enumerate(ready)
    ]


def pdb(spec: dict, status: dict | None = None) -> dict:
    body = {
        "metadata": {"name": "g0", "generation": 2},
        "spec": {"selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/group-index": "0"}}, **spec},
    }
    if status is not None:
        body["status"] = status
    return body


def test_selector_matching_null_and_malformed_selectors_select_nothing() -> None:
    pod = group_pods([True])[0]
    null = {"metadata": {"name": "n"}, "spec": {"selector": None}}
    bad = {
        "metadata": {"name": "b"},
        "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Nope"}]}},
    }
    everything = {"metadata": {"name": "e"}, "spec": {"selector": {}}}
    assert matching_pdbs([null, bad, everything, pdb({})], pod) == [everything, pdb({})]


def test_room_computed_from_the_spec_rounds_percentages_up() -> None:
    pods = group_pods([True, True, True, False])
    assert room(pdb({"minAvailable": "50%"}), pods).allowed == 1  # 3 healthy, 2 desired
    assert room(pdb({"maxUnavailable": "30%"}), pods).desired == 2  # 4 − ceil(1.2)
    assert room(pdb({"maxUnavailable": 0}), pods).allowed == 0


def test_unhealthy_pods_go_when_the_budget_is_healthy_or_the_policy_says_always() -> None:
    pods = group_pods([True, True, True, False])
    unready = pods[3]
    assert refusal(pdb({"minAvailable": 3}), unready, pods) is None  # IfHealthyBudget: 3 >= 3
    assert refusal(pdb({"minAvailable": 4}), unready, pods) is not None
    assert refusal(pdb({"minAvailable": 4}), unready, pods) == (
        "PodDisruptionBudget g0 allows no more disruptions (3 healthy, 4 required)"
    )
    assert (
        refusal(pdb({"minAvailable": 4, "unhealthyPodEvictionPolicy": "AlwaysAllow"}), unready, pods) is None
    )


def test_pending_and_terminating_pods_ignore_pdbs() -> None:
    pods = group_pods([True, True])
    pending = pods[0].with_fields(phase="Pending")
    assert refusal(pdb({"minAvailable": 2}), pending, pods) is None
    assert refusal(pdb({"minAvailable": 2}), pods[0], pods) is not None
    assert refusal(pdb({"minAvailable": 2}), pods[0], pods) == (
        "PodDisruptionBudget g0 allows no more disruptions (2 healthy, 2 required)"
    )


def test_status_is_trusted_only_at_the_current_generation() -> None:
    pods = group_pods([True, True])
    fresh = pdb({"maxUnavailable": 1}, {"disruptionsAllowed": 1, "observedGeneration": 2})
    old = pdb({"maxUnavailable": 1}, {"disruptionsAllowed": 1, "observedGeneration": 1})
    assert refusal(fresh, pods[0], pods) is None
    assert "not been observed" in str(refusal(old, pods[0], pods))
