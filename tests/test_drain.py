"""`guardhook drain` (issue 52): drain-plan's plan carried out one whole group at a time, against a
stand-in cluster that plays the LWS controller, the scheduler and the kubelet (tests/drain_standin),
and the CLI against the fake API server serving the sample fleet."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from drain_standin import DrainFake, StandIn, lws_copy
from group_shapes import gang_objects, to_hash, to_kthena
from maker_shapes import grove_pods

from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.commands.main import main
from guardhook.planning.drain_run import CLIENT, SERVER, Drain, DrainOptions, DrainResult
from guardhook.wire import KubeObject

from fake_apiserver import running_fake

PARAMS = {"maxDisruptedGroups": 1, "ledgerTTLSeconds": 120}
NODE = "gpu-node-00"


def fleet() -> list[KubeObject]:
    return copy.deepcopy(embedded_fleet_objects())


def _shrink(obj: Any) -> None:
    """Pods of 2 GPUs, 10 cpu and 100Gi: four fit on a node."""
    if isinstance(obj, dict):
        for key in ("requests", "limits"):
            resources = obj.get(key)
            if isinstance(resources, dict) and "nvidia.com/gpu" in resources:
                resources["nvidia.com/gpu"] = "2"
                if "cpu" in resources:
                    resources.update(cpu="10", memory="100Gi")
        for value in obj.values():
            _shrink(value)
    elif isinstance(obj, list):
        for value in obj:
            _shrink(value)


def _move(objects: list[KubeObject], pod: str, node: str) -> None:
    next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == pod)["spec"]["nodeName"] = node


def two_lws() -> list[KubeObject]:
    """The fleet's LWS llm-xl and a copy llm-b (4 groups of 4 each, pods of 2 GPUs, group g's
    worker w on gpu-node-<4g+w>), with gpu-node-00 holding pods of four groups: llm-xl 0 and 1,
    llm-b 0 and 1."""
    objects = fleet()
    objects += lws_copy(objects, "llm-xl", "llm-b")
    _shrink(objects)
    _move(objects, "llm-xl-1-1", NODE)
    _move(objects, "llm-b-1-2", NODE)
    return objects


def drain(cluster: StandIn, *nodes: str, **options: Any) -> tuple[DrainResult, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    run = Drain(
        cluster,
        DrainOptions(nodes=nodes, params=PARAMS, poll_seconds=0.0, retry_seconds=0.0, **options),
        lambda kind, **fields: events.append({"event": kind, **fields}),
        sleep=lambda seconds: None,  # the stand-in moves on each time the drain lists it
    )
    return run.run(), events


def test_groups_of_two_lws_restart_once_each_never_two_broken_at_once() -> None:
    cluster = StandIn(two_lws())
    assert cluster.pods_on(NODE) == ["llm-b-0", "llm-b-1-2", "llm-xl-0", "llm-xl-1-1"]
    result, events = drain(cluster, NODE)
    assert result.drained, result.left
    assert cluster.restarts == {("llm-b", "0"): 1, ("llm-b", "1"): 1, ("llm-xl", "0"): 1, ("llm-xl", "1"): 1}
    assert cluster.evictions == []  # no pod of a group is evicted one at a time
    assert cluster.most_broken == {"llm-xl": 1, "llm-b": 1}  # the budget of 1, never more
    assert cluster.pods_on(NODE) == []
    assert cluster.cordoned == [NODE]
    rebuilt = [e["group"] for e in events if e["event"] == "rebuilt"]
    assert len(rebuilt) == 4 and len(set(rebuilt)) == 4
    assert events[-1]["event"] == "done" and events[-1]["drained"]


def test_groups_of_different_sets_are_taken_side_by_side_each_within_its_budget() -> None:
    cluster = StandIn(two_lws())
    result, _ = drain(cluster, NODE)
    assert result.drained, result.left
    assert cluster.most_broken == {"llm-xl": 1, "llm-b": 1}  # each set within its budget of 1
    assert cluster.most_broken_at_once == 2  # a group of each set rebuilding at the same time


def four_groups_on_one_node(budget: int) -> list[KubeObject]:
    """The fleet's LWS llm-xl (4 groups of 4, pods of 2 GPUs) with a pod of every group on
    gpu-node-00 and its budget (annotation guardhook.io/max-disrupted-groups) `budget`."""
    objects = fleet()
    _shrink(objects)
    for pod in ("llm-xl-1-1", "llm-xl-2-2", "llm-xl-3-3"):
        _move(objects, pod, NODE)
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == "llm-xl")
    lws["metadata"].setdefault("annotations", {})["guardhook.io/max-disrupted-groups"] = str(budget)
    return objects


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_a_set_with_budget_b_has_up_to_b_groups_taken_at_once_never_more(budget: int) -> None:
    cluster = StandIn(four_groups_on_one_node(budget))
    assert cluster.pods_on(NODE) == ["llm-xl-0", "llm-xl-1-1", "llm-xl-2-2", "llm-xl-3-3"]
    result, events = drain(cluster, NODE)
    assert result.drained, result.left
    assert cluster.restarts == {("llm-xl", str(g)): 1 for g in range(4)}
    assert cluster.most_broken == {"llm-xl": budget}  # B at once, never more
    restarts = [i for i, e in enumerate(events) if e["event"] == "group"]
    first_rebuilt = next(i for i, e in enumerate(events) if e["event"] == "rebuilt")
    assert sum(1 for i in restarts if i < first_rebuilt) == budget  # B taken before any is back


def test_sets_of_one_namespace_are_each_held_to_their_own_budget() -> None:
    # llm-xl (budget 2) and its copy llm-b (budget 1) in one namespace, each with a pod of every
    # group on gpu-node-00: each set's groups are counted against its own budget, never the other's
    objects = four_groups_on_one_node(2)
    copied = lws_copy(objects, "llm-xl", "llm-b")
    next(o for o in copied if o["kind"] == "LeaderWorkerSet")["metadata"]["annotations"][
        "guardhook.io/max-disrupted-groups"
    ] = "1"
    cluster = StandIn(objects + copied)
    result, _ = drain(cluster, NODE)
    assert result.drained, result.left
    assert cluster.restarts == {(name, str(g)): 1 for name in ("llm-xl", "llm-b") for g in range(4)}
    assert cluster.most_broken == {"llm-xl": 2, "llm-b": 1}


def test_a_larger_budget_drains_in_fewer_rounds() -> None:
    steps = {}
    for budget in (1, 2):
        cluster = StandIn(four_groups_on_one_node(budget))
        result, _ = drain(cluster, NODE)
        assert result.drained, result.left
        steps[budget] = cluster.steps
    assert steps[2] < steps[1]


def no_room() -> list[KubeObject]:
    """The fleet with gpu-node-16..18 taken by 8-GPU pods of another workload: draining
    gpu-node-00 and gpu-node-04 (a pod of llm-xl groups 0 and 1) leaves room for one group of the
    two (gpu-node-01..03, 05..07 and 19: 7 nodes of the 4 a group takes)."""
    objects = fleet()
    template = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "llm-xl-0-1")
    for node in ("gpu-node-16", "gpu-node-17", "gpu-node-18"):
        filler = copy.deepcopy(template)
        name = f"batch-{node}"
        filler["metadata"] = {
            "name": name,
            "namespace": "batch",
            "uid": name,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "batch",
                    "uid": "rs",
                    "controller": True,
                }
            ],
        }
        filler["spec"]["nodeName"] = node
        objects.append(filler)
    return objects


def test_a_group_with_no_room_is_left_in_place_and_named() -> None:
    cluster = StandIn(no_room())
    result, _ = drain(cluster, "gpu-node-00", "gpu-node-04")
    assert not result.drained
    assert cluster.restarts == {("llm-xl", "0"): 1}
    [left] = result.left
    assert left.what == "group 1 of LeaderWorkerSet serve/llm-xl"
    assert left.why.startswith("no room to rebuild it elsewhere (")
    assert cluster.pods_on("gpu-node-04") == ["llm-xl-1"]
    assert cluster.most_broken == {"llm-xl": 1}


def test_an_interrupted_drain_resumes_where_the_cluster_is() -> None:
    cluster = StandIn(two_lws())
    cluster.interrupt_after = 3  # Ctrl-C right after the cordon and the second group's restart
    with pytest.raises(KeyboardInterrupt):
        drain(cluster, NODE)
    assert sum(cluster.restarts.values()) == 2
    result, events = drain(cluster, NODE)
    assert result.drained, result.left
    assert cluster.restarts == {("llm-b", "0"): 1, ("llm-b", "1"): 1, ("llm-xl", "0"): 1, ("llm-xl", "1"): 1}
    assert cluster.most_broken == {"llm-xl": 1, "llm-b": 1}
    assert cluster.cordoned == [NODE]  # cordoned once: the second run finds it cordoned
    assert {"event": "cordon", "node": NODE, "already": True} in events


def _loose_pods(objects: list[KubeObject], node: str) -> None:
    """On `node`: a ReplicaSet pod with emptyDir data, a bare pod, a DaemonSet pod, a mirror pod."""
    template = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "llm-xl-0-1")

    def pod(name: str, owner: str | None, **extra: Any) -> KubeObject:
        made = copy.deepcopy(template)
        made["metadata"] = {"name": name, "namespace": "default", "uid": name, "labels": {"app": name}}
        if owner:
            made["metadata"]["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": owner, "name": name, "uid": name, "controller": True}
            ]
        made["metadata"].update(extra)
        made["spec"]["nodeName"] = node
        made["spec"]["containers"][0]["resources"] = {}
        return made

    web = pod("web-7d4b9c-x2x9q", "ReplicaSet")
    web["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    objects += [
        web,
        pod("debug", None),
        pod("node-exporter-abcde", "DaemonSet"),
        pod("kube-proxy-gpu-node-16", None, annotations={"kubernetes.io/config.mirror": "x"}),
    ]


def test_pods_in_no_group_are_refused_as_kubectl_drain_refuses_them() -> None:
    objects = fleet()
    _loose_pods(objects, "gpu-node-16")
    cluster = StandIn(objects)
    result, _ = drain(cluster, "gpu-node-16")
    assert sorted((item.what, item.why) for item in result.left) == [
        ("pod default/debug", "no controller manages it (use --force to delete it)"),
        ("pod default/web-7d4b9c-x2x9q", "it has emptyDir data (use --delete-emptydir-data)"),
    ]
    assert cluster.cordoned == [] and cluster.evictions == []  # refused before anything is written


def test_pods_in_no_group_are_evicted_with_429s_retried_daemonsets_and_mirrors_left() -> None:
    objects = fleet()
    _loose_pods(objects, "gpu-node-16")
    cluster = StandIn(objects)
    cluster.refuse_once = {"web-7d4b9c-x2x9q"}  # a PDB's 429, once
    result, events = drain(cluster, "gpu-node-16", force=True, delete_emptydir_data=True)
    assert result.drained, result.left
    assert cluster.evictions == ["debug", "web-7d4b9c-x2x9q"]
    assert len(set(cluster.eviction_steps)) == 1  # side by side, as kubectl drain: not one by one
    assert [e["pod"] for e in events if e["event"] == "retry"] == ["default/web-7d4b9c-x2x9q"]
    assert cluster.pods_on("gpu-node-16") == ["kube-proxy-gpu-node-16", "node-exporter-abcde"]


def test_client_dry_run_writes_nothing_and_server_dry_run_sends_dry_runs() -> None:
    cluster = StandIn(two_lws())
    result, events = drain(cluster, NODE, dry_run=CLIENT)
    assert result.drained
    assert (cluster.writes, cluster.dry_runs, sum(cluster.restarts.values())) == (0, [], 0)
    assert [e["pod"] for e in events if e["event"] == "group"] == [
        "llm-b-0",
        "llm-b-1",
        "llm-xl-0",
        "llm-xl-1",
    ]
    result, _ = drain(cluster, NODE, dry_run=SERVER)
    assert result.drained
    assert cluster.writes == 0 and sum(cluster.restarts.values()) == 0
    assert cluster.dry_runs == [
        f"cordon {NODE}",
        "delete llm-b-0",
        "delete llm-b-1",
        "delete llm-xl-0",
        "delete llm-xl-1",
    ]


# ---- the command ----------------------------------------------------------------------------------


def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running_fake() as fake:
        fake.load(fleet())
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        cases = [
            (["drain", "--kubeconfig", kubeconfig], "no node given"),
            (["drain", "--kubeconfig", kubeconfig, "no-such-node"], "unknown node: no-such-node"),
            (["drain", "--kubeconfig", kubeconfig, "-l", "a in b"], "--selector"),
            (
                ["drain", "--kubeconfig", kubeconfig, "-l", "pool=none"],
                "no node matches --selector pool=none",
            ),
            (["drain", "--kubeconfig", kubeconfig, "-l", "x=y", NODE], "not both"),
        ]
        for argv, said in cases:
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert err.startswith("guardhook drain: ") and said in err and err.count("\n") == 1, err
        assert not [r for r in fake.requests if not r.startswith("GET")]


def test_json_events_of_a_client_dry_run_through_the_kubernetes_client(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_fake() as fake:
        fake.load(fleet())
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        argv = ["drain", "--kubeconfig", kubeconfig, "-l", "example.com/nvlink-domain=nvl-0"]
        code = main([*argv, "--dry-run=client", "-o", "json"])
        assert not [r for r in fake.requests if not r.startswith("GET")]
    assert code == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0] == {
        "event": "start",
        "elapsed": events[0]["elapsed"],
        "nodes": ["gpu-node-00", "gpu-node-01", "gpu-node-02", "gpu-node-03"],
        "dryRun": "client",
    }
    assert [e["pod"] for e in events if e["event"] == "group"] == ["llm-xl-0"]
    assert events[-1]["event"] == "done" and events[-1]["drained"]


def test_text_progress_names_waves_groups_and_what_is_left(capsys: pytest.CaptureFixture[str]) -> None:
    from guardhook.commands.drain import Report

    report = Report("text", __import__("sys").stdout, 0.0)
    cluster = StandIn(no_room())
    with report:
        Drain(
            cluster,
            DrainOptions(nodes=("gpu-node-00", "gpu-node-04"), params=PARAMS, poll_seconds=0.0),
            report.event,
            sleep=lambda seconds: None,
        ).run()
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert "wave 1/2: gpu-node-00" in lines
    assert (
        "  group 0 of LeaderWorkerSet serve/llm-xl: restarting it (deleting leader llm-xl-0, foreground)"
        in lines
    )
    assert lines.count("  waiting for group 0 of LeaderWorkerSet serve/llm-xl: rebuilding elsewhere") == 1
    assert any(line.startswith("LEFT group 1 of LeaderWorkerSet serve/llm-xl: no room") for line in lines)
    assert lines[-1] == "stopped with 1 thing left (named above)"


# ---- the calls, through the kubernetes client ------------------------------------------------------


def test_the_calls_reach_the_api_server_as_kubectl_and_the_lws_controller_send_them() -> None:
    from guardhook.cluster.drain_calls import KubeDrainCalls

    with running_drain_fake() as fake:
        calls = KubeDrainCalls(fake.api_client())
        assert calls.cordon("gpu-node-01", dry_run=False).ok
        assert fake.get("nodes", "", "gpu-node-01")["spec"]["unschedulable"] is True
        assert calls.delete_foreground("serve", "llm-xl-0", None, dry_run=False).ok
        assert fake.sent[-1][2]["propagationPolicy"] == "Foreground"
        assert fake.get("pods", "serve", "llm-xl-0") is None
        assert calls.evict("serve", "llm-xl-1-1", 30, dry_run=False).ok
        method, path, body = fake.sent[-1]
        assert (method, path) == ("POST", "/api/v1/namespaces/serve/pods/llm-xl-1-1/eviction")
        assert (body["kind"], body["metadata"]["name"], body["deleteOptions"]["gracePeriodSeconds"]) == (
            "Eviction",
            "llm-xl-1-1",
            30,
        )
        assert fake.get("pods", "serve", "llm-xl-1-1") is None
        assert calls.evict("serve", "llm-xl-1-1", None, dry_run=False).gone
        fake.refuse = {"llm-xl-2-1"}
        refused = calls.evict("serve", "llm-xl-2-1", None, dry_run=False)
        assert refused.code == 429 and "disruption budget" in refused.message


def test_a_server_dry_run_sends_every_request_as_a_dry_run_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_drain_fake() as fake:
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        code = main(["drain", "--kubeconfig", kubeconfig, "--dry-run=server", "gpu-node-01"])
        sent = [(method, path.split("?")[0], "dryRun=All" in path) for method, path, _ in fake.sent]
        assert sent == [
            ("PATCH", "/api/v1/nodes/gpu-node-01", True),
            ("DELETE", "/api/v1/namespaces/serve/pods/llm-xl-0", True),
        ]
        assert fake.sent[1][2]["propagationPolicy"] == "Foreground" and fake.sent[1][2]["dryRun"] == ["All"]
        assert not fake.get("nodes", "", "gpu-node-01")["spec"].get("unschedulable")
        assert fake.get("pods", "serve", "llm-xl-0") is not None
    assert code == 0
    out = capsys.readouterr().out
    assert "draining gpu-node-01 (dry run: server)" in out
    assert (
        "group 0 of LeaderWorkerSet serve/llm-xl: restarting it (deleting leader llm-xl-0, foreground)" in out
    )


@contextmanager
def running_drain_fake() -> Iterator[DrainFake]:
    fake = DrainFake().start()
    fake.load(fleet())
    try:
        yield fake
    finally:
        fake.stop()


# ---- other group makers --------------------------------------------------------------------------


def test_a_hash_lws_group_is_restarted_by_its_generated_leader() -> None:
    objects = fleet()
    groups = to_hash(objects)
    key, leader = groups[0]
    cluster = StandIn(objects)
    result, events = drain(cluster, "gpu-node-01")  # a worker of group 0
    assert result.drained, result.left
    assert cluster.restarts == {("llm-xl", key): 1}
    assert [e["pod"] for e in events if e["event"] == "group"] == [leader]
    assert cluster.most_broken == {"llm-xl": 1}


def test_a_gang_is_evicted_whole_at_once_and_waited_for() -> None:
    base = [o for o in fleet() if o["kind"] == "Node"]
    cluster = StandIn(base + gang_objects(groups=3, size=2))
    assert cluster.pods_on("gpu-node-01") == ["train-0-0"]
    result, events = drain(cluster, "gpu-node-01")
    assert result.drained, result.left
    assert cluster.evictions == ["train-0-0", "train-0-1"]
    assert len(set(cluster.eviction_steps)) == 1  # both before the world moved on: at once
    [group] = [e for e in events if e["event"] == "group"]
    assert (group["action"], group["pods"]) == ("evict", ["train-0-0", "train-0-1"])
    assert [e["group"] for e in events if e["event"] == "rebuilt"] == [group["group"]]
    assert cluster.pods_on("gpu-node-01") == []


def test_disrupt_without_room_takes_the_group_and_the_timeout_names_it() -> None:
    cluster = StandIn(no_room())
    ticks = iter(range(10_000))
    events: list[dict[str, Any]] = []
    options = DrainOptions(
        nodes=("gpu-node-00", "gpu-node-04"),
        params=PARAMS,
        poll_seconds=0.0,
        disrupt_without_room=True,
        timeout_seconds=60,
    )
    result = Drain(
        cluster,
        options,
        lambda kind, **fields: events.append({"event": kind, **fields}),
        clock=lambda: float(next(ticks)),  # a second each time the drain looks at the clock
        sleep=lambda seconds: None,
    ).run()
    assert cluster.restarts == {("llm-xl", "0"): 1, ("llm-xl", "1"): 1}  # taken without room
    assert [(item.what, item.why) for item in result.left] == [
        ("group 1 of LeaderWorkerSet serve/llm-xl", "--timeout of 60s passed waiting for it")
    ]
    assert events[-1]["event"] == "done" and not events[-1]["drained"]


def test_durations_are_read_as_kubectl_reads_them(capsys: pytest.CaptureFixture[str]) -> None:
    from guardhook.commands.drain import duration

    assert [duration(text) for text in ("0", "90", "90s", "5m", "1h30m", "1.5h")] == [
        0,
        90,
        90,
        300,
        5400,
        5400,
    ]
    with pytest.raises(SystemExit) as exited:
        main(["drain", "--timeout", "soon", NODE])
    assert exited.value.code == 2
    assert "soon is not a duration" in capsys.readouterr().err


def test_on_a_terminal_a_progress_bar_runs_beside_the_lines() -> None:
    import io

    from guardhook.commands.drain import Report

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    with Report("text", out, 0.0) as report:
        assert report.progress is not None
        Drain(
            StandIn(two_lws()),
            DrainOptions(nodes=(NODE,), params=PARAMS, poll_seconds=0.0),
            report.event,
            sleep=lambda seconds: None,
        ).run()
        assert report.progress.tasks[0].completed == report.progress.tasks[0].total == 4
    assert "drained: 4 groups taken whole, 0 pods evicted" in out.getvalue()


def test_ctrl_c_ends_the_command_with_one_line_and_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from guardhook.planning import drain_run

    def interrupted(self: Drain) -> DrainResult:
        self.emit("start", nodes=list(self.options.nodes), dryRun="none")
        raise KeyboardInterrupt

    monkeypatch.setattr(drain_run.Drain, "run", interrupted)  # Ctrl-C mid-run
    with running_drain_fake() as fake:
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        assert main(["drain", "--kubeconfig", kubeconfig, NODE]) == 130
    err = capsys.readouterr().err
    assert err == "guardhook drain: interrupted; run it again to go on from where the cluster is\n"


def test_a_kthena_served_group_is_restarted_by_its_entry_pod() -> None:
    # The stand-in's foreground delete takes the whole group, as Kthena's recovery policies that
    # recreate (RoleRecreate, the default, and ServingGroupRecreate) recreate it when its entry pod goes.
    objects = fleet()
    to_kthena(objects)
    cluster = StandIn(objects)
    result, events = drain(cluster, "gpu-node-01")
    assert result.drained, result.left
    assert cluster.restarts == {("llm-xl", "0"): 1}
    assert [e["pod"] for e in events if e["event"] == "group"] == ["llm-xl-0-default-0-0"]


def test_an_unreachable_api_server_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    from conftest import clean_env, free_port
    from fake_apiserver import kubeconfig_text

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://127.0.0.1:{free_port()}"))
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", "drain", NODE, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(tmp_path),
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert (
        line.startswith("guardhook drain: cannot list objects from kubeconfig")
        and "Connection refused" in line
    )
    assert "Retrying" not in done.stderr


def test_the_timeout_names_every_group_it_was_waiting_for() -> None:
    ticks = iter(range(10_000))
    result = Drain(
        StandIn(four_groups_on_one_node(2)),
        DrainOptions(nodes=(NODE,), params=PARAMS, poll_seconds=0.0, timeout_seconds=3),
        lambda kind, **fields: None,
        clock=lambda: float(next(ticks)),  # a second each time the drain looks at the clock
        sleep=lambda seconds: None,
    ).run()
    assert [(item.what, item.why) for item in result.left] == [
        (f"group {g} of LeaderWorkerSet serve/llm-xl", "--timeout of 3s passed waiting for it")
        for g in range(4)
    ]


def test_a_grove_replica_is_evicted_whole_and_waited_for() -> None:
    base = [o for o in fleet() if o["kind"] == "Node"]
    pods = grove_pods()
    cluster = StandIn(base + pods)
    node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] == "disagg-1-prefill-aaaaa")
    result, events = drain(cluster, node)
    assert result.drained, result.left
    [group] = [e for e in events if e["event"] == "group"]
    assert group["group"] == "group 1 of PodCliqueSet infer/disagg"
    assert (group["action"], sorted(group["pods"])) == (
        "evict",
        ["disagg-1-decode-aaaaa", "disagg-1-decode-bbbbb", "disagg-1-prefill-aaaaa"],
    )
    assert [e["group"] for e in events if e["event"] == "rebuilt"] == [group["group"]]
