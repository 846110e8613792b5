"""`guardhook drain-plan`: waves within each LWS's group budget, the 429s of an all-at-once drain,
and whether the lost groups can be rebuilt, on the sample fleet and on hand-made states."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.commands.main import main
from guardhook.planning.drain import plan_drain
from guardhook.wire import KubeObject

from conftest import clean_env
from fake_apiserver import running_fake
from helpers import find, set_ready

PARAMS = {"maxDisruptedGroups": 1, "ledgerTTLSeconds": 120}
XL = ("serve", "llm-xl")


def drain_cli(
    tmp_path: Path, *args: str, state: list[KubeObject] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m guardhook drain-plan ARGS` with no kubeconfig (the sample fleet unless
    `state` is given, which is written to a --cluster-state file)."""
    extra: list[str] = []
    if state is not None:
        path = tmp_path / "state.yaml"
        path.write_text(yaml.safe_dump_all(state))
        extra = ["--cluster-state", str(path)]
    return subprocess.run(
        [sys.executable, "-m", "guardhook", "drain-plan", *args, *extra],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=120,
    )


def fleet(edit: Callable[[list[KubeObject]], None] | None = None) -> list[KubeObject]:
    objects = copy.deepcopy(embedded_fleet_objects())
    if edit is not None:
        edit(objects)
    return objects


def lws_row(document: dict[str, Any], namespace: str = "serve", name: str = "llm-xl") -> dict[str, Any]:
    [row] = [r for r in document["lws"] if (r["namespace"], r["name"]) == (namespace, name)]
    return row


def wave_nodes(document: dict[str, Any]) -> list[list[str]]:
    return [wave["nodes"] for wave in document["waves"]]


# ---- the sample fleet (default budget 1) ---------------------------------------------------------


def test_two_nodes_of_two_groups_take_two_waves_and_can_be_rebuilt(tmp_path: Path) -> None:
    done = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert wave_nodes(document) == [["gpu-node-01"], ["gpu-node-05"]]
    assert [w["groups"] for w in document["waves"]] == [
        [{"namespace": "serve", "lws": "llm-xl", "group": "0"}],
        [{"namespace": "serve", "lws": "llm-xl", "group": "1"}],
    ]
    assert document["waves"][1]["waitsFor"] == [{"namespace": "serve", "lws": "llm-xl", "group": "0"}]
    row = lws_row(document)
    assert (row["lost"], row["rebuildable"], row["losing"], row["broken"]) == (2, 2, ["0", "1"], [])
    [refused] = document["refusedAtOnce"]
    assert (refused["pod"], refused["node"]) == ("llm-xl-1-1", "gpu-node-05")
    assert (
        "while 1 of its groups is broken (budget 1, config parameter maxDisruptedGroups)" in refused["reason"]
    )


def test_text_says_waves_429s_and_rebuild(tmp_path: Path) -> None:
    done = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05")
    assert done.returncode == 0, done.stderr
    assert "Waves: 2" in done.stdout
    assert "  wave 1: gpu-node-01 — breaks serve/llm-xl group 0" in done.stdout
    assert (
        "  wave 2: gpu-node-05 — breaks serve/llm-xl group 1; waits for serve/llm-xl group 0" in done.stdout
    )
    assert "would answer 429 to 1 eviction:" in done.stdout
    assert "serve/llm-xl: 2 groups to rebuild, room for 2\n" in done.stdout


