"""The group-readiness reconciler: the plan from views, then every transition against the fake API
server through the real `kubernetes` client (tests/fake_apiserver.py): whole -> a worker NotReady ->
whole again, a worker deleted, leader containers not ready, opt-out; patches only on change,
409s, API server restarts; `guardhook group-readiness` and `serve --sync-group-readiness`."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client, config

from guardhook.cluster.kube_transport import live_view
from guardhook.cluster.sources import KUBECONFIG, Source
from guardhook.cluster.view.static import view_from_objects
from guardhook.groups.ready import GATE, OPT_IN_ANNOTATION
from guardhook.readiness.apply import PATCHED, Outcome, patch_condition
from guardhook.readiness.desired import NO_GATE, PATCH, UNCHANGED, plan
from guardhook.readiness.runner import Observer, Reconciler, start_background_sync

from conftest import clean_env, free_port, start_server
from fake_apiserver import FakeApiServer, running_fake
from readiness_helpers import Object, fleet, group_ready, pod_of, set_condition

LEADERS = [f"llm-xl-{g}" for g in range(4)]


def wait_for(condition: Callable[[], Any], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


# ---- the plan, from views ---------------------------------------------------------------------


def entries(objects: list[Object], all_lws: bool = False) -> dict[str, tuple[str, str, str]]:
    return {
        e.pod: (e.want.status, e.want.message, e.action)
        for e in plan(view_from_objects(objects), all_lws).entries
    }


def test_whole_groups_plan_true_for_every_gated_leader() -> None:
    planned = entries(fleet())
    assert planned == {name: ("True", "GroupWhole: 4 of 4 pods Ready", PATCH) for name in LEADERS}


def test_the_leader_counts_by_containers_ready_not_by_ready() -> None:
    objects = fleet()
    set_condition(pod_of(objects, "llm-xl-1"), "Ready", False)  # what the gate itself does
    assert entries(objects)["llm-xl-1"][0] == "True"
    set_condition(pod_of(objects, "llm-xl-1"), "ContainersReady", False)
    assert entries(objects)["llm-xl-1"][:2] == ("False", "LeaderContainersNotReady: llm-xl-1")


def test_reasons_name_what_is_missing() -> None:
    objects = fleet()
    set_condition(pod_of(objects, "llm-xl-0-2"), "Ready", False)
    objects.remove(pod_of(objects, "llm-xl-1-3"))
    pod_of(objects, "llm-xl-2-1")["metadata"]["deletionTimestamp"] = "2026-12-01T12:00:00Z"
    planned = entries(objects)
    assert planned["llm-xl-0"][:2] == ("False", "WorkerNotReady: llm-xl-0-2")
    assert planned["llm-xl-1"][:2] == ("False", "WorkerMissing: 3 of 4 pods")
    assert planned["llm-xl-2"][:2] == ("False", "WorkerTerminating: llm-xl-2-1")
    assert planned["llm-xl-3"][0] == "True"


def test_a_condition_already_right_is_unchanged_and_a_leader_without_gate_is_never_written() -> None:
    objects = fleet()
    set_condition(
        pod_of(objects, "llm-xl-0"), GATE, True, reason="GroupWhole", message="GroupWhole: 4 of 4 pods Ready"
    )
    del pod_of(objects, "llm-xl-3")["spec"]["readinessGates"]
    planned = entries(objects)
    assert planned["llm-xl-0"][2] == UNCHANGED
    assert planned["llm-xl-3"][2] == NO_GATE


def test_lws_that_never_opted_in_plans_nothing_and_config_can_opt_in_all() -> None:
    assert entries(fleet(opted_in=False, gated=False)) == {}
    assert entries(fleet(opted_in=False, gated=True), all_lws=True)["llm-xl-0"][2] == PATCH


def test_opt_out_releases_a_held_gate_once_and_leaves_released_ones_alone() -> None:
    objects = fleet(opted_in=False)
    set_condition(pod_of(objects, "llm-xl-0"), GATE, False, reason="WorkerNotReady", message="x")
    set_condition(pod_of(objects, "llm-xl-1"), GATE, True, reason="GroupWhole", message="y")
    planned = entries(objects)
    assert set(planned) == {"llm-xl-0", "llm-xl-2", "llm-xl-3"}  # llm-xl-1 is True already: untouched
    assert planned["llm-xl-0"][0] == "True" and planned["llm-xl-0"][1].startswith("GroupReadinessOptedOut")


def test_a_stale_view_plans_nothing() -> None:
    view = view_from_objects(fleet())
    view.mark_broken("pods", now=0.0)
    view.stale_after_seconds = 1
    planned = plan(view)
    assert planned.entries == [] and "stale" in planned.warnings[0]


# ---- against the fake API server --------------------------------------------------------------


@contextmanager
def reconciling(fake: FakeApiServer, tmp_path: Path, observer: Observer | None = None) -> Iterator[None]:
    """The reconciler (unelected) on its own live view of `fake`, stopped after the block."""
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    live = live_view(Source(KUBECONFIG, (str(kubeconfig),)), 60.0)
    stop = threading.Event()
    thread = start_background_sync(
        api, "guardhook-system", live.view, interval=0.5, elect=False, stop=stop, observer=observer
    )
    live.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
        live.stop()
        assert not thread.is_alive()


def load(fake: FakeApiServer, objects: list[Object]) -> None:
    fake.load(o for o in objects if o["kind"] in ("LeaderWorkerSet", "Pod", "Node", "StatefulSet", "Service"))


def condition(fake: FakeApiServer, name: str) -> tuple[str, str] | None:
    found = group_ready(fake.get("pods", "serve", name))
    return None if found is None else (found["status"], found["message"])


def status_writes(fake: FakeApiServer) -> list[str]:
    return [name for method, _ns, resource, name in fake.writes if resource == "pods/status"]


def edit_pod(fake: FakeApiServer, name: str, edit: Callable[[Object], Any]) -> None:
    pod = fake.get("pods", "serve", name)
    assert pod is not None
    edit(pod)
    fake.put("pods", pod)


WHOLE = ("True", "GroupWhole: 4 of 4 pods Ready")


def test_every_transition_follows_the_group(tmp_path: Path) -> None:
    delays: list[float] = []
    with running_fake() as fake, reconciling(fake, tmp_path, Observer(ready_after=delays.append)):
        load(fake, fleet())
        assert wait_for(lambda: all(condition(fake, name) == WHOLE for name in LEADERS))
        # The delay is reported just after the patch lands, so it may trail the condition a little.
        assert wait_for(lambda: len(delays) >= 4) and len(delays) == 4
        before = fake.get("pods", "serve", "llm-xl-0")
        assert before is not None
        kubelet_conditions = [c for c in before["status"]["conditions"] if c["type"] != GATE]
        assert {c["type"] for c in kubelet_conditions} >= {"Ready", "ContainersReady"}  # merged by type

        # whole -> a worker NotReady -> whole again
        edit_pod(fake, "llm-xl-0-2", lambda p: set_condition(p, "Ready", False))
        assert wait_for(lambda: condition(fake, "llm-xl-0") == ("False", "WorkerNotReady: llm-xl-0-2"))
        flipped = group_ready(fake.get("pods", "serve", "llm-xl-0"))
        edit_pod(fake, "llm-xl-0-2", lambda p: set_condition(p, "Ready", True))
        assert wait_for(lambda: condition(fake, "llm-xl-0") == WHOLE)
        back = group_ready(fake.get("pods", "serve", "llm-xl-0"))
        assert flipped and back and back["lastTransitionTime"] >= flipped["lastTransitionTime"]

        # a worker deleted
        fake.delete("pods", "serve", "llm-xl-1-3")
        assert wait_for(lambda: condition(fake, "llm-xl-1") == ("False", "WorkerMissing: 3 of 4 pods"))

        # the leader's own containers not ready
        edit_pod(fake, "llm-xl-2", lambda p: set_condition(p, "ContainersReady", False))
        assert wait_for(
            lambda: condition(fake, "llm-xl-2") == ("False", "LeaderContainersNotReady: llm-xl-2")
        )

        # nothing but gated leaders' status was ever written; workers never
        assert set(status_writes(fake)) <= set(LEADERS)
        assert not [w for w in fake.writes if w[2] != "pods/status"]
        assert condition(fake, "llm-xl-3") == WHOLE


def test_patches_only_on_change(tmp_path: Path) -> None:
    with running_fake() as fake:
        load(fake, fleet())  # listed at once: one write per leader, no intermediate states
        with reconciling(fake, tmp_path):
            assert_one_write_per_change(fake)


def assert_one_write_per_change(fake: FakeApiServer) -> None:
    assert wait_for(lambda: all(condition(fake, name) == WHOLE for name in LEADERS))
    time.sleep(1.2)  # full resyncs and the rounds our own writes wake: nothing more to write
    assert sorted(status_writes(fake)) == LEADERS
    edit_pod(fake, "llm-xl-3-1", lambda p: p["metadata"].setdefault("annotations", {}).update(x="y"))
    edit_pod(fake, "llm-xl-0-2", lambda p: set_condition(p, "Ready", False))
    assert wait_for(lambda: condition(fake, "llm-xl-0") == ("False", "WorkerNotReady: llm-xl-0-2"))
    time.sleep(1.2)  # the group llm-xl-3 is still whole: never written again
    assert sorted(status_writes(fake)) == sorted([*LEADERS, "llm-xl-0"])


def test_opt_out_removes_nothing_and_releases_held_leaders(tmp_path: Path) -> None:
    with running_fake() as fake, reconciling(fake, tmp_path):
        objects = fleet()
        set_condition(pod_of(objects, "llm-xl-0-1"), "Ready", False)
        load(fake, objects)
        assert wait_for(lambda: condition(fake, "llm-xl-0") == ("False", "WorkerNotReady: llm-xl-0-1"))
        assert wait_for(lambda: all(condition(fake, name) == WHOLE for name in LEADERS[1:]))
        writes = len(status_writes(fake))
        lws = fake.get("leaderworkersets", "serve", "llm-xl")
        assert lws is not None
        lws["metadata"]["annotations"] = {OPT_IN_ANNOTATION: "false"}
        fake.put("leaderworkersets", lws)
        assert wait_for(
            lambda: (condition(fake, "llm-xl-0") or ("", ""))[1].startswith("GroupReadinessOptedOut")
        )
        time.sleep(1.2)  # resyncs: the leaders already True are never written again
        assert status_writes(fake)[writes:] == ["llm-xl-0"]
        leader = fake.get("pods", "serve", "llm-xl-0")
        assert leader is not None and leader["spec"]["readinessGates"] == [{"conditionType": GATE}]
        assert condition(fake, "llm-xl-1") == WHOLE  # its condition stays as written


def test_survives_an_api_server_restart_and_errors(tmp_path: Path) -> None:
    with running_fake() as fake, reconciling(fake, tmp_path):
        load(fake, fleet())
        assert wait_for(lambda: all(condition(fake, name) == WHOLE for name in LEADERS))
        fake.stop()
        time.sleep(0.5)
        edit_pod(fake, "llm-xl-3-2", lambda p: set_condition(p, "Ready", False))
        fake.start()  # the same port: the watches reconnect and the reconciler catches up
        assert wait_for(lambda: condition(fake, "llm-xl-3") == ("False", "WorkerNotReady: llm-xl-3-2"), 40)
        fake.fail_with = 500
        edit_pod(fake, "llm-xl-3-2", lambda p: set_condition(p, "Ready", True))
        time.sleep(0.5)
        fake.fail_with = None
        assert wait_for(lambda: condition(fake, "llm-xl-3") == WHOLE, 40)


def test_a_leader_replaced_under_the_same_name_answers_409_and_is_planned_again() -> None:
    with running_fake() as fake:
        objects = fleet()
        load(fake, objects)
        stale_view = view_from_objects(objects)
        for name in LEADERS:  # each leader deleted and created again: same name, new uid
            edit_pod(fake, name, lambda p: p["metadata"].update(uid=str(uuid.uuid4())))
        reconciler = Reconciler(fake.api_client())
        outcome = reconciler.sync(stale_view)
        assert sorted(outcome.conflicts) == [f"serve/{name}" for name in LEADERS]
        assert status_writes(fake) == [] and fake.conflicts == 4
        fresh = view_from_objects([fake.get("pods", "serve", o["metadata"]["name"]) or o for o in objects])
        assert sorted(reconciler.sync(fresh).patched) == [f"serve/{name}" for name in LEADERS]


class _SlowBodyHandler(BaseHTTPRequestHandler):
    """Keeps connections alive and sends each PATCH answer's body in two parts, the second after a
    pause, as a large answer arrives from a real API server (TLS records in flight)."""

    protocol_version = "HTTP/1.1"
    answered: list[str]

    def do_PATCH(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answered.append(self.path)
        body = json.dumps({"kind": "Pod", "metadata": {"annotations": {"bulk": "x" * 20_000}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:100])
        self.wfile.flush()
        time.sleep(0.3)
        self.wfile.write(body[100:])

    def log_message(self, *args: Any) -> None:
        pass


def test_each_patch_answer_is_read_to_its_end_before_the_connection_is_reused() -> None:
    """On the real cluster the unread rest of one leader's PATCH answer became the next request's
    status line (BadStatusLine) on the kept-alive connection, so the next leader's write failed."""
    answered: list[str] = []
    handler = type("Handler", (_SlowBodyHandler,), {"answered": answered})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        configuration = client.Configuration()
        configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
        api = client.CoreV1Api(client.ApiClient(configuration))
        leaders = [e for e in plan(view_from_objects(fleet())).entries if e.action == PATCH][:3]
        outcome = Outcome()
        results = [patch_condition(api, entry, outcome) for entry in leaders]
        assert outcome.errors == [] and results == [PATCHED] * 3
        assert [path.split("?")[0] for path in answered] == [
            f"/api/v1/namespaces/serve/pods/{e.pod}/status" for e in leaders
        ]
    finally:
        server.shutdown()
        server.server_close()


