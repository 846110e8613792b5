"""The per-group PDB reconciler: desired state from the static view, the applier through the real
`kubernetes` client against the in-process fake API server (tests/fake_apiserver.py), and
`guardhook pdb-sync`."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from guardhook.admission.engine import Engine
from guardhook.cluster.kube_transport import live_view, snapshot_view
from guardhook.cluster.sources import KUBECONFIG, Source
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.pdbsync.apply import apply_plan
from guardhook.pdbsync.desired import MANAGED_BY_LABEL, plan
from guardhook.pdbsync.runner import start_background_sync
from guardhook.pdbsync.runner import sync_once as sync_round

from conftest import clean_env, free_port, start_server
from envtest import ApiServer, api_server, requires_api_server
from fake_apiserver import FakeApiServer, running_fake

P = "leaderworkerset.sigs.k8s.io/"
LWS_UID = "0210c3a2-ee71-453c-abc5-3914f5531483"


def fleet(annotated: bool = True, replicas: int = 4) -> list[dict[str, Any]]:
    """The sample fleet's LWS, its pods and the rest, with the opt-in annotation and `replicas`."""
    objects = embedded_fleet_objects()
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            obj["spec"]["replicas"] = replicas
            if annotated:
                obj["metadata"]["annotations"] = {"guardhook.io/group-pdbs": "true"}
    return objects


def user_pdb(name: str, match_labels: dict[str, str], managed: bool = False) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: "guardhook"} if managed else {}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "serve", "labels": labels, "resourceVersion": "7"},
        "spec": {"selector": {"matchLabels": match_labels}, "minAvailable": 1},
    }


def view(*extra: dict[str, Any], annotated: bool = True, replicas: int = 4) -> ClusterView:
    return view_from_objects([*fleet(annotated, replicas), *extra])


def names(pdbs: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pdbs]


def test_one_budget_per_whole_group_owned_by_the_lws() -> None:
    planned = plan(view())
    assert names(planned.create) == [f"llm-xl-group-{g}" for g in range(4)]
    first = planned.create[0]
    assert first["spec"] == {
        "selector": {"matchLabels": {P + "name": "llm-xl", P + "group-index": "0"}},
        "minAvailable": 4,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    assert first["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "llm-xl",
            "uid": LWS_UID,
            "controller": True,
        }
    ]
    assert first["metadata"]["labels"][MANAGED_BY_LABEL] == "guardhook"
    assert (planned.update, planned.delete, planned.warnings) == ([], [], [])


def test_without_the_annotation_nothing_is_planned() -> None:
    planned = plan(view(annotated=False))
    assert planned.empty
    assert planned.warnings == []