def test_a_drain_that_leaves_a_group_unrebuildable_exits_1(tmp_path: Path) -> None:
    nodes = ["gpu-node-16", "gpu-node-17", "gpu-node-18", "gpu-node-19"]
    nodes += ["gpu-node-01", "gpu-node-05", "gpu-node-09", "gpu-node-13"]
    done = drain_cli(tmp_path, *nodes, "--format", "json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    row = lws_row(document)
    assert (row["lost"], row["rebuildable"]) == (4, 3)
    assert row["short"] == "short 8 nvidia.com/gpu on 4 nodes"
    # The empty nodes break nothing and go with the first; then one group per wave.
    assert wave_nodes(document) == [nodes[:5], ["gpu-node-05"], ["gpu-node-09"], ["gpu-node-13"]]
    assert document["rebuildable"] is False
    text = drain_cli(tmp_path, *nodes)
    assert text.returncode == 1
    assert "serve/llm-xl: 4 groups to rebuild, room for 3 (short 8 nvidia.com/gpu on 4 nodes)" in text.stdout


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    unknown = drain_cli(tmp_path, "gpu-node-01", "gpu-node-99")
    assert unknown.returncode == 2
    assert (
        unknown.stderr.strip().splitlines()[-1].startswith("guardhook drain-plan: unknown node: gpu-node-99")
    )
    assert "Traceback" not in unknown.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    unreadable = drain_cli(tmp_path, "gpu-node-01", "--cluster-state", str(broken))
    assert unreadable.returncode == 2 and "Traceback" not in unreadable.stderr
    assert str(broken) in unreadable.stderr


# ---- hand-made states ------------------------------------------------------------------------------


def annotate(objects: list[KubeObject], key: str, value: str) -> None:
    lws = find(objects, "LeaderWorkerSet", "llm-xl")
    lws["metadata"].setdefault("annotations", {})[key] = value


def test_the_lws_annotation_sets_the_budget(tmp_path: Path) -> None:
    state = fleet(lambda o: annotate(o, "guardhook.io/max-disrupted-groups", "2"))
    done = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05", "--format", "json", state=state)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert wave_nodes(document) == [["gpu-node-01", "gpu-node-05"]]
    assert document["refusedAtOnce"] == []
    assert lws_row(document)["budget"] == 2


def test_config_sets_the_default_budget(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("policies:\n  group-eviction:\n    maxDisruptedGroups: 3\n")
    done = drain_cli(
        tmp_path, "gpu-node-01", "gpu-node-05", "gpu-node-09", "--config", str(config), "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    assert wave_nodes(json.loads(done.stdout)) == [["gpu-node-01", "gpu-node-05", "gpu-node-09"]]


def test_a_group_already_broken_uses_up_the_first_wave_and_counts_as_lost() -> None:
    # Group 2 is broken (a worker not Ready): with budget 1 nothing whole may be evicted now.
    objects = fleet(lambda o: set_ready(find(o, "Pod", "llm-xl-2-3"), False))
    plan = plan_drain(objects, ["gpu-node-01", "gpu-node-10"], PARAMS)
    [xl] = plan.lws
    assert (xl.losing, xl.broken, xl.lost, xl.rebuildable) == (("0", "2"), ("2",), 2, 2)
    # gpu-node-10 holds a pod of the broken group: always allowed, so it goes first; gpu-node-01
    # waits for group 2 to be whole again.
    assert [w.nodes for w in plan.waves] == [["gpu-node-10"], ["gpu-node-01"]]
    assert [str(g) for g in plan.waves[1].waits_for] == ["serve/llm-xl group 2"]
    assert [r.pod for r in plan.at_once] == ["llm-xl-0-1"]
    assert plan.ok


def test_a_node_alone_over_the_budget_gets_its_own_wave_with_retries() -> None:
    # Two groups' workers on one node (budget 1): the second eviction is retried until the first
    # group is whole again.
    objects = fleet(lambda o: find(o, "Pod", "llm-xl-1-1")["spec"].update(nodeName="gpu-node-01"))
    plan = plan_drain(objects, ["gpu-node-01", "gpu-node-09"], PARAMS)
    assert [w.nodes for w in plan.waves] == [["gpu-node-01"], ["gpu-node-09"]]
    assert [r.pod for r in plan.waves[0].retried] == ["llm-xl-1-1"]
    assert not plan.blocked and plan.ok


def group_pdb(group: int, **spec: Any) -> KubeObject:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"llm-xl-group-{group}", "namespace": "serve", "generation": 1},
        "spec": {
            "selector": {
                "matchLabels": {
                    "leaderworkerset.sigs.k8s.io/name": "llm-xl",
                    "leaderworkerset.sigs.k8s.io/group-index": str(group),
                }
            },
            **spec,
        },
    }


def test_a_per_group_pdb_that_allows_nothing_blocks_the_node(tmp_path: Path) -> None:
    state = fleet(lambda o: o.append(group_pdb(0, minAvailable=4)))
    done = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05", "--format", "json", state=state)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["blocked"] == ["gpu-node-01"]
    assert wave_nodes(document) == [["gpu-node-05"]]
    refused = {r["pod"]: r["reason"] for r in document["refusedAtOnce"]}
    assert "PodDisruptionBudget llm-xl-group-0 allows no more disruptions" in refused["llm-xl-0-1"]


def test_a_pdb_status_is_spent_by_each_allowed_eviction() -> None:
    # One PDB over the whole LWS that allows 1 disruption, budget 4: the second eviction of an
    # all-at-once drain meets the PDB (the API server decrements disruptionsAllowed), so the
    # nodes take two waves.
    def edit(objects: list[KubeObject]) -> None:
        annotate(objects, "guardhook.io/max-disrupted-groups", "4")
        pdb = group_pdb(0, maxUnavailable=1)
        pdb["metadata"]["name"] = "llm-xl"
        del pdb["spec"]["selector"]["matchLabels"]["leaderworkerset.sigs.k8s.io/group-index"]
        pdb["status"] = {
            "disruptionsAllowed": 1,
            "observedGeneration": 1,
            "currentHealthy": 16,
            "desiredHealthy": 15,
        }
        objects.append(pdb)

    plan = plan_drain(fleet(edit), ["gpu-node-01", "gpu-node-05"], PARAMS)
    assert [r.pod for r in plan.at_once] == ["llm-xl-1-1"]
    assert "PodDisruptionBudget llm-xl allows no more disruptions" in plan.at_once[0].reason
    assert [w.nodes for w in plan.waves] == [["gpu-node-01"], ["gpu-node-05"]]


def test_a_budget_of_0_blocks_every_node_with_a_whole_group() -> None:
    plan = plan_drain(
        fleet(lambda o: annotate(o, "guardhook.io/max-disrupted-groups", "0")),
        ["gpu-node-01", "gpu-node-16"],
        PARAMS,
    )
    assert plan.blocked == ("gpu-node-01",)
    assert [w.nodes for w in plan.waves] == [["gpu-node-16"]]
    assert not plan.ok


def gpu_pod(name: str, node: str, owner: str | None) -> KubeObject:
    pod: KubeObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "batch"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if owner:
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "u", "controller": True}
        ]
    return pod


