"""The group-readiness gate never deadlocks an LWS shape (issue 20; sigs.k8s.io/lws
pkg/controllers/pod_controller.go): `startupPolicy: LeaderReady` (the worker StatefulSet appears
only once the leader is Ready), a leader gated under the old behaviour, LeaderCreated with
exclusive topology (workers once the leader is scheduled), size 1, and a data-parallel LWS
(`guardhook.io/serving-pods: "all"`, every pod gated). Plans from views, then the transitions
against the fake API server with the LWS controller's and the kubelet's moves played by the test."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry
from test_group_readiness import condition, edit_pod, load, reconciling, wait_for

from guardhook.cluster.lws import EXCLUSIVE_TOPOLOGY_ANNOTATION, SERVING_PODS_ANNOTATION
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.static import view_from_objects
from guardhook.commands.audit import audit
from guardhook.commands.scan import Located
from guardhook.config import build_config, default_config
from guardhook.groups.ready import GATE, gate_counts, held_too_long
from guardhook.readiness.desired import PATCH, plan
from guardhook.server.metrics import GateCollector

from fake_apiserver import FakeApiServer, running_fake
from readiness_helpers import Object, fleet, is_leader, pod_of, set_condition

LEADERS = [f"llm-xl-{g}" for g in range(4)]
BOOTSTRAP = "LeaderReadyBootstrap"


def lws_of(objects: list[Object]) -> Object:
    return next(o for o in objects if o["kind"] == "LeaderWorkerSet")


def is_worker_part(obj: Object) -> bool:
    """A worker pod, or a worker StatefulSet `llm-xl-<g>` (owned by its leader pod)."""
    if obj["kind"] == "Pod":
        return not is_leader(obj)
    owners = obj["metadata"].get("ownerReferences") or []
    return obj["kind"] == "StatefulSet" and any(o["kind"] == "Pod" for o in owners)


def starting(startup: str = "LeaderReady", serving_all: bool = False) -> tuple[list[Object], list[Object]]:
    """The sample fleet as the LWS controller leaves it right after creating the leaders: no worker
    StatefulSet, no worker pod; leaders' containers ready, Ready False (the kubelet holds a pod
    whose gate has no True condition). Returns (objects, the worker parts it creates later, with
    their containers not ready yet)."""
    objects = fleet()
    lws = lws_of(objects)
    lws["spec"]["startupPolicy"] = startup
    if serving_all:
        lws["metadata"]["annotations"][SERVING_PODS_ANNOTATION] = "all"
    for pod in objects:
        if pod["kind"] == "Pod":
            set_condition(pod, "Ready", False)
            if serving_all:
                pod["spec"]["readinessGates"] = [{"conditionType": GATE}]
            if not is_leader(pod):
                set_condition(pod, "ContainersReady", False)
    later = [o for o in objects if is_worker_part(o)]
    return [o for o in objects if not is_worker_part(o)], later


def planned(objects: list[Object], all_lws: bool = False) -> dict[str, tuple[str, str]]:
    return {e.pod: (e.want.status, e.want.reason) for e in plan(view_from_objects(objects), all_lws).entries}


# ---- plans --------------------------------------------------------------------------------------


def test_a_leader_ready_leader_without_workers_is_released_to_start_them() -> None:
    objects, _ = starting()
    [entry] = [e for e in plan(view_from_objects(objects)).entries if e.pod == "llm-xl-0"]
    assert (entry.want.status, entry.want.reason, entry.action) == ("True", BOOTSTRAP, PATCH)
    assert "worker StatefulSet llm-xl-0" in entry.line() and "LeaderReady" in entry.line()
    assert planned(objects) == {name: ("True", BOOTSTRAP) for name in LEADERS}


def test_once_the_worker_statefulset_exists_the_leader_waits_for_the_group() -> None:
    objects, later = starting()
    objects.append(
        next(o for o in later if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "llm-xl-1")
    )
    result = planned(objects)
    assert result["llm-xl-1"] == ("False", "WorkerMissing")
    assert result["llm-xl-0"] == ("True", BOOTSTRAP)


def test_a_worker_statefulset_of_a_predecessor_leader_does_not_end_the_bootstrap() -> None:
    objects, later = starting()
    stale = copy.deepcopy(next(o for o in later if o["metadata"]["name"] == "llm-xl-2"))
    stale["metadata"]["ownerReferences"][0]["uid"] = "uid-of-the-leader-before"
    assert planned([*objects, stale])["llm-xl-2"] == ("True", BOOTSTRAP)


def test_leader_created_and_exclusive_topology_never_bootstrap() -> None:
    # Neither waits on the leader's readiness: the workers come once the leader exists (or is
    # scheduled), so the leader is held until the group is whole from the start.
    objects, _ = starting("LeaderCreated")
    assert planned(objects) == {name: ("False", "WorkerMissing") for name in LEADERS}
    exclusive, _ = starting("LeaderCreated")
    lws_of(exclusive)["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY_ANNOTATION] = "example.com/nvlink-domain"
    pod_of(exclusive, "llm-xl-0")["spec"].pop("nodeName", None)
    assert planned(exclusive)["llm-xl-0"] == ("False", "WorkerMissing")


def test_restart_and_subgroup_policies_start_as_their_startup_policy_does() -> None:
    # RecreateGroupAfterStart and subGroupPolicy decide restarts and placement (pending pods, nodes),
    # never wait on readiness: the gate follows the startup policy alone.
    for startup, want in (
        ("LeaderReady", ("True", BOOTSTRAP)),
        ("LeaderCreated", ("False", "WorkerMissing")),
    ):
        objects, _ = starting(startup)
        template = lws_of(objects)["spec"]["leaderWorkerTemplate"]
        template["restartPolicy"] = "RecreateGroupAfterStart"
        template["subGroupPolicy"] = {"subGroupSize": 2}
        assert planned(objects) == {name: want for name in LEADERS}


def test_size_1_is_whole_with_its_leader_under_either_startup_policy() -> None:
    for startup in ("LeaderReady", "LeaderCreated"):
        objects, _ = starting(startup)
        lws_of(objects)["spec"]["leaderWorkerTemplate"]["size"] = 1
        assert planned(objects) == {name: ("True", "GroupWhole") for name in LEADERS}
        set_condition(pod_of(objects, "llm-xl-0"), "ContainersReady", False)
        assert planned(objects)["llm-xl-0"] == ("False", "LeaderContainersNotReady")


def test_serving_all_gates_every_pod_and_judges_gated_workers_by_their_containers() -> None:
    objects, later = starting("LeaderCreated", serving_all=True)
    for part in later:
        if part["kind"] == "Pod":
            set_condition(part, "ContainersReady", True)  # Ready stays False: the gate holds them
    result = planned([*objects, *later])
    assert len(result) == 16 and set(result.values()) == {("True", "GroupWhole")}
    set_condition(pod_of(later, "llm-xl-0-3"), "ContainersReady", False)
    result = planned([*objects, *later])
    assert {result[f"llm-xl-0{w}"] for w in ("", "-1", "-2", "-3")} == {("False", "WorkerNotReady")}
    assert result["llm-xl-1-1"] == ("True", "GroupWhole")


def test_serving_all_with_leader_ready_bootstraps_the_leader_only() -> None:
    objects, later = starting("LeaderReady", serving_all=True)
    assert planned(objects) == {name: ("True", BOOTSTRAP) for name in LEADERS}
    result = planned([*objects, *later])  # workers created, containers not ready yet
    assert result["llm-xl-0"] == ("False", "WorkerNotReady") and result["llm-xl-0-1"] == (
        "False",
        "WorkerNotReady",
    )


# ---- the watchdog ---------------------------------------------------------------------------


def released(objects: list[Object], but: str) -> list[Object]:
    """`objects` with every gated leader but `but` released (its condition True)."""
    for pod in objects:
        if pod["kind"] == "Pod" and is_leader(pod) and pod["metadata"]["name"] != but:
            set_condition(pod, GATE, True, reason="GroupWhole")
    return objects


def test_a_gated_leader_held_longer_than_the_startup_window_is_counted_and_named() -> None:
    objects = released(fleet(), but="llm-xl-0")
    set_condition(pod_of(objects, "llm-xl-0-1"), "Ready", False)
    since = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    set_condition(pod_of(objects, "llm-xl-0"), GATE, False, reason="WorkerNotReady", lastTransitionTime=stamp)
    leader = PodRecord.from_object(pod_of(objects, "llm-xl-0"))
    assert held_too_long(leader, 600, since + timedelta(seconds=599)) is None
    assert held_too_long(leader, 600, since + timedelta(seconds=601)) == 601
    view = view_from_objects(objects)
    [counts] = gate_counts(view, window_seconds=600, now=since + timedelta(hours=1))
    assert counts.held == 1
    set_condition(pod_of(objects, "llm-xl-0"), "ContainersReady", False)  # its own start: not held
    [counts] = gate_counts(view_from_objects(objects), window_seconds=600, now=since + timedelta(hours=1))
    assert counts.held == 0


def _held_leader_fleet(hours_ago: float) -> list[Object]:
    objects = released(fleet(), but="llm-xl-2")
    set_condition(pod_of(objects, "llm-xl-2-3"), "Ready", False)
    stamp = (datetime.now(UTC) - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = "WorkerNotReady: llm-xl-2-3"
    set_condition(
        pod_of(objects, "llm-xl-2"),
        GATE,
        False,
        reason="WorkerNotReady",
        message=message,
        lastTransitionTime=stamp,
    )
    return objects


def test_the_held_gauge_is_scraped_per_lws_with_the_configured_window() -> None:
    view = view_from_objects(_held_leader_fleet(hours_ago=1))
    registry = CollectorRegistry()
    registry.register(GateCollector(lambda: view, window_seconds=600))
    assert (
        registry.get_sample_value("guardhook_group_readiness_held", {"namespace": "serve", "name": "llm-xl"})
        == 1
    )
    longer = CollectorRegistry()
    longer.register(GateCollector(lambda: view, window_seconds=7200))
    assert (
        longer.get_sample_value("guardhook_group_readiness_held", {"namespace": "serve", "name": "llm-xl"})
        == 0
    )


def test_audit_names_a_held_leader_and_what_its_group_lacks() -> None:
    objects = _held_leader_fleet(hours_ago=1)
    located = [Located("cluster", o) for o in objects]
    [held] = [f for f in audit(located, default_config()).violations if f.name == "llm-xl-2"]
    assert (held.policy, held.action, held.kind) == ("group-readiness", "Advisory", "Pod")
    assert "WorkerNotReady: llm-xl-2-3" in held.message and "startup window 1800 s" in held.message
    patient = build_config({"policies": {"group-readiness": {"startupWindowSeconds": 7200}}})
    assert not [f for f in audit(located, patient).violations if f.name == "llm-xl-2"]


# ---- against the fake API server --------------------------------------------------------------


def kubelet(fake: FakeApiServer, name: str) -> None:
    """What the kubelet does for a gated pod: Ready = ContainersReady and the gate's condition True
    (pkg/kubelet/status/generate.go)."""
    pod = fake.get("pods", "serve", name)
    assert pod is not None
    found = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    ready = found.get("ContainersReady") == "True" and found.get(GATE) == "True"
    edit_pod(fake, name, lambda p: set_condition(p, "Ready", ready))


def ready(fake: FakeApiServer, name: str) -> bool:
    pod = fake.get("pods", "serve", name) or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])


def test_leader_ready_group_starts_becomes_whole_and_breaks_again(tmp_path: Path) -> None:
    objects, later = starting()
    with running_fake() as fake, reconciling(fake, tmp_path):
        load(fake, objects)
        assert wait_for(lambda: (condition(fake, "llm-xl-0") or ("", ""))[1].startswith(BOOTSTRAP))
        kubelet(fake, "llm-xl-0")
        assert ready(fake, "llm-xl-0")  # what the LWS controller waits for
        # The LWS controller sees the leader Ready and creates the worker StatefulSet and its pods.
        load(fake, [o for o in later if o["metadata"]["name"].startswith("llm-xl-0")])
        assert wait_for(lambda: (condition(fake, "llm-xl-0") or ("",))[0] == "False")
        for name in ("llm-xl-0-1", "llm-xl-0-2", "llm-xl-0-3"):
            edit_pod(
                fake, name, lambda p: set_condition(set_condition(p, "ContainersReady", True), "Ready", True)
            )
        assert wait_for(lambda: condition(fake, "llm-xl-0") == ("True", "GroupWhole: 4 of 4 pods Ready"))
        edit_pod(fake, "llm-xl-0-2", lambda p: set_condition(p, "Ready", False))
        assert wait_for(lambda: condition(fake, "llm-xl-0") == ("False", "WorkerNotReady: llm-xl-0-2"))
        # the other groups are still in their bootstrap: released, never held
        assert (condition(fake, "llm-xl-3") or ("",))[0] == "True"


def test_a_leader_held_by_the_old_behaviour_is_released_by_the_next_round(tmp_path: Path) -> None:
    objects, _ = starting()
    for name in LEADERS:  # what the gate used to write, forever
        set_condition(
            pod_of(objects, name), GATE, False, reason="WorkerMissing", message="WorkerMissing: 1 of 4 pods"
        )
    with running_fake() as fake:
        load(fake, objects)
        with reconciling(fake, tmp_path):
            assert wait_for(lambda: all((condition(fake, n) or ("",))[0] == "True" for n in LEADERS))
            assert all(condition(fake, n)[1].startswith(BOOTSTRAP) for n in LEADERS)  # type: ignore[index]


def test_serving_all_every_pod_is_written_and_the_group_becomes_whole(tmp_path: Path) -> None:
    objects, later = starting("LeaderCreated", serving_all=True)
    group0 = ["llm-xl-0", "llm-xl-0-1", "llm-xl-0-2", "llm-xl-0-3"]
    with running_fake() as fake, reconciling(fake, tmp_path):
        load(fake, [*objects, *later])
        assert wait_for(lambda: all((condition(fake, n) or ("",))[0] == "False" for n in group0))
        for name in group0[1:]:
            edit_pod(fake, name, lambda p: set_condition(p, "ContainersReady", True))
        assert wait_for(lambda: all((condition(fake, n) or ("",))[0] == "True" for n in group0))
        for name in group0:
            kubelet(fake, name)
        assert all(ready(fake, name) for name in group0)


def test_a_gate_never_written_holds_the_leader_from_its_creation() -> None:
    # No reconciler ever wrote the condition (not deployed, or not running): the kubelet holds
    # the leader unready all the same, so the watchdog counts it from the pod's creation.
    objects = released(fleet(), but="llm-xl-1")
    leader = pod_of(objects, "llm-xl-1")
    created = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    leader["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    record = PodRecord.from_object(leader)
    assert GATE not in record.gate_conditions
    assert held_too_long(record, 600, created + timedelta(seconds=599)) is None
    assert held_too_long(record, 600, created + timedelta(seconds=601)) == 601
    [held] = [
        f
        for f in audit([Located("cluster", o) for o in objects], default_config()).violations
        if f.name == "llm-xl-1"
    ]
    assert held.action == "Advisory" and "never written" in held.message
    [counts] = gate_counts(view_from_objects(objects), window_seconds=600)
    assert counts.held == 1