def test_a_broken_group_gets_min_available_zero() -> None:
    objects = fleet()
    worker = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "llm-xl-2-1")
    for condition in worker["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"
    budgets = {
        p["metadata"]["name"]: p["spec"]["minAvailable"] for p in plan(view_from_objects(objects)).create
    }
    assert budgets == {"llm-xl-group-0": 4, "llm-xl-group-1": 4, "llm-xl-group-2": 0, "llm-xl-group-3": 4}


def test_scale_up_adds_a_budget_for_the_new_group_which_is_still_broken() -> None:
    planned = plan(view(replicas=5))
    assert names(planned.create)[-1] == "llm-xl-group-4"
    assert planned.create[-1]["spec"]["minAvailable"] == 0  # no pods yet


def test_scale_down_and_opt_out_delete_guardhook_budgets_only() -> None:
    existing = [copy.deepcopy(p) for p in plan(view()).create]
    for pdb in existing:
        pdb["metadata"]["resourceVersion"] = "3"
    stranger = user_pdb("web", {"app": "web"})
    scaled = plan(view(*existing, stranger, replicas=2))
    assert scaled.delete == [("serve", "llm-xl-group-2"), ("serve", "llm-xl-group-3")]
    assert scaled.create == scaled.update == []
    opted_out = plan(view(*existing, stranger, annotated=False))
    assert opted_out.delete == [("serve", f"llm-xl-group-{g}") for g in range(4)]


def test_a_changed_budget_is_updated_with_its_resource_version() -> None:
    existing = [copy.deepcopy(p) for p in plan(view()).create]
    existing[1]["spec"]["minAvailable"] = 0
    existing[1]["metadata"]["resourceVersion"] = "42"
    planned = plan(view(*existing))
    assert names(planned.update) == ["llm-xl-group-1"]
    assert planned.update[0]["metadata"]["resourceVersion"] == "42"
    assert planned.update[0]["spec"]["minAvailable"] == 4
    assert planned.create == []


def test_user_budgets_that_overlap_are_never_doubled() -> None:
    overlapping = user_pdb("mine", {P + "group-index": "1", "app": "llm-xl"})
    same_name = user_pdb("llm-xl-group-2", {"app": "web"})
    planned = plan(view(overlapping, same_name))
    assert names(planned.create) == ["llm-xl-group-0", "llm-xl-group-3"]
    assert len(planned.warnings) == 2
    assert "mine" in planned.warnings[0] and "group 1" in planned.warnings[0]
    assert "not guardhook's" in planned.warnings[1]
    assert planned.delete == []


def test_a_guardhook_budget_that_comes_to_overlap_a_user_budget_is_deleted() -> None:
    existing = [copy.deepcopy(p) for p in plan(view()).create]
    planned = plan(view(*existing, user_pdb("mine", {P + "name": "llm-xl", P + "group-index": "3"})))
    assert planned.delete == [("serve", "llm-xl-group-3")]


def test_a_stale_view_plans_nothing() -> None:
    stale = view()
    stale.mark_broken("pods", now=0.0)
    stale.stale_after_seconds = 1
    planned = plan(stale)
    assert planned.empty
    assert "stale" in planned.warnings[0]


def test_every_desired_budget_passes_group_pdb_without_advice() -> None:
    engine = Engine(view(), record=False)
    for pdb in plan(view()).create:
        request = {
            "uid": "u",
            "resource": {"group": "policy", "version": "v1", "resource": "poddisruptionbudgets"},
            "operation": "CREATE",
            "namespace": "serve",
            "userInfo": {"username": "system:serviceaccount:guardhook-system:guardhook"},
            "object": pdb,
        }
        assert engine.judge(request, "validate").response == {"uid": "u", "allowed": True}


# ---- the applier, through the real kubernetes client ------------------------------------------


def policy_api(fake: FakeApiServer) -> client.PolicyV1Api:
    return client.PolicyV1Api(fake.api_client())


def test_applier_creates_updates_and_deletes_and_never_writes_user_budgets() -> None:
    with running_fake() as fake:
        api = policy_api(fake)
        fake.put("poddisruptionbudgets", user_pdb("mine", {P + "group-index": "1"}))
        outcome = apply_plan(api, plan(view(user_pdb("mine", {P + "group-index": "1"}))))
        assert outcome.created == ["serve/llm-xl-group-0", "serve/llm-xl-group-2", "serve/llm-xl-group-3"]
        assert outcome.errors == []
        assert len(outcome.skipped) == 1
        stored = fake.get("poddisruptionbudgets", "serve", "llm-xl-group-0")
        assert stored is not None
        assert stored["spec"]["minAvailable"] == 4
        assert stored["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        assert stored["metadata"]["ownerReferences"][0]["uid"] == LWS_UID

        current = [fake.get("poddisruptionbudgets", "serve", f"llm-xl-group-{g}") for g in (0, 2, 3)]
        scaled = apply_plan(api, plan(view(*[c for c in current if c], replicas=1)))
        assert scaled.deleted == ["serve/llm-xl-group-2", "serve/llm-xl-group-3"]
        assert fake.names("poddisruptionbudgets") == ["llm-xl-group-0", "mine"]
        assert all(name != "mine" for _method, _ns, _res, name in fake.writes)


def test_applier_reports_conflicts_and_missing_objects_and_carries_on() -> None:
    with running_fake() as fake:
        api = policy_api(fake)
        stale = [copy.deepcopy(p) for p in plan(view()).create]
        for pdb in stale:
            fake.put("poddisruptionbudgets", copy.deepcopy(pdb))
        stale[0]["spec"]["minAvailable"] = 1
        stale[0]["metadata"]["resourceVersion"] = "999"  # not what the fake holds: 409
        planned = plan(view(*stale, replicas=3))
        assert names(planned.update) == ["llm-xl-group-0"]
        fake.delete("poddisruptionbudgets", "serve", "llm-xl-group-3")  # already gone: 404
        outcome = apply_plan(api, planned)
        assert outcome.updated == []
        assert outcome.errors and "409" in outcome.errors[0]
        assert outcome.deleted == ["serve/llm-xl-group-3"]


# ---- guardhook pdb-sync -----------------------------------------------------------------------


def load_fleet_into(fake: FakeApiServer, replicas: int = 4) -> None:
    fake.load(o for o in fleet(replicas=replicas) if o["kind"] in ("LeaderWorkerSet", "Pod"))


def pdb_sync(kubeconfig: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "guardhook", "pdb-sync", "--kubeconfig", str(kubeconfig), *flags]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=clean_env(kubeconfig.parent)
    )


def test_pdb_sync_once_follows_scale(tmp_path: Path) -> None:
    with running_fake() as fake:
        load_fleet_into(fake)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        dry = pdb_sync(kubeconfig, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert len(json.loads(dry.stdout)["create"]) == 4
        assert fake.writes == []

        first = pdb_sync(kubeconfig, "--once")
        assert first.returncode == 0, first.stderr
        assert len(json.loads(first.stdout)["created"]) == 4
        lws = fake.get("leaderworkersets", "serve", "llm-xl")
        assert lws is not None
        fake.put("leaderworkersets", {**lws, "spec": {**lws["spec"], "replicas": 2}})
        second = pdb_sync(kubeconfig, "--once")
        assert json.loads(second.stdout)["deleted"] == ["serve/llm-xl-group-2", "serve/llm-xl-group-3"]
        assert fake.names("poddisruptionbudgets") == ["llm-xl-group-0", "llm-xl-group-1"]


def test_pdb_sync_once_reports_an_unreachable_api_server(tmp_path: Path) -> None:
    with running_fake() as fake:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    failed = pdb_sync(kubeconfig, "--once")  # the fake is gone
    assert failed.returncode == 1
    assert "cannot list" in json.loads(failed.stdout)["errors"][0]


def test_background_sync_keeps_budgets_until_stopped(tmp_path: Path) -> None:
    with running_fake() as fake:
        load_fleet_into(fake)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        api = config.new_client_from_config(config_file=str(kubeconfig))
        live = live_view(Source(KUBECONFIG, (str(kubeconfig),)), 60.0).start()
        stop = threading.Event()
        try:
            thread = start_background_sync(
                api, "guardhook-system", lambda: live.view, 0.1, elect=False, stop=stop
            )
            assert wait_for(lambda: len(fake.names("poddisruptionbudgets")) == 4)
            fake.delete("poddisruptionbudgets", "serve", "llm-xl-group-1")  # someone deletes one
            assert wait_for(lambda: "llm-xl-group-1" in fake.names("poddisruptionbudgets"))  # put back
            lws = fake.get("leaderworkersets", "serve", "llm-xl")
            assert lws is not None
            fake.put("leaderworkersets", {**lws, "spec": {**lws["spec"], "replicas": 3}})
            assert wait_for(
                lambda: "llm-xl-group-3" not in fake.names("poddisruptionbudgets")
            )  # follows scale
            stop.set()
            thread.join(timeout=10)
            assert not thread.is_alive()
        finally:
            stop.set()
            live.stop()


def wait_for(condition: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_pdb_sync_rejects_an_unusable_kubeconfig(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    done = pdb_sync(broken, "--once")
    assert done.returncode == 2
    assert done.stderr.startswith("guardhook pdb-sync: cannot use kubeconfig")


def test_pdb_sync_plans_offline_from_manifests(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": fleet()}))
    command = [sys.executable, "-m", "guardhook", "pdb-sync", "--cluster-state", str(state)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert names(json.loads(done.stdout)["create"]) == [f"llm-xl-group-{g}" for g in range(4)]


def test_serve_refuses_sync_group_pdbs_without_a_cluster(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "guardhook", "serve", "--sync-group-pdbs", "--cert-dir", str(tmp_path)]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]  # never a well-known port
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))
    assert done.returncode == 2
    assert "--sync-group-pdbs needs a live cluster" in done.stderr


def test_serve_sync_group_pdbs_plans_from_its_live_view(tmp_path: Path) -> None:
    with running_fake() as fake:
        load_fleet_into(fake)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        running = start_server(tmp_path / "serve", "--kubeconfig", str(kubeconfig), "--sync-group-pdbs")
        try:
            assert wait_for(lambda: len(fake.names("poddisruptionbudgets")) == 4)
            assert fake.get("leases", "guardhook-system", "guardhook-pdb-sync") is not None
            denied = running.review("/validate", "s18-pdb-lws-wide.validating")  # the same view judges
            assert denied["allowed"] is False
        finally:
            running.stop()


def test_two_replicas_elect_one_reconciler(tmp_path: Path) -> None:
    with running_fake() as fake:
        load_fleet_into(fake)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        command = [sys.executable, "-m", "guardhook", "pdb-sync", "--kubeconfig", str(kubeconfig)]
        command += ["--namespace", "guardhook-system", "--interval", "0.2"]
        replicas = [
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(tmp_path)
            )
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(fake.names("poddisruptionbudgets")) < 4:
                time.sleep(0.1)
            assert len(fake.names("poddisruptionbudgets")) == 4
            lease = fake.get("leases", "guardhook-system", "guardhook-pdb-sync")
            assert lease is not None and lease["spec"]["holderIdentity"]
            time.sleep(1.0)  # several rounds: the follower must not have written anything
            creates = [w for w in fake.writes if w[0] == "POST" and w[2] == "poddisruptionbudgets"]
            assert len(creates) == 4
        finally:
            for process in replicas:
                process.terminate()
            outputs = [process.communicate(timeout=30)[0].decode() for process in replicas]
        leaders = [out for out in outputs if "successfully acquired lease" in out]
        assert len(leaders) == 1, outputs


LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets"
PDB_PATH = "/apis/policy/v1/namespaces/serve/poddisruptionbudgets"


def _create_when_established(api: ApiServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        answer = api.session.post(api.url + path, json=body, timeout=30)
        if answer.status_code in (200, 201) or time.monotonic() > deadline:
            assert answer.status_code in (200, 201), answer.text
            return answer.json()
        time.sleep(0.25)  # the CRD is not served yet


def _ready_pod(api: ApiServer, group: int, worker: int) -> None:
    name = f"small-{group}" if worker == 0 else f"small-{group}-{worker}"
    labels = {P + "name": "small", P + "group-index": str(group), P + "worker-index": str(worker)}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "serve", "labels": labels, "annotations": {P + "size": "2"}},
        "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]},
    }
    api.create("/api/v1/namespaces/serve/pods", pod)
    status = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    api.merge_patch(f"/api/v1/namespaces/serve/pods/{name}/status", status)


def _budgets(api: ApiServer) -> dict[str, int]:
    return {p["metadata"]["name"]: p["spec"]["minAvailable"] for p in api.get(PDB_PATH)["items"]}


@pytest.mark.envtest
@requires_api_server
def test_budgets_appear_follow_scale_and_disappear_on_a_real_api_server(tmp_path: Path) -> None:
    with api_server(tmp_path) as api:  # the LWS CRD is installed
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serve"}}
        )
        lws = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {
                "name": "small",
                "namespace": "serve",
                "annotations": {"guardhook.io/group-pdbs": "true"},
            },
            "spec": {
                "replicas": 2,
                "leaderWorkerTemplate": {
                    "size": 2,
                    "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]}},
                },
            },
        }
        uid = _create_when_established(api, LWS_PATH, lws)["metadata"]["uid"]
        for group in (0, 1):
            for worker in (0, 1):
                _ready_pod(api, group, worker)
        kube = config.new_client_from_config(config_file=str(api.kubeconfig))
        source = Source(KUBECONFIG, (str(api.kubeconfig),))

        def sync_once(kube: Any) -> Any:
            return sync_round(kube, snapshot_view(source, 60.0))

        assert sync_once(kube).errors == []
        assert _budgets(api) == {"small-group-0": 2, "small-group-1": 2}
        owner = api.get(PDB_PATH + "/small-group-0")["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"]) == ("LeaderWorkerSet", uid)

        api.merge_patch(LWS_PATH + "/small", {"spec": {"replicas": 3}})
        sync_once(kube)
        assert _budgets(api) == {"small-group-0": 2, "small-group-1": 2, "small-group-2": 0}

        api.merge_patch(LWS_PATH + "/small", {"spec": {"replicas": 1}})
        sync_once(kube)
        assert _budgets(api) == {"small-group-0": 2}

        api.merge_patch(LWS_PATH + "/small", {"metadata": {"annotations": {"guardhook.io/group-pdbs": None}}})
        sync_once(kube)
        assert _budgets(api) == {}


def test_an_elected_reconciler_survives_an_unreachable_api_server(tmp_path: Path) -> None:
    with running_fake() as fake:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    command = [sys.executable, "-m", "guardhook", "pdb-sync", "--kubeconfig", str(kubeconfig)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(tmp_path)
    )
    failed = "election against the API server failed"
    lines: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(
        target=lambda: lines.extend(line.decode() for line in process.stdout), daemon=True
    )
    reader.start()
    try:
        # Two failed attempts (2 s apart) and still running: it campaigns on. Waited for, not
        # slept: on a busy machine the interpreter alone may take seconds to start.
        deadline = time.monotonic() + 90
        while sum(failed in line for line in list(lines)) < 2 and process.poll() is None:
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        assert process.poll() is None, "".join(lines)  # still campaigning
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=10)
    assert sum(failed in line for line in lines) >= 2