@pytest.mark.parametrize(("owner", "rebuildable"), [("ReplicaSet", 1), ("DaemonSet", 2), (None, 2)])
def test_pods_recreated_elsewhere_claim_capacity_before_the_rebuild(
    owner: str | None, rebuildable: int
) -> None:
    # Two 8-GPU pods on gpu-node-16/17; drained with two groups' nodes, 8 free GPU nodes are left.
    # A ReplicaSet's pods come back (pending) and take 2 of them; a DaemonSet's or bare pods do not.
    def edit(objects: list[KubeObject]) -> None:
        objects += [gpu_pod("a", "gpu-node-16", owner), gpu_pod("b", "gpu-node-17", owner)]

    plan = plan_drain(fleet(edit), ["gpu-node-01", "gpu-node-05", "gpu-node-16", "gpu-node-17"], PARAMS)
    [xl] = plan.lws
    assert (xl.lost, xl.rebuildable) == (2, rebuildable)
    assert plan.ok is (rebuildable == 2)


def test_lws_rebuilt_first_take_capacity_from_the_next() -> None:
    # A second LWS `a-twin` (sorted first), llm-xl's shape with 1 group on gpu-node-16..19, loses it
    # to the drain: it is rebuilt first, so llm-xl's two lost groups find room for only one.
    def edit(objects: list[KubeObject]) -> None:
        twin = copy.deepcopy(find(objects, "LeaderWorkerSet", "llm-xl"))
        twin["metadata"].update(name="a-twin", uid="twin")
        twin["spec"]["replicas"] = 1
        objects.append(twin)
        for worker, node in enumerate(["gpu-node-16", "gpu-node-17", "gpu-node-18", "gpu-node-19"]):
            pod = copy.deepcopy(find(objects, "Pod", "llm-xl-0" if worker == 0 else f"llm-xl-0-{worker}"))
            pod["metadata"]["name"] = "a-twin-0" + (f"-{worker}" if worker else "")
            pod["metadata"]["uid"] = f"twin-{worker}"
            pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = "a-twin"
            pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"] = "twin0"
            pod["spec"]["nodeName"] = node
            objects.append(pod)

    nodes = ["gpu-node-16", "gpu-node-01", "gpu-node-05"]
    plan = plan_drain(fleet(edit), nodes, PARAMS)
    rows = {(r.namespace, r.name): r for r in plan.lws}
    assert (rows[("serve", "a-twin")].lost, rows[("serve", "a-twin")].rebuildable) == (1, 1)
    # 20 GPU nodes − 3 drained − 8 held by llm-xl groups 2 and 3 = 9 free after the drain; a-twin
    # takes 4, leaving 5: room for one of llm-xl's two groups.
    assert (rows[XL].lost, rows[XL].rebuildable) == (2, 1)
    assert not plan.ok


