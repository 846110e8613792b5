"""One notion of a draining node and a going pod (guardhook.cluster.going), met by every budget:
delete-based drains under autoscaler drain taints, NoExecute node and device taints already in
force (taints in a row, evictions and drains while a group is doomed), and the worker-delete
message per LWS restartPolicy. Reviews are the captured s01 (worker DELETE), s07 (eviction) and
n01 (node taint) re-aimed at the sample fleet (serve/llm-xl: 4 groups of 4, pod `llm-xl-G-W` on
`gpu-node-(4G+W)`)."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from eviction_helpers import eviction, find, fleet_objects
from test_group_taint_dra import dra_fleet, rule, rule_request

from guardhook.admission.engine import Engine
from guardhook.cluster.going import DRAIN_TAINT_KEYS, Going, draining, draining_nodes
from guardhook.cluster.model import NodeRecord, PodRecord
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import NODES
from guardhook.config import build_config
from guardhook.ledger import MemoryLedger
from guardhook.planning.drain import plan_drain

from conftest import Server, clean_env, load_review
from helpers import request_of

Objects = list[dict[str, Any]]
KARPENTER = "system:serviceaccount:kube-system:karpenter"  # the Karpenter chart's service account
AUTOSCALER = "system:serviceaccount:kube-system:cluster-autoscaler"
ADMIN = "kubernetes-admin"
MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"}

DRAIN_TAINTS = [
    {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
    {"key": "ToBeDeletedByClusterAutoscaler", "value": "1764590400", "effect": "NoSchedule"},
]


def fleet(*edits: Callable[[Objects], None]) -> Objects:
    objects = fleet_objects()
    for edit in edits:
        edit(objects)
    return objects


def tainted(*nodes: str, taint: dict[str, Any] | None = None) -> Callable[[Objects], None]:
    def edit(objects: Objects) -> None:
        for name in nodes:
            find(objects, "Node", name).setdefault("spec", {}).setdefault("taints", []).append(
                dict(taint or MAINTENANCE)
            )

    return edit


def worker_delete(pod: str, user: str = ADMIN) -> dict[str, Any]:
    """s01 re-aimed at fleet worker `pod` (its stored object as `oldObject`), sent by `user`."""
    request = request_of(load_review("s01-worker-delete.validating"))
    request["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    request["name"] = pod
    request["oldObject"] = find(fleet_objects(), "Pod", pod)
    return request


def node_taint(node: str, taints: list[dict[str, Any]], objects: Objects) -> dict[str, Any]:
    """n01 (a NoExecute taint on gpu-node-06) re-aimed at `node` of `objects`, adding `taints`."""
    request = request_of(load_review("n01-node-taint-noexecute.validating"))
    old = copy.deepcopy(find(objects, "Node", node))
    new = copy.deepcopy(old)
    new.setdefault("spec", {})["taints"] = [*old.get("spec", {}).get("taints", []), *taints]
    request.update(name=node, object=new, oldObject=old)
    return request


def respond(eng: Engine, request: dict[str, Any]) -> dict[str, Any]:
    return dict(eng.judge(request, "validate").response)


def engine(
    objects: Objects, raw: Any = None, ledger: MemoryLedger | None = None, record: bool = True
) -> Engine:
    return Engine(
        view_from_objects(objects), build_config(raw or {}), ledger=ledger or MemoryLedger(), record=record
    )


def group_taint_warnings(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is True
    return [w for w in response.get("warnings", []) if w.startswith("[group-taint]")]


# ---- the notions themselves --------------------------------------------------------------------


def test_draining_is_a_cordon_or_a_drain_taint_of_any_known_or_configured_key() -> None:
    def node(**spec: Any) -> NodeRecord:
        return NodeRecord.from_object({"metadata": {"name": "n"}, "spec": spec})

    assert DRAIN_TAINT_KEYS == ("karpenter.sh/disrupted", "ToBeDeletedByClusterAutoscaler")
    assert draining(node(unschedulable=True)) == "cordoned"
    assert draining(node(taints=[DRAIN_TAINTS[0]])) == "drain taint karpenter.sh/disrupted:NoSchedule"
    assert draining(node(taints=[DRAIN_TAINTS[1]])) == (
        "drain taint ToBeDeletedByClusterAutoscaler=1764590400:NoSchedule"
    )
    # cluster-autoscaler's soft mark is not a drain; a configured key is
    soft = {"key": "DeletionCandidateOfClusterAutoscaler", "value": "1", "effect": "PreferNoSchedule"}
    assert draining(node(taints=[soft])) == ""
    assert draining(node(taints=[MAINTENANCE])) == ""
    assert draining(node(taints=[MAINTENANCE]), ["example.com/maintenance"]).startswith("drain taint")


def test_draining_nodes_lists_every_draining_node_of_the_view() -> None:
    objects = fleet(tainted("gpu-node-03", taint=DRAIN_TAINTS[0]))
    find(objects, "Node", "gpu-node-07")["spec"] = {"unschedulable": True}
    assert draining_nodes(view_from_objects(objects)) == {
        "gpu-node-03": "drain taint karpenter.sh/disrupted:NoSchedule",
        "gpu-node-07": "cordoned",
    }


@pytest.mark.parametrize(
    ("toleration", "why"),
    [
        (None, "NoExecute taint example.com/maintenance=true:NoExecute on node gpu-node-06"),
        (
            {"key": "example.com/maintenance", "operator": "Exists", "tolerationSeconds": 600},
            "NoExecute taint example.com/maintenance=true:NoExecute on node gpu-node-06, evicted after "
            "its 600s toleration",
        ),
        ({"key": "example.com/maintenance", "operator": "Exists"}, ""),
        ({"key": "example.com/maintenance", "value": "false", "effect": "NoExecute"}, "NoExecute taint"),
    ],
)
def test_a_pod_under_a_no_execute_taint_is_going_unless_tolerated_forever(
    toleration: dict[str, Any] | None, why: str
) -> None:
    objects = fleet(tainted("gpu-node-06"))
    if toleration is not None:
        find(objects, "Pod", "llm-xl-1-2")["spec"]["tolerations"].append(toleration)
    view = view_from_objects(objects)
    pod = view.pod("serve", "llm-xl-1-2")
    assert pod is not None
    found = Going(view).why(pod)
    assert found.startswith(why) if why else found == ""


def test_terminating_and_marked_pods_are_going() -> None:
    view = view_from_objects(fleet())
    pod = view.pod("serve", "llm-xl-1-2")
    assert pod is not None and Going(view).why(pod) == ""
    marked = PodRecord.from_object(
        {**find(fleet_objects(), "Pod", "llm-xl-1-2"), "status": {"conditions": [_disruption_target()]}}
    )
    assert Going(view).why(marked) == "marked DisruptionTarget/DeletionByTaintManager"
    gone = PodRecord.from_object(
        {
            **find(fleet_objects(), "Pod", "llm-xl-1-2"),
            "metadata": {"deletionTimestamp": "2026-12-01T10:00:00Z"},
        }
    )
    assert Going(view).why(gone) == "terminating"


def _disruption_target() -> dict[str, str]:
    return {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}


# ---- delete-based drains under drain taints ------------------------------------------------------


@pytest.mark.parametrize("taint", DRAIN_TAINTS, ids=lambda t: t["key"])
@pytest.mark.parametrize("user", [KARPENTER, AUTOSCALER, ADMIN])
def test_delete_on_a_drain_tainted_node_is_a_drain_judged_by_the_budget(
    taint: dict[str, Any], user: str
) -> None:
    ledger = MemoryLedger()
    eng = engine(fleet(tainted("gpu-node-02", "gpu-node-05", taint=taint)), ledger=ledger)
    first = respond(eng, worker_delete("llm-xl-0-2", user))
    assert first["allowed"] is True, first
    (warning,) = first["warnings"]
    assert f"draining node gpu-node-02 (drain taint {taint['key']}" in warning
    assert [(e.group, e.pod) for e in ledger.entries(("serve", "llm-xl"))] == [("0", "llm-xl-0-2")]
    second = respond(eng, worker_delete("llm-xl-1-1", user))
    assert second["allowed"] is False and second["status"]["code"] == 429
    assert "draining node gpu-node-05" in second["status"]["message"]
    assert "group 0 (delete of llm-xl-0-2 recorded" in second["status"]["message"]


def cordoned(*nodes: str) -> Callable[[Objects], None]:
    def edit(objects: Objects) -> None:
        for name in nodes:
            find(objects, "Node", name).setdefault("spec", {})["unschedulable"] = True

    return edit


def test_a_leader_delete_on_a_draining_node_is_a_group_restart_judged_by_the_budget() -> None:
    # `guardhook drain` (or `kubectl drain --disable-eviction`) restarts a group by deleting its
    # leader: on a draining node that spends the budget and is recorded, so a second drain, or
    # another replica, cannot take a second group of the LWS at the same time (issue 52).
    ledger = MemoryLedger()
    eng = engine(fleet(cordoned("gpu-node-00", "gpu-node-04")), ledger=ledger)
    first = respond(eng, worker_delete("llm-xl-0"))
    assert first["allowed"] is True, first
    (warning,) = first["warnings"]
    assert "deleting leader pod serve/llm-xl-0 from cordoned node gpu-node-00 restarts group 0" in warning
    assert [(e.group, e.pod, e.cause) for e in ledger.entries(("serve", "llm-xl"))] == [
        ("0", "llm-xl-0", "delete")
    ]
    second = respond(eng, worker_delete("llm-xl-1"))
    assert second["allowed"] is False and second["status"]["code"] == 429
    assert "a group restart on a draining node" in second["status"]["message"]
    assert "group 0 (delete of llm-xl-0 recorded" in second["status"]["message"]


def test_a_leader_delete_elsewhere_is_a_restart_asked_for_and_records_nothing() -> None:
    ledger = MemoryLedger()
    eng = engine(fleet(cordoned("gpu-node-04")), ledger=ledger)
    for leader in ("llm-xl-0", "llm-xl-2"):  # their nodes are schedulable
        answer = respond(eng, worker_delete(leader))
        assert answer["allowed"] is True and not answer.get("warnings"), answer
    assert ledger.entries(("serve", "llm-xl")) == ()


def test_a_configured_drain_taint_key_makes_a_drain_and_an_unknown_key_does_not() -> None:
    taint = {"key": "example.com/drain", "effect": "NoSchedule"}
    objects = fleet(tainted("gpu-node-02", taint=taint))
    plain = respond(engine(objects), worker_delete("llm-xl-0-2", KARPENTER))
    assert plain["allowed"] is False and plain["status"]["code"] == 403
    raw = {"policies": {"worker-delete": {"drainTaintKeys": ["example.com/drain"]}}}
    drained = respond(engine(objects, raw), worker_delete("llm-xl-0-2", KARPENTER))
    assert drained["allowed"] is True and "drain taint example.com/drain:NoSchedule" in drained["warnings"][0]


def test_drain_taint_keys_must_be_strings() -> None:
    from guardhook.config import ConfigError

    with pytest.raises(ConfigError, match="drainTaintKeys"):
        build_config({"policies": {"worker-delete": {"drainTaintKeys": [3]}}})
    with pytest.raises(ConfigError, match="drainTaintKeys"):
        build_config({"policies": {"worker-delete": {"drainTaintKeys": "karpenter.sh/disrupted"}}})


# ---- NoExecute taints already in force count for every budget -----------------------------------

# gpu-node-02 hosts group 0, gpu-node-06 group 1, gpu-node-10 group 2.
THREE_NODES = ("gpu-node-02", "gpu-node-06", "gpu-node-10")


@pytest.mark.parametrize(("budget", "warned"), [(1, [False, True, True]), (2, [False, False, True])])
def test_node_taints_in_a_row_add_up(budget: int, warned: list[bool]) -> None:
    # Three `kubectl taint` commands: one UPDATE per node, each in force (in the view) before the
    # next arrives. Nothing recorded (as `guardhook review` judges): the view alone must count.
    objects = fleet()
    raw = {"policies": {"group-eviction": {"maxDisruptedGroups": budget}}}
    eng = engine(objects, raw, record=False)
    seen = []
    for node in THREE_NODES:
        request = node_taint(node, [MAINTENANCE], objects)
        seen.append(group_taint_warnings(respond(eng, request)))
        eng.view.upsert(NODES, request["object"])
    assert [bool(w) for w in seen] == warned
    last = seen[-1][0]
    assert (
        "group 0 (going: llm-xl-0-2 (NoExecute taint example.com/maintenance=true:NoExecute "
        "on node gpu-node-02))" in last
    )
    assert f"at most {budget} may be broken" in last


def _rule_for(node: str) -> dict[str, Any]:
    new = rule({"pool": node})
    new["metadata"]["name"] = f"fault-{node}"
    request = rule_request(new)
    request["name"] = new["metadata"]["name"]
    return request


@pytest.mark.parametrize("kind", ["node", "rule"])
@pytest.mark.parametrize(("budget", "warned"), [(1, [False, True, True]), (2, [False, False, True])])
def test_taints_back_to_back_count_before_the_view_shows_them(
    kind: str, budget: int, warned: list[bool]
) -> None:
    # One `kubectl taint nodes a b c ...:NoExecute` sends its UPDATEs back to back: the view has
    # not seen the first when the second arrives. The first, within budget, recorded its group.
    objects = dra_fleet() if kind == "rule" else fleet()
    raw = {"policies": {"group-eviction": {"maxDisruptedGroups": budget}}}
    ledger = MemoryLedger()
    eng = engine(objects, raw, ledger)
    requests = [
        _rule_for(node) if kind == "rule" else node_taint(node, [MAINTENANCE], objects)
        for node in THREE_NODES
    ]
    seen = [group_taint_warnings(respond(eng, request)) for request in requests]
    assert [bool(w) for w in seen] == warned
    recorded = [(e.group, e.pod) for e in ledger.entries(("serve", "llm-xl"))]
    assert recorded == [("0", "llm-xl-0-2"), ("1", "llm-xl-1-2")][:budget]
    # What was recorded is a taint dooming the group, not an eviction of the pod it names.
    assert (
        "group 0 (a NoExecute taint dooming it recorded (it evicts llm-xl-0-2), not visible yet)"
        in seen[-1][0]
    )
    assert "eviction of" not in seen[-1][0]
    assert [e.cause for e in ledger.entries(("serve", "llm-xl"))] == ["taint"] * budget


def test_a_dry_run_taint_records_nothing() -> None:
    objects = fleet()
    ledger = MemoryLedger()
    eng = engine(objects, ledger=ledger)
    request = node_taint("gpu-node-02", [MAINTENANCE], objects)
    request["dryRun"] = True
    assert group_taint_warnings(respond(eng, request)) == []
    assert ledger.entries(("serve", "llm-xl")) == ()
    assert group_taint_warnings(respond(eng, node_taint("gpu-node-06", [MAINTENANCE], objects))) == []


def test_real_server_warns_on_the_second_of_three_taints_in_a_row(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    objects = fleet()
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(objects))
    server = fresh_server("--cluster-state", str(state))
    seen = []
    for node in THREE_NODES:
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        review["request"] = node_taint(node, [MAINTENANCE], objects)
        posted = server.post("/validate", review)
        assert posted.status_code == 200
        seen.append(group_taint_warnings(posted.json()["response"]))
    assert [bool(w) for w in seen] == [False, True, True]


def test_a_node_carrying_two_taints_counts_once_and_its_own_taint_is_not_counted_twice() -> None:
    # The view already holds the taint being judged (as `guardhook check` and a retried request
    # see it): that taint must not count as already in force.
    objects = fleet(tainted("gpu-node-06"))
    request = node_taint("gpu-node-06", [], objects)
    request["oldObject"]["spec"]["taints"] = []
    assert group_taint_warnings(respond(engine(objects), request)) == []


@pytest.mark.parametrize(("budget", "warned"), [(1, [False, True, True]), (2, [False, False, True])])
def test_device_taint_rules_in_a_row_add_up(budget: int, warned: list[bool]) -> None:
    objects = dra_fleet()
    raw = {"policies": {"group-eviction": {"maxDisruptedGroups": budget}}}
    eng = engine(objects, raw, record=False)
    seen = []
    for node in THREE_NODES:
        new = rule({"pool": node})
        new["metadata"]["name"] = f"fault-{node}"
        request = rule_request(new)
        request["name"] = new["metadata"]["name"]
        seen.append(group_taint_warnings(respond(eng, request)))
        eng.view.upsert("devicetaintrules", new)
    assert [bool(w) for w in seen] == warned
    assert (
        "going: llm-xl-0-2 (NoExecute taint example.com/xid=79:NoExecute on device "
        "gpu.nvidia.com/gpu-node-02/gpu-" in seen[-1][0]
    )


@pytest.mark.parametrize(("budget", "warned"), [(1, True), (2, True), (3, False)])
def test_one_device_taint_rule_over_three_groups(budget: int, warned: bool) -> None:
    objects = dra_fleet()
    raw = {"policies": {"group-eviction": {"maxDisruptedGroups": budget}}}
    # one request tainting the devices of gpu-node-02, -06 and -10 (groups 0, 1, 2)
    new = rule({"driver": "gpu.nvidia.com"})
    for node in [o for o in objects if o["kind"] == "ResourceClaim"]:
        pool = node["status"]["allocation"]["devices"]["results"][0]["pool"]
        if pool not in THREE_NODES:
            for result in node["status"]["allocation"]["devices"]["results"]:
                result["driver"] = "other.example.com"
    found = group_taint_warnings(respond(engine(objects, raw), rule_request(new)))
    assert bool(found) is warned
    if warned:
        assert "would lose 3 whole groups" in found[0]


def test_eviction_while_another_group_is_doomed_by_a_node_taint_is_429_naming_the_taint() -> None:
    eng = engine(fleet(tainted("gpu-node-06")))
    denied = respond(eng, eviction("llm-xl-0-3"))
    assert denied["status"]["code"] == 429
    message = denied["status"]["message"]
    assert (
        "group 1 (going: llm-xl-1-2 (NoExecute taint example.com/maintenance=true:NoExecute "
        "on node gpu-node-06))" in message
    )
    # the doomed group itself drains freely
    assert respond(eng, eviction("llm-xl-1-1"))["allowed"] is True


def test_a_timed_toleration_still_dooms_the_group_and_a_forever_one_does_not() -> None:
    def timed(objects: Objects) -> None:
        find(objects, "Pod", "llm-xl-1-2")["spec"]["tolerations"].append(
            {"key": "example.com/maintenance", "operator": "Exists", "tolerationSeconds": 3600}
        )

    def forever(objects: Objects) -> None:
        find(objects, "Pod", "llm-xl-1-2")["spec"]["tolerations"].append(
            {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}
        )

    objects = fleet(tainted("gpu-node-06"))
    timed(objects)
    denied = respond(engine(objects), eviction("llm-xl-0-3"))
    assert "evicted after its 3600s toleration" in denied["status"]["message"]
    objects = fleet(tainted("gpu-node-06"))
    forever(objects)
    assert respond(engine(objects), eviction("llm-xl-0-3"))["allowed"] is True


def test_eviction_while_another_group_is_doomed_by_a_device_taint_rule() -> None:
    objects = dra_fleet()
    objects.append(rule({"pool": "gpu-node-06"}))
    denied = respond(engine(objects), eviction("llm-xl-0-3"))
    assert denied["status"]["code"] == 429
    assert (
        "NoExecute taint example.com/xid=79:NoExecute on device gpu.nvidia.com/gpu-node-06/"
        in denied["status"]["message"]
    )


def test_a_device_taint_the_claim_tolerates_dooms_nothing() -> None:
    objects = dra_fleet()
    objects.append(rule({"pool": "gpu-node-06"}))
    request = find(objects, "ResourceClaim", "llm-xl-1-2-gpus")["spec"]["devices"]["requests"][0]
    request["exactly"]["tolerations"] = [{"key": "example.com/xid", "operator": "Exists"}]
    assert respond(engine(objects), eviction("llm-xl-0-3"))["allowed"] is True


def test_a_drain_delete_while_another_group_is_doomed_is_429() -> None:
    objects = fleet(tainted("gpu-node-06"))
    find(objects, "Node", "gpu-node-02")["spec"]["unschedulable"] = True
    denied = respond(engine(objects), worker_delete("llm-xl-0-2"))
    assert denied["status"]["code"] == 429 and "on node gpu-node-06" in denied["status"]["message"]


# ---- the worker-delete message per restartPolicy --------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        (None, "under restartPolicy RecreateGroupOnPodRestart the LWS controller then deletes the leader"),
        ("RecreateGroupOnPodRestart", "recreates the whole group: the replica is down for a cold start"),
        ("RecreateGroupAfterStart", "under restartPolicy RecreateGroupAfterStart the LWS controller"),
        ("None", "under restartPolicy None the replica stays broken"),
    ],
)
def test_the_denial_states_what_the_lws_controller_will_do(policy: str | None, says: str) -> None:
    def edit(objects: Objects) -> None:
        if policy is not None:
            find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
                policy
            )

    denied = respond(engine(fleet(edit)), worker_delete("llm-xl-0-2"))
    message = denied["status"]["message"]
    assert denied["status"]["code"] == 403 and says in message
    assert "kubectl delete pod -n serve llm-xl-0 --cascade=foreground" in message
    if policy == "None":
        assert "joins nothing" in message and "recreates the whole group" not in message


# ---- drain-plan on autoscaler-tainted nodes ---------------------------------------------------------


def test_drain_plan_of_the_draining_nodes_plans_the_autoscaler_tainted_ones() -> None:
    objects = fleet(
        tainted("gpu-node-02", taint=DRAIN_TAINTS[0]), tainted("gpu-node-06", taint=DRAIN_TAINTS[1])
    )
    plan = plan_drain(objects, None, {"maxDisruptedGroups": 1}).as_dict()
    assert plan["nodes"] == ["gpu-node-02", "gpu-node-06"]
    assert plan["draining"] == {
        "gpu-node-02": "drain taint karpenter.sh/disrupted:NoSchedule",
        "gpu-node-06": "drain taint ToBeDeletedByClusterAutoscaler=1764590400:NoSchedule",
    }
    assert [w["nodes"] for w in plan["waves"]] == [["gpu-node-02"], ["gpu-node-06"]]  # groups 0, 1: budget 1


def test_drain_plan_counts_a_group_doomed_by_a_no_execute_taint_as_broken() -> None:
    plan = plan_drain(fleet(tainted("gpu-node-10")), ["gpu-node-02"], {"maxDisruptedGroups": 1}).as_dict()
    (row,) = plan["lws"]
    assert row["broken"] == ["2"] and row["losing"] == ["0"]
    (refused,) = plan["refusedAtOnce"]  # group 2 uses up budget 1
    assert refused["pod"] == "llm-xl-0-2" and "while 1 of its groups is broken" in refused["reason"]


def test_drain_plan_cli_draining_flag(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(fleet(tainted("gpu-node-05", taint=DRAIN_TAINTS[1]))))
    config = tmp_path / "config.yaml"
    config.write_text("policies:\n  worker-delete:\n    drainTaintKeys: [example.com/drain]\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "guardhook", "drain-plan", *args, "--cluster-state", str(state)],
            capture_output=True,
            text=True,
            env=clean_env(tmp_path),
            timeout=120,
        )

    printed = run("--draining")
    assert printed.returncode == 0, printed.stderr
    assert "Draining 1 node: gpu-node-05" in printed.stdout
    assert "gpu-node-05 is draining already (drain taint ToBeDeletedByClusterAutoscaler" in printed.stdout
    both = run("--draining", "gpu-node-01")
    assert both.returncode == 2 and both.stderr.strip().count("\n") == 0 and "--draining" in both.stderr
    assert run().returncode == 2
    # a configured key makes a node draining for drain-plan as for worker-delete
    state.write_text(
        yaml.safe_dump_all(
            fleet(tainted("gpu-node-09", taint={"key": "example.com/drain", "effect": "NoSchedule"}))
        )
    )
    configured = run("--draining", "--config", str(config), "--format", "json")
    assert configured.returncode == 0, configured.stderr
    assert '"gpu-node-09"' in configured.stdout


def test_drain_plan_with_neither_nodes_nor_draining_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from guardhook.commands.main import main

    assert main(["drain-plan"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("guardhook drain-plan: no node given:") and "\n" not in err
    assert main(["drain-plan", "--draining", "gpu-node-01"]) == 2
    assert capsys.readouterr().err.strip().endswith("--draining, not both")


def test_drain_plan_draining_with_no_draining_node_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from guardhook.commands.main import main

    assert main(["drain-plan", "--draining"]) == 0  # the sample fleet: nothing cordoned or tainted
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "Draining 0 nodes: no node is cordoned or carries a drain taint"