# ---- the commands -----------------------------------------------------------------------------


def group_readiness(*flags: str, home: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "guardhook", "group-readiness", *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(home))


def test_cluster_state_prints_one_line_per_leader(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    objects = fleet(gated=False)
    set_condition(pod_of(objects, "llm-xl-2-3"), "Ready", False)
    state.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}))
    done = group_readiness("--cluster-state", str(state), home=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        f"serve/llm-xl-0 group 0: {GATE}=True (GroupWhole: 4 of 4 pods Ready) no-gate",
        f"serve/llm-xl-1 group 1: {GATE}=True (GroupWhole: 4 of 4 pods Ready) no-gate",
        f"serve/llm-xl-2 group 2: {GATE}=False (WorkerNotReady: llm-xl-2-3) no-gate",
        f"serve/llm-xl-3 group 3: {GATE}=True (GroupWhole: 4 of 4 pods Ready) no-gate",
    ]


def test_cluster_state_with_nothing_opted_in_says_so_in_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"kind": "List", "apiVersion": "v1", "items": fleet(opted_in=False, gated=False)})
    )
    done = group_readiness("--cluster-state", str(state), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f'no LeaderWorkerSet opted in (annotation {OPT_IN_ANNOTATION}: "true", '
        "or policies.group-readiness.allLeaderWorkerSets)"
    ]
    # Opted in, but no leader pods yet (the LWS alone): that is said too, naming the LWS.
    lws_only = [o for o in fleet(gated=False) if o["kind"] == "LeaderWorkerSet"]
    state.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": lws_only}))
    done = group_readiness("--cluster-state", str(state), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["no leader pods yet of the opted-in LeaderWorkerSet serve/llm-xl"]


def test_dry_run_and_once_against_a_cluster(tmp_path: Path) -> None:
    with running_fake() as fake:
        load(fake, fleet())
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        dry = group_readiness("--kubeconfig", kubeconfig, "--dry-run", home=tmp_path)
        assert dry.returncode == 0, dry.stderr
        assert len(dry.stdout.splitlines()) == 4 and all(
            line.endswith(" patch") for line in dry.stdout.splitlines()
        )
        assert fake.writes == []
        once = group_readiness("--kubeconfig", kubeconfig, "--once", home=tmp_path)
        assert once.returncode == 0, once.stderr
        assert json.loads(once.stdout)["patched"] == [f"serve/{name}" for name in LEADERS]
        again = group_readiness("--kubeconfig", kubeconfig, "--once", home=tmp_path)
        assert json.loads(again.stdout)["patched"] == []


def test_bad_kubeconfig_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    done = group_readiness("--kubeconfig", str(broken), "--once", home=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("guardhook group-readiness: cannot use kubeconfig")


def test_serve_refuses_sync_group_readiness_without_a_cluster(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "guardhook",
        "serve",
        "--sync-group-readiness",
        "--cert-dir",
        str(tmp_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),  # never a well-known port
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))
    assert done.returncode == 2
    assert "--sync-group-readiness needs a live cluster" in done.stderr


def test_serve_sync_group_readiness_sets_conditions_and_reports_metrics(tmp_path: Path) -> None:
    with running_fake() as fake:
        load(fake, fleet())
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        running = start_server(tmp_path / "serve", "--kubeconfig", str(kubeconfig), "--sync-group-readiness")
        try:
            assert wait_for(lambda: all(condition(fake, name) == WHOLE for name in LEADERS), 40)
            assert fake.get("leases", "guardhook-system", "guardhook-group-readiness") is not None
            edit_pod(fake, "llm-xl-1-1", lambda p: set_condition(p, "Ready", False))
            assert wait_for(lambda: condition(fake, "llm-xl-1") == ("False", "WorkerNotReady: llm-xl-1-1"))

            def scraped() -> str:
                return running.session.get(running.url + "/metrics", timeout=5).text

            labels = '{name="llm-xl",namespace="serve"}'
            assert wait_for(lambda: f"guardhook_group_readiness_groups_ready{labels} 3.0" in scraped())
            text = scraped()
            assert f"guardhook_group_readiness_leaders_gated{labels} 4.0" in text
            assert f"guardhook_group_readiness_conditions_behind{labels} 0.0" in text
            assert "guardhook_group_readiness_condition_delay_seconds_count 4.0" in text
            assert 'guardhook_group_readiness_patches_total{result="patched"} 5.0' in text
        finally:
            running.stop()


def test_a_view_lagging_behind_our_own_writes_causes_no_second_write() -> None:
    with running_fake() as fake:
        objects = fleet()
        load(fake, objects)
        reconciler = Reconciler(fake.api_client())
        without_worker = [o for o in objects if o["metadata"]["name"] != "llm-xl-0-1"]
        assert reconciler.sync(view_from_objects(without_worker)).patched == [f"serve/{n}" for n in LEADERS]
        # The view has not seen that write yet, and now says another False reason: held back.
        not_ready = [
            set_condition(copy.deepcopy(o), "Ready", False) if o["metadata"]["name"] == "llm-xl-0-2" else o
            for o in objects
        ]
        assert reconciler.sync(view_from_objects(not_ready)).patched == []
        # A status flip is never held back.
        assert reconciler.sync(view_from_objects(objects)).patched == ["serve/llm-xl-0"]
        # The view now shows our first write (an older one of ours): no write again.
        first = [o if o["metadata"]["name"] != "llm-xl-0" else fake_pod_after_first_write(o) for o in objects]
        assert reconciler.sync(view_from_objects(first)).patched == []
        assert status_writes(fake).count("llm-xl-0") == 2


def fake_pod_after_first_write(leader: Object) -> Object:
    return set_condition(
        copy.deepcopy(leader), GATE, False, reason="WorkerMissing", message="WorkerMissing: 3 of 4 pods"
    )


def test_the_standalone_reconciler_holds_its_lease_and_follows_the_group(tmp_path: Path) -> None:
    with running_fake() as fake:
        load(fake, fleet())
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        command = [sys.executable, "-m", "guardhook", "group-readiness", "--kubeconfig", str(kubeconfig)]
        command += ["--namespace", "guardhook-system", "--interval", "0.5"]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(tmp_path)
        )
        try:
            assert wait_for(lambda: all(condition(fake, name) == WHOLE for name in LEADERS), 40)
            lease = fake.get("leases", "guardhook-system", "guardhook-group-readiness")
            assert lease is not None and lease["spec"]["holderIdentity"]
            edit_pod(fake, "llm-xl-2-2", lambda p: set_condition(p, "Ready", False))
            assert wait_for(lambda: condition(fake, "llm-xl-2") == ("False", "WorkerNotReady: llm-xl-2-2"))
        finally:
            process.terminate()
            output = process.communicate(timeout=30)[0].decode()
        assert "successfully acquired lease" in output


def test_without_a_cluster_it_refuses_the_sample_fleet(tmp_path: Path) -> None:
    done = group_readiness("--dry-run", home=tmp_path)
    assert done.returncode == 2 and "group-readiness" in done.stderr and not done.stdout