def test_a_live_cluster_is_listed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The sample fleet served by the fake API server, through the real kubernetes client.
    with running_fake() as fake:
        fake.load(fleet())
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        code = main(
            ["drain-plan", "--kubeconfig", str(kubeconfig), "--format", "json", "gpu-node-01", "gpu-node-05"]
        )
        assert code == 0
        assert wave_nodes(json.loads(capsys.readouterr().out)) == [["gpu-node-01"], ["gpu-node-05"]]
        assert not [c for c in fake.requests if not c.startswith("GET")]  # planning writes nothing
    unreachable = main(["drain-plan", "--kubeconfig", str(kubeconfig), "gpu-node-01"])  # the server is gone
    assert unreachable == 2
    assert capsys.readouterr().err.startswith("guardhook drain-plan: cannot list objects from kubeconfig")


# ---- coverage (issue 22): when the plan's 429s do not hold -----------------------------------------


def _namespace(labels: dict[str, str]) -> KubeObject:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serve", "labels": labels}}


@pytest.mark.parametrize("guarded", [True, False])
def test_an_lws_in_a_namespace_without_the_opt_in_label_is_flagged(tmp_path: Path, guarded: bool) -> None:
    labels = {"guardhook.io/guard-evictions": "true"} if guarded else {}
    state = fleet(lambda objects: objects.append(_namespace(labels)))
    done = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05", "--format", "json", state=state)
    assert done.returncode == 0, done.stderr
    row = lws_row(json.loads(done.stdout))
    assert row["evictionsGuarded"] is guarded
    if guarded:
        assert row["warnings"] == []
        return
    (warning,) = row["warnings"]
    assert "lacks the label guardhook.io/guard-evictions=true" in warning
    assert warning.endswith("the 429s predicted for its pods do not hold")
    text = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05", state=state).stdout
    assert f"  warning: serve/llm-xl: {warning}\n" in text


def test_without_namespace_objects_guarding_is_unknown_not_unguarded(tmp_path: Path) -> None:
    row = lws_row(json.loads(drain_cli(tmp_path, "gpu-node-01", "--format", "json").stdout))
    assert row["evictionsGuarded"] is None and row["warnings"] == []


