"""/metrics on the real server: parses with prometheus_client's parser, moves after a review, shows
decisions by policy, action and outcome, and the per-LWS group gauges; `--enforcement audit`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families
from test_audit import degraded_fleet

from conftest import Server

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(server: Server) -> Samples:
    answer = server.session.get(server.url + "/metrics", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, metric: str, **labels: str) -> float:
    return samples.get((metric, tuple(sorted(labels.items()))), 0.0)


def test_metrics_move_after_a_review(server: Server) -> None:
    before = scrape(server)
    server.review("/validate", "s01-worker-delete.validating")
    after = scrape(server)
    decision = {"policy": "worker-delete", "action": "Deny", "outcome": "denied"}
    assert (
        value(after, "guardhook_decisions_total", **decision)
        == value(before, "guardhook_decisions_total", **decision) + 1
    )
    request = {"endpoint": "validate", "code": "200"}
    assert (
        value(after, "guardhook_requests_total", **request)
        == value(before, "guardhook_requests_total", **request) + 1
    )
    count = "guardhook_request_duration_seconds_count"
    assert value(after, count, endpoint="validate") == value(before, count, endpoint="validate") + 1
    buckets = {labels for name, labels in after if name == "guardhook_request_duration_seconds_bucket"}
    assert (("endpoint", "validate"), ("le", "0.001")) in buckets
    assert (("endpoint", "validate"), ("le", "0.005")) in buckets
    assert value(after, "guardhook_cluster_view_synced") == 1.0


def test_group_gauges_for_the_sample_fleet(server: Server) -> None:
    samples = scrape(server)
    lws = {"namespace": "serve", "name": "llm-xl"}
    assert value(samples, "guardhook_lws_groups_desired", **lws) == 4
    assert value(samples, "guardhook_lws_groups_whole", **lws) == 4
    assert ("guardhook_lws_leader_ready_group_incomplete", tuple(sorted(lws.items()))) in samples
    assert value(samples, "guardhook_lws_leader_ready_group_incomplete", **lws) == 0


def test_group_gauges_follow_the_view(fresh_server: Callable[..., Server], tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": degraded_fleet()}))
    samples = scrape(fresh_server("--cluster-state", str(state)))
    xl = {"namespace": "serve", "name": "llm-xl"}
    assert value(samples, "guardhook_lws_groups_desired", **xl) == 4
    assert value(samples, "guardhook_lws_groups_whole", **xl) == 1
    assert value(samples, "guardhook_lws_leader_ready_group_incomplete", **xl) == 2
    assert value(samples, "guardhook_lws_groups_desired", namespace="default", name="lax") == 2


def test_enforcement_audit_allows_a_worker_delete_with_an_audit_annotation(
    fresh_server: Callable[..., Server],
) -> None:
    server = fresh_server("--enforcement", "audit")
    response = server.review("/validate", "s01-worker-delete.validating")
    assert response["allowed"] is True
    assert "status" not in response or response["status"].get("code") in (None, 200)
    assert "llm-xl-0" in response["auditAnnotations"]["worker-delete"]
    samples = scrape(server)
    audited = {"policy": "worker-delete", "action": "Audit", "outcome": "audited"}
    assert value(samples, "guardhook_decisions_total", **audited) == 1


def test_gang_gauges_per_set_follow_the_view(fresh_server: Callable[..., Server], tmp_path: Path) -> None:
    import group_shapes as shapes

    gangs = shapes.gang_objects()
    shapes.pod(gangs, "train-2-0")["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": shapes.fleet() + gangs}))
    samples = scrape(fresh_server("--cluster-state", str(state)))
    workload = {"namespace": "train", "kind": "Workload", "name": "train"}
    assert value(samples, "guardhook_gang_groups", **workload) == 3
    assert value(samples, "guardhook_gang_groups_whole", **workload) == 2
    assert not any(
        name.startswith("guardhook_gang") and dict(labels).get("namespace") == "serve"
        for name, labels in samples
    )


def test_gang_gauges_count_grove_and_jobset_gangs(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    import group_shapes as shapes
    import maker_shapes as makers

    grove = makers.grove_pods()
    makers.named(grove, "disagg-0-prefill-aaaaa")["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    items = shapes.fleet() + grove + makers.jobset_pods()
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    samples = scrape(fresh_server("--cluster-state", str(state)))
    pcs = {"namespace": "infer", "kind": "PodCliqueSet", "name": "disagg"}
    jobset = {"namespace": "batch", "kind": "JobSet", "name": "train"}
    assert value(samples, "guardhook_gang_groups", **pcs) == 3
    assert value(samples, "guardhook_gang_groups_whole", **pcs) == 2
    assert value(samples, "guardhook_gang_groups", **jobset) == 3
    assert value(samples, "guardhook_gang_groups_whole", **jobset) == 3
