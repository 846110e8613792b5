"""Groups down for good (guardhook.groups.stuck): an LWS group whose restart budget is spent (lws
PR #877, maxGroupRestarts) or a group whose pods a scheduling gate has held too long (kueue PR
#14138: LWS pods left gated after an upgrade). The 429 of the budget names them. Pods and LWS are
the sample fleet's; evictions the captured s07."""

from __future__ import annotations

import io
import json
import time

import group_shapes as shapes
import maker_shapes as makers

from guardhook.admission.engine import Engine
from guardhook.config import build_config
from guardhook.groups import SetRef, resolve_object, snapshot
from guardhook.groups.lws import LWS_MAKER
from guardhook.groups.stuck import gate_owner, stuck_groups, stuck_in_snapshot
from guardhook.ledger import MemoryLedger

NOW = time.time()


def lws_fleet(limit: int | None, counts: dict[str, int], broken: str = "llm-xl-1-2") -> list:
    objects = shapes.fleet()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    if limit is not None:
        lws["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = limit
    lws["metadata"].setdefault("annotations", {})["leaderworkerset.sigs.k8s.io/group-restart-counts"] = (
        json.dumps(counts)
    )
    shapes.pod(objects, broken)["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return objects


def stuck_of(objects: list, after: float = 900.0) -> list:
    return list(stuck_groups(shapes.view(objects), NOW, after))


def test_an_lws_group_past_max_group_restarts_is_down_for_good() -> None:
    (stuck,) = stuck_of(lws_fleet(3, {"1": 3}))
    assert (stuck.kind, stuck.set_name, stuck.key) == ("LeaderWorkerSet", "llm-xl", "1")
    assert stuck.why == "restarts exhausted: recreated 3 times, maxGroupRestarts 3"
    assert "delete its leader pod serve/llm-xl-1" in stuck.advice
    assert stuck.since > 0


def test_the_count_keyed_by_revision_and_on_the_leader_counts_too() -> None:
    objects = lws_fleet(2, {"abc123/1": 2})
    shapes.pod(objects, "llm-xl-1")["metadata"]["labels"][
        "leaderworkerset.sigs.k8s.io/template-revision-hash"
    ] = "abc123"
    assert [s.key for s in stuck_of(objects)] == ["1"]
    on_leader = lws_fleet(2, {})
    shapes.pod(on_leader, "llm-xl-1")["metadata"]["annotations"][
        "leaderworkerset.sigs.k8s.io/group-restart-count"
    ] = "3"
    assert [s.key for s in stuck_of(on_leader)] == ["1"]


def test_restarts_left_or_no_limit_or_a_whole_group_is_not_stuck() -> None:
    assert stuck_of(lws_fleet(3, {"1": 2})) == []
    assert stuck_of(lws_fleet(None, {"1": 9})) == []
    assert stuck_of(lws_fleet(3, {"2": 3})) == []  # group 2 is whole


def test_a_group_gated_too_long_is_stuck_naming_the_gate_and_its_owner() -> None:
    objects = shapes.fleet()
    worker = shapes.pod(objects, "llm-xl-2-1")
    worker["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    worker["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    (stuck,) = stuck_of(objects)
    assert stuck.key == "2"
    assert "held by the scheduling gate kueue.x-k8s.io/topology (Kueue)" in stuck.why
    assert stuck_of(objects, after=NOW) == []  # not yet past the configured time


def gated_grove_pods() -> list:
    """The Grove fleet with replica 1 held by the Grove operator's gate (its pods are older than
    900 s, so it is down for good past the default stuckAfterSeconds)."""
    pods = makers.grove_pods()
    pod = makers.named(pods, "disagg-1-decode-aaaaa")
    pod["spec"]["schedulingGates"] = [{"name": "grove.io/podgang-pending-creation"}]
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    return pods


def test_a_gated_grove_replica_is_stuck() -> None:
    pods = gated_grove_pods()
    view = shapes.view(pods)
    (stuck,) = stuck_of(pods)
    assert (stuck.kind, stuck.key) == ("PodCliqueSet", "1")
    assert "(the Grove operator)" in stuck.why
    ref = resolve_object(view, makers.named(pods, "disagg-1-decode-aaaaa"))
    snap = snapshot(view, ref) if ref is not None else None
    assert snap is not None and [s.key for s in stuck_in_snapshot(view, snap, NOW, 900.0)] == ["1"]


def test_gate_owners_by_domain() -> None:
    assert gate_owner("leaderworkerset.sigs.k8s.io/group-replacement") == "the LeaderWorkerSet controller"
    assert gate_owner("example.com/hold") == "another component"


def test_the_429_names_the_stuck_group() -> None:
    eng = Engine(shapes.view(lws_fleet(3, {"1": 3})), build_config({}), ledger=MemoryLedger())
    assert eng.judge(shapes.eviction_request("llm-xl-1-1"), "validate").response["allowed"] is True
    denied = eng.judge(shapes.eviction_request("llm-xl-2-1"), "validate").response
    assert denied["allowed"] is False and denied["status"]["code"] == 429
    message = denied["status"]["message"]
    assert "Note: group 1 of LeaderWorkerSet serve/llm-xl is down for good (restarts exhausted" in message
    assert "delete its leader pod serve/llm-xl-1" in message


def test_the_429_of_a_grove_set_names_its_stuck_replica_through_the_one_budget() -> None:
    pods = gated_grove_pods()
    nodes = [o for o in shapes.fleet() if o["kind"] == "Node"]
    eng = Engine(shapes.view(nodes + pods), build_config({}), ledger=MemoryLedger())
    denied = eng.judge(shapes.eviction_request("disagg-0-prefill-aaaaa", "infer"), "validate").response
    assert denied["allowed"] is False and denied["status"]["code"] == 429
    message = denied["status"]["message"]
    assert "would break group 0 of PodCliqueSet infer/disagg" in message
    assert "Note: group 1 of PodCliqueSet infer/disagg is down for good" in message
    assert message.count("Note:") == 1


def gated_grove_engine(config: dict, cordon_under: str = "") -> tuple[Engine, list]:
    """gated_grove_pods over the sample fleet's nodes; `cordon_under`: a pod whose node is
    cordoned."""
    pods = gated_grove_pods()
    nodes = [o for o in shapes.fleet() if o["kind"] == "Node"]
    if cordon_under:
        node = makers.named(pods, cordon_under)["spec"]["nodeName"]
        next(n for n in nodes if n["metadata"]["name"] == node)["spec"]["unschedulable"] = True
    return Engine(shapes.view(nodes + pods), build_config(config), ledger=MemoryLedger()), pods


PATIENT = {"policies": {"group-eviction": {"stuckAfterSeconds": 2**31 - 1}}}


def test_the_429_honours_the_configured_stuck_after_seconds() -> None:
    for config, notes in (({}, 1), (PATIENT, 0)):
        eng, _ = gated_grove_engine(config)
        denied = eng.judge(shapes.eviction_request("disagg-0-prefill-aaaaa", "infer"), "validate").response
        assert denied["allowed"] is False and denied["status"]["code"] == 429
        assert denied["status"]["message"].count("Note:") == notes


def test_a_drain_delete_429_honours_group_evictions_stuck_after_seconds() -> None:
    """worker-delete's drain budget shares group-eviction's `stuckAfterSeconds` (one setting)."""
    for config, notes in (({}, 1), (PATIENT, 0)):
        eng, pods = gated_grove_engine(config, cordon_under="disagg-0-prefill-aaaaa")
        request = shapes.delete_request(makers.named(pods, "disagg-0-prefill-aaaaa"))
        denied = eng.judge(request, "validate").response
        assert denied["allowed"] is False and denied["status"]["code"] == 429
        message = denied["status"]["message"]
        assert message.startswith(
            "[worker-delete] deleting pod infer/disagg-0-prefill-aaaaa from draining node"
        )
        assert message.count("Note:") == notes


def test_an_lws_snapshot_without_broken_groups_has_none_stuck() -> None:
    view = shapes.view(shapes.fleet())
    snap = LWS_MAKER.snapshot(view, SetRef("serve", "LeaderWorkerSet", "llm-xl"))
    assert snap is not None and stuck_in_snapshot(view, snap, NOW, 0.0) == []


def test_audit_names_the_stuck_group_and_honours_stuck_after_seconds() -> None:
    from guardhook.commands.audit import audit, render_json, render_text
    from guardhook.commands.scan import Located

    objects = shapes.fleet()
    worker = shapes.pod(objects, "llm-xl-2-1")
    worker["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    worker["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    result = audit([Located("cluster", o) for o in objects], build_config({}))
    assert [(s.set_name, s.key) for s in result.stuck] == [("llm-xl", "2")]
    out = io.StringIO()
    render_text(result, out, err=io.StringIO())
    assert (
        "Groups down for good (1):\n  group 2 of LeaderWorkerSet serve/llm-xl is down for good"
        in out.getvalue()
    )
    document = io.StringIO()
    render_json(result, document)
    assert json.loads(document.getvalue())["stuckGroups"][0]["group"] == "2"
    patient = build_config({"policies": {"group-eviction": {"stuckAfterSeconds": 2**31 - 1}}})
    assert audit([Located("cluster", o) for o in objects], patient).stuck == []


def test_drain_plan_names_the_stuck_group() -> None:
    from guardhook.planning.drain import plan_drain

    plan = plan_drain(lws_fleet(3, {"1": 3}), ["gpu-node-01"], {"maxDisruptedGroups": 1})
    assert [(s.key, s.why) for s in plan.stuck] == [
        ("1", "restarts exhausted: recreated 3 times, maxGroupRestarts 3")
    ]
    assert plan.as_dict()["stuckGroups"][0]["set"] == "llm-xl"


def test_the_stuck_gauge_counts_per_set() -> None:
    from guardhook.server.metrics import StuckCollector

    view = shapes.view(lws_fleet(3, {"1": 3}))
    (family,) = list(StuckCollector(lambda: view, lambda: 900.0).collect())
    assert family.name == "guardhook_stuck_groups"
    assert [(s.labels, s.value) for s in family.samples] == [
        ({"namespace": "serve", "kind": "LeaderWorkerSet", "name": "llm-xl"}, 1.0)
    ]
    (none,) = list(StuckCollector(lambda: shapes.view(shapes.fleet()), lambda: 900.0).collect())
    assert none.samples == []


def test_the_stuck_gauge_counts_gated_groups_after_the_configured_time() -> None:
    from guardhook.server.metrics import StuckCollector

    pods = gated_grove_pods()
    view = shapes.view(pods)
    (family,) = list(StuckCollector(lambda: view, lambda: 900.0).collect())
    assert [(s.labels["kind"], s.value) for s in family.samples] == [("PodCliqueSet", 1.0)]
    (patient,) = list(StuckCollector(lambda: view, lambda: float(2**31 - 1)).collect())
    assert patient.samples == []