def test_an_unreadable_budget_annotation_is_a_warning_naming_the_default(tmp_path: Path) -> None:
    def edit(objects: list[KubeObject]) -> None:
        find(objects, "LeaderWorkerSet", "llm-xl")["metadata"].setdefault("annotations", {})[
            "guardhook.io/max-disrupted-groups"
        ] = "two"

    row = lws_row(
        json.loads(drain_cli(tmp_path, "gpu-node-01", "--format", "json", state=fleet(edit)).stdout)
    )
    assert row["budget"] == 1
    assert row["warnings"] == [
        'annotation guardhook.io/max-disrupted-groups: "two" cannot be read; '
        "the configured maxDisruptedGroups (1) is used instead"
    ]


def test_groups_with_no_pod_are_a_note_left_out_of_the_rebuild_and_its_exit_code(tmp_path: Path) -> None:
    # audit counts groups with no pod broken; drain-plan said nothing of an LWS with no pod at all,
    # and counted a half-made LWS's missing groups as lost (exit 1). Nothing made those pods (no
    # LWS controller running, a quota; a group with no room has Pending pods), so no drain loses
    # them and no room makes them: whole LWS or some groups, the plan names them and leaves them out.
    def podless(objects: list[KubeObject]) -> None:
        twin = copy.deepcopy(find(objects, "LeaderWorkerSet", "llm-xl"))
        twin["metadata"].update(name="llm-idle", uid="uid-llm-idle")
        objects.append(twin)

    def no_replicas(objects: list[KubeObject]) -> None:
        podless(objects)
        find(objects, "LeaderWorkerSet", "llm-idle")["spec"]["replicas"] = 0

    def half_made(objects: list[KubeObject]) -> None:
        find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["replicas"] = 8

    state = fleet(podless)
    plan = plan_drain(state, ["gpu-node-16"], PARAMS)
    assert [p.as_dict() for p in plan.podless] == [
        {"namespace": "serve", "name": "llm-idle", "count": 4, "groups": ["0", "1", "2", "3"], "noPod": True}
    ]
    # listed as audit counts it (BROKEN 4), with nothing to rebuild
    [idle] = [row for row in plan.lws if row.name == "llm-idle"]
    assert (idle.losing, idle.broken_count, idle.lost, idle.rebuildable, plan.ok) == ((), 4, 0, 0, True)
    assert plan_drain(fleet(no_replicas), ["gpu-node-16"], PARAMS).podless == ()  # asks for no group

    half = plan_drain(fleet(half_made), ["gpu-node-01"], PARAMS)
    [row] = [row for row in half.lws if row.name == "llm-xl"]
    assert (row.broken, row.lost, row.rebuildable) == (("4", "5", "6", "7"), 1, 1)
    # its wave waits for groups 4-7 to be whole (budget 1), which nothing makes: the plan cannot start
    assert (half.stalled, half.ok) == ((1,), False)
    assert [str(g) for g in half.waves[0].waits_for] == [f"serve/llm-xl group {g}" for g in (4, 5, 6, 7)]
    assert [(p.name, p.count, p.groups, p.no_pod) for p in half.podless] == [
        ("llm-xl", 4, ("4", "5", "6", "7"), False)
    ]

    text = drain_cli(tmp_path, "gpu-node-16", state=state)
    assert text.returncode == 0, text.stderr
    assert "  serve      llm-idle  1       0       4           0     0" in text.stdout.splitlines()
    assert "  serve/llm-idle: broken now 0, 1, 2, 3" in text.stdout.splitlines()
    assert "llm-idle: 0 groups to rebuild" not in text.stdout
    assert (
        "  note: serve/llm-idle has no pod: its 4 groups are broken and left out of this plan: no drain "
        "loses them and none makes them (is the LWS controller running? a quota?)"
    ) in text.stdout.splitlines()
    half_text = drain_cli(tmp_path, "gpu-node-16", state=fleet(half_made))
    assert half_text.returncode == 0, half_text.stderr
    stalled = drain_cli(tmp_path, "gpu-node-01", state=fleet(half_made))
    assert stalled.returncode == 1, stalled.stderr
    assert "  stalled: wave 1 waits for groups with no pod (see the notes)" in stalled.stdout
    assert (
        "  note: serve/llm-xl: 4 groups (4, 5, 6, 7) with no pod are broken and left out" in half_text.stdout
    )
    document = json.loads(drain_cli(tmp_path, "--format", "json", "gpu-node-16", state=state).stdout)
    assert [p["name"] for p in document["podless"]] == ["llm-idle"]


def test_an_lws_whose_pods_all_failed_is_rebuilt_not_called_podless() -> None:
    # Failed pods are no live pods, but their groups were made: the LWS controller recreates them,
    # so the rebuild asks room for them, as it does for terminating ones.
    def all_failed(objects: list[KubeObject]) -> None:
        for obj in objects:
            if (
                obj["kind"] == "Pod"
                and obj["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name") == "llm-xl"
            ):
                obj.setdefault("status", {})["phase"] = "Failed"

    plan = plan_drain(fleet(all_failed), ["gpu-node-01"], PARAMS)
    assert [p.name for p in plan.podless] == []
    [row] = [row for row in plan.lws if row.name == "llm-xl"]
    assert (row.broken, row.lost) == (("0", "1", "2", "3"), 4)


def test_a_wave_waits_for_groups_in_their_order() -> None:
    # sorted as text it read "group 10, group 11, group 4, …"
    def twelve(objects: list[KubeObject]) -> None:
        find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["replicas"] = 12

    plan = plan_drain(fleet(twelve), ["gpu-node-01"], PARAMS)
    assert [g.group for g in plan.waves[0].waits_for] == [str(g) for g in range(4, 12)]


def test_drain_plan_lists_the_broken_groups_audit_counts(tmp_path: Path) -> None:
    # audit counted an LWS with no pod broken; drain-plan left it out of its table: one rule now
    def shapes(objects: list[KubeObject]) -> None:
        twin = copy.deepcopy(find(objects, "LeaderWorkerSet", "llm-xl"))
        twin["metadata"].update(name="llm-idle", uid="uid-llm-idle")
        twin["spec"]["replicas"] = 2
        objects.append(twin)
        find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["replicas"] = 6  # groups 4, 5: no pod
        set_ready(find(objects, "Pod", "llm-xl-2-1"), False)

    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(fleet(shapes)))
    env = clean_env(tmp_path)
    audit = subprocess.run(
        [sys.executable, "-m", "guardhook", "audit", "--format", "json", "--cluster-state", str(state)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    counted = {(g["namespace"], g["name"]): g["broken"] for g in json.loads(audit.stdout)["groups"]}
    assert counted == {XL: 3, ("serve", "llm-idle"): 2}
    for node in ("gpu-node-16", "gpu-node-01"):  # losing no group, and losing one
        document = json.loads(drain_cli(tmp_path, node, "--format", "json", state=fleet(shapes)).stdout)
        listed = {(r["namespace"], r["name"]): len(r["broken"]) for r in document["lws"]}
        assert listed == counted


def test_the_table_holds_counts_and_the_keys_follow_it(tmp_path: Path) -> None:
    # LOSING and BROKEN-NOW held group keys ("0,1") beside the count columns
    def broken_group_2(objects: list[KubeObject]) -> None:
        set_ready(find(objects, "Pod", "llm-xl-2-1"), False)

    done = drain_cli(tmp_path, "gpu-node-01", "gpu-node-05", state=fleet(broken_group_2))
    lines = done.stdout.splitlines()
    header = lines.index("  NAMESPACE  LWS     BUDGET  LOSING  BROKEN-NOW  LOST  REBUILDABLE")
    assert lines[header + 1].split() == ["serve", "llm-xl", "1", "2", "1", "3", "3"]
    assert lines[header + 2] == "  serve/llm-xl: losing groups 0, 1; broken now 2"
