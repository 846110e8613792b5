"""Issue 38: leader-service holds for Services and InferencePools that arrive with, before or long
before their LWS — admission judges from the LWS spec at any replicas and never passes silently
when its view may not know the LWS; the leader-service-sync reconciler narrows (or reports) what
admission could not see. Reviews are built from the captured s12-s17 Service reviews; the
reconciler is run against the fake API server, for real requests."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from prometheus_client import CollectorRegistry

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.pools import PoolListing
from guardhook.cluster.selectors import from_map
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import LEADERWORKERSETS, SERVICES, ClusterView
from guardhook.commands.main import main
from guardhook.config import build_config
from guardhook.groups.reach import reach, reach_any_replicas
from guardhook.leadersync.apply import CONFLICT, PATCHED, apply_plan
from guardhook.leadersync.desired import CANNOT_NARROW, OPTED_OUT, PATCH, REPORT, plan
from guardhook.leadersync.runner import Observer, Reconciler
from guardhook.server.metrics import LeaderServiceSyncMetrics

from conftest import load_review
from fake_apiserver import running_fake
from helpers import find

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
OPT_OUT = {"guardhook.io/leader-service": "ignore"}
RECONCILER = "leader-service-sync"


# ---- builders -------------------------------------------------------------------------------


def fleet_lws(
    replicas: int | None = None, worker_app: str | None = None, **annotations: str
) -> dict[str, Any]:
    """The sample fleet's LWS serve/llm-xl (leaders and workers labelled app: llm-xl), changed."""
    lws = copy.deepcopy(find(embedded_fleet_objects(), "LeaderWorkerSet", "llm-xl"))
    if replicas is not None:
        lws["spec"]["replicas"] = replicas
    if worker_app is not None:
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["app"] = worker_app
    if annotations:
        lws["metadata"].setdefault("annotations", {}).update(annotations)
    lws.pop("status", None)
    return lws


def service(review: str = "s12-service-app-selector", **annotations: str) -> dict[str, Any]:
    """The Service of a captured review as the API server stores it (a clusterIP allocated, unless
    the review's Service is headless)."""
    obj = copy.deepcopy(load_review(review + ".mutating")["request"]["object"])
    obj["metadata"].pop("managedFields", None)
    obj["metadata"]["resourceVersion"] = "1"
    obj["spec"].setdefault("clusterIP", "10.96.0.42")
    if annotations:
        obj["metadata"]["annotations"] = dict(annotations)
    return obj


def opted_out_service(name: str = "kept") -> dict[str, Any]:
    """The s12 Service under another name, annotated guardhook.io/leader-service: ignore."""
    obj = service(**OPT_OUT)
    obj["metadata"]["name"] = name
    return obj


def service_request(review: str = "s12-service-app-selector", **annotations: str) -> dict[str, Any]:
    """A CREATE request of a captured Service review, with `annotations` on its object."""
    request = copy.deepcopy(load_review(review + ".mutating")["request"])
    if annotations:
        request["object"]["metadata"]["annotations"] = dict(annotations)
    return request


def pool(name: str = "llm-xl-pool") -> dict[str, Any]:
    """An `inference.networking.k8s.io/v1` InferencePool selecting app: llm-xl in serve."""
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": name, "namespace": "serve", "resourceVersion": "1"},
        "spec": {
            "selector": {"matchLabels": {"app": "llm-xl"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "epp", "port": {"number": 9002}},
        },
    }


def view_of(*objects: dict[str, Any]) -> ClusterView:
    """A synced view holding exactly `objects`."""
    return view_from_objects([copy.deepcopy(o) for o in objects])


def config(*actions: str, **more: Any) -> Any:
    return build_config({"policies": {"leader-service": {"actions": list(actions), **more}}})


def engine(view: ClusterView, *actions: str) -> Engine:
    return Engine(view, config(*(actions or ("Mutate",))), record=False)


def warnings_of(response: dict[str, Any]) -> list[str]:
    return [w for w in response.get("warnings", []) if w.startswith("[leader-service]")]


def patched_selector(request: dict[str, Any], response: dict[str, Any]) -> dict[str, str]:
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(request["object"], ops)["spec"]["selector"]


# ---- reach from the spec -----------------------------------------------------------------------


def test_reach_from_the_spec_at_any_replicas_sees_an_lws_at_zero() -> None:
    lws = LeaderWorkerSet(fleet_lws(replicas=0))
    selector = from_map({"app": "llm-xl"})
    assert not reach(selector, lws).workers  # the pods that exist now: none
    assert reach_any_replicas(selector, lws).workers  # the pods its spec creates once scaled
    # a group index beyond spec.replicas is one a scale-up creates
    named = from_map({"app": "llm-xl", "leaderworkerset.sigs.k8s.io/group-index": "7"})
    assert reach_any_replicas(named, LeaderWorkerSet(fleet_lws(replicas=2))).workers
    assert not reach(named, LeaderWorkerSet(fleet_lws(replicas=2))).workers


# ---- admission ---------------------------------------------------------------------------------


def test_admission_narrows_a_service_of_an_lws_at_zero_replicas() -> None:
    request = service_request()
    response = engine(view_of(fleet_lws(replicas=0))).judge(request, "mutate").response
    assert patched_selector(request, response) == {"app": "llm-xl", WORKER_INDEX: "0"}


def test_admission_on_an_unsynced_view_warns_naming_the_service_and_the_reconciler() -> None:
    view = ClusterView(source="live")  # never synced: it may not hold the LWS yet
    view.upsert(LEADERWORKERSETS, fleet_lws())
    response = engine(view).judge(service_request(), "mutate").response
    assert response["allowed"] is True and "patch" not in response
    (warning,) = [w for w in warnings_of(response) if RECONCILER in w]
    assert "Service serve/llm-xl-api" in warning


def test_admission_when_lws_were_not_served_warns_instead_of_passing() -> None:
    view = view_of(service("s17-service-unrelated"))
    view.mark_unreadable(LEADERWORKERSETS)  # the CRD was not installed when last asked
    response = engine(view).judge(service_request(), "mutate").response
    assert "patch" not in response
    (warning,) = warnings_of(response)
    assert "Service serve/llm-xl-api" in warning and RECONCILER in warning
    assert "did not serve LeaderWorkerSets" in warning


def test_admission_of_a_selector_naming_an_lws_the_view_lacks_warns() -> None:
    request = service_request()
    request["object"]["spec"]["selector"] = {NAME_LABEL: "llm-new"}
    response = engine(view_of(fleet_lws())).judge(request, "mutate").response
    assert "patch" not in response
    (warning,) = warnings_of(response)
    assert "no LeaderWorkerSet serve/llm-new" in warning and RECONCILER in warning


def test_admission_of_lws_pod_labels_in_a_namespace_without_lws_warns() -> None:
    request = service_request()
    request["object"]["spec"]["selector"] = {"leaderworkerset.sigs.k8s.io/group-index": "0"}
    response = engine(view_of(service("s17-service-unrelated"))).judge(request, "mutate").response
    (warning,) = warnings_of(response)
    assert "holds no LeaderWorkerSet in serve" in warning


def test_admission_of_an_ordinary_service_with_every_lws_known_stays_silent() -> None:
    response = engine(view_of(fleet_lws())).judge(service_request("s17-service-unrelated"), "mutate").response
    assert "patch" not in response and not warnings_of(response)


def test_admission_leaves_an_opted_out_service_with_a_warning() -> None:
    response = engine(view_of(fleet_lws())).judge(service_request(**OPT_OUT), "mutate").response
    assert "patch" not in response
    (warning,) = warnings_of(response)
    assert "guardhook.io/leader-service" in warning and "llm-xl" in warning


# ---- the plan ----------------------------------------------------------------------------------


def test_a_service_created_before_its_lws_is_patched_once_the_lws_is_seen() -> None:
    assert plan(view_of(service()), [], config("Mutate")).entries == []  # no LWS yet
    (entry,) = plan(view_of(service(), fleet_lws()), [], config("Mutate")).entries
    assert (entry.state, entry.subject, entry.lws) == (PATCH, "Service serve/llm-xl-api", ("llm-xl",))
    assert entry.patch[0] == {"op": "test", "path": "/spec/selector", "value": {"app": "llm-xl"}}
    narrowed = jsonpatch.apply_patch(service(), list(entry.patch))
    assert narrowed["spec"]["selector"] == {"app": "llm-xl", WORKER_INDEX: "0"}
    assert plan(view_of(narrowed, fleet_lws()), [], config("Mutate")).entries == []  # idempotent


def test_replicas_zero_and_scale_from_zero_are_planned_from_the_spec() -> None:
    (entry,) = plan(view_of(service(), fleet_lws(replicas=0)), [], config("Mutate")).entries
    assert entry.state == PATCH


def test_a_template_change_that_makes_workers_reachable_is_planned() -> None:
    before = view_of(service(), fleet_lws(worker_app="shard"))
    assert plan(before, [], config("Mutate")).entries == []  # only the leaders carry app: llm-xl
    after = view_of(service(), fleet_lws(worker_app="llm-xl"))
    assert [e.state for e in plan(after, [], config("Mutate")).entries] == [PATCH]


def test_headless_pinned_and_unrelated_services_are_never_planned() -> None:
    headless = service("s15-service-headless")
    headless["spec"]["clusterIP"] = "None"
    others = (headless, service("s14-service-worker-index-0"), service("s17-service-unrelated"))
    assert plan(view_of(fleet_lws(), *others), [], config("Mutate")).entries == []


def test_a_data_parallel_lws_is_never_narrowed() -> None:
    lws = fleet_lws(**{"guardhook.io/serving-pods": "all"})
    assert plan(view_of(service(), lws), [], config("Mutate")).entries == []


def test_an_opted_out_service_is_reported_not_patched() -> None:
    (entry,) = plan(view_of(service(**OPT_OUT), fleet_lws()), [], config("Mutate")).entries
    assert (entry.state, entry.patch) == (OPTED_OUT, ())


@pytest.mark.parametrize("action", ["Deny", "Warn", "Audit"])
def test_validating_actions_report_instead_of_patching(action: str) -> None:
    (entry,) = plan(view_of(service(), fleet_lws()), [], config(action)).entries
    assert (entry.state, entry.patch) == (REPORT, ())
    assert "does not run as Mutate" in entry.why


def test_a_selector_pinning_a_worker_is_reported_as_cannot_narrow() -> None:
    pinned = service()
    pinned["spec"]["selector"] = {"app": "llm-xl", WORKER_INDEX: "2"}
    (entry,) = plan(view_of(pinned, fleet_lws()), [], config("Mutate")).entries
    assert entry.state == CANNOT_NARROW and "worker-index=2" in entry.why


def test_an_inference_pool_is_patched_at_its_matchlabels() -> None:
    (entry,) = plan(view_of(fleet_lws()), [pool()], config("Mutate")).entries
    assert entry.subject == "InferencePool serve/llm-xl-pool"
    narrowed = jsonpatch.apply_patch(pool(), list(entry.patch))
    assert narrowed["spec"]["selector"]["matchLabels"] == {"app": "llm-xl", WORKER_INDEX: "0"}


def test_a_stale_view_plans_nothing_and_an_exempt_namespace_is_left_alone() -> None:
    unsynced = ClusterView(source="live")
    unsynced.upsert(LEADERWORKERSETS, fleet_lws())
    unsynced.upsert(SERVICES, service())
    stale = plan(unsynced, [], config("Mutate"))
    assert stale.entries == [] and stale.warnings
    exempt = config("Mutate", exemptions={"namespaces": ["serve"]})
    assert plan(view_of(service(), fleet_lws()), [], exempt).entries == []


# ---- the reconciler: waking, and real requests to the fake API server --------------------------


def test_lws_and_service_changes_wake_a_round_pod_changes_do_not() -> None:
    view = view_of(service())
    reconciler = Reconciler(None, lambda: config("Mutate"))
    reconciler.watch(view)
    assert not reconciler.wake.is_set()
    view.upsert(LEADERWORKERSETS, fleet_lws(replicas=0))  # an LWS appears
    assert reconciler.wake.is_set()
    reconciler.wake.clear()
    view.upsert(LEADERWORKERSETS, fleet_lws(replicas=2))  # scaled from 0
    assert reconciler.wake.is_set()
    reconciler.wake.clear()
    view.upsert(SERVICES, service("s17-service-unrelated"))
    assert reconciler.wake.is_set()


def _once(kubeconfig: str, *extra: str) -> int:
    return main(["leader-service-sync", "--kubeconfig", kubeconfig, "--once", *extra])


def test_the_reconciler_narrows_a_service_created_before_its_lws_for_real(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_fake(unserved={"inference.networking.x-k8s.io/v1alpha2"}) as fake:
        fake.put("services", service())
        fake.put("services", service("s17-service-unrelated"))
        fake.put("inferencepools", pool())
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        assert _once(kubeconfig) == 0  # no LWS yet: nothing to narrow
        assert fake.writes == []
        fake.put("leaderworkersets", fleet_lws(replicas=0))  # arrives later, with no groups
        capsys.readouterr()
        assert _once(kubeconfig) == 0
        outcome = json.loads(capsys.readouterr().out)
        assert sorted(outcome["patched"]) == ["InferencePool serve/llm-xl-pool", "Service serve/llm-xl-api"]
        narrowed = fake.get("services", "serve", "llm-xl-api")
        assert narrowed is not None and narrowed["spec"]["selector"] == {"app": "llm-xl", WORKER_INDEX: "0"}
        patched_pool = fake.get("inferencepools", "serve", "llm-xl-pool")
        assert patched_pool is not None
        assert patched_pool["spec"]["selector"]["matchLabels"][WORKER_INDEX] == "0"
        assert (fake.get("services", "serve", "web") or {})["spec"]["selector"] == {"app": "web"}
        writes = list(fake.writes)
        assert _once(kubeconfig) == 0  # idempotent: nothing more to do
        assert fake.writes == writes
    assert sorted(w[2] for w in writes) == ["inferencepools", "services"]


def test_under_deny_the_reconciler_reports_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("policies:\n  leader-service: {actions: [Deny]}\n")
    with running_fake(unserved={"inferencepools"}) as fake:
        fake.load([fleet_lws()])
        fake.put("services", service())
        fake.put("services", opted_out_service())
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        capsys.readouterr()
        assert _once(kubeconfig, "--config", str(path)) == 0
        assert fake.writes == []
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["patched"] == []
    reported = " ".join(outcome["unnarrowed"])
    assert "report Service serve/llm-xl-api" in reported and "opted-out Service serve/kept" in reported


def test_a_selector_changed_since_the_plan_is_a_conflict_not_an_overwrite(tmp_path: Path) -> None:
    with running_fake() as fake:
        fake.put("services", service())
        planned = plan(view_of(service(), fleet_lws()), [], config("Mutate"))
        changed = service()
        changed["spec"]["selector"] = {"app": "llm-xl", "tier": "gold"}
        fake.put("services", changed)  # someone changed it after the view saw it
        results: list[tuple[str, str]] = []
        outcome = apply_plan(fake.api_client(), planned, lambda kind, result: results.append((kind, result)))
        assert results == [("Service", CONFLICT)] and outcome.conflicts == ["Service serve/llm-xl-api"]
        kept = fake.get("services", "serve", "llm-xl-api") or {}
        assert kept["spec"]["selector"] == changed["spec"]["selector"]


def test_every_change_and_what_is_left_are_counted_for_metrics(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = LeaderServiceSyncMetrics(registry)
    with running_fake() as fake:
        fake.put("services", service())
        fake.put("services", opted_out_service())
        reconciler = Reconciler(
            fake.api_client(),
            lambda: config("Mutate"),
            Observer(patched=metrics.patched, unnarrowed=metrics.unnarrowed),
            pools=lambda: PoolListing(pools=[pool()]),
        )
        fake.put("inferencepools", pool())
        outcome = reconciler.sync(view_of(service(), opted_out_service(), fleet_lws()))
    assert sorted(outcome.patched) == ["InferencePool serve/llm-xl-pool", "Service serve/llm-xl-api"]
    sample = registry.get_sample_value
    assert sample("guardhook_leader_service_sync_patches_total", {"kind": "Service", "result": PATCHED}) == 1
    assert (
        sample("guardhook_leader_service_sync_patches_total", {"kind": "InferencePool", "result": PATCHED})
        == 1
    )
    assert sample("guardhook_leader_service_unnarrowed", {"kind": "Service", "reason": OPTED_OUT}) == 1


# ---- audit -------------------------------------------------------------------------------------


def test_audit_lists_what_is_still_unnarrowed_and_why() -> None:
    import io

    from guardhook.commands.audit import audit, render_json, render_text
    from guardhook.commands.scan import Located

    objects = [Located("cluster", o) for o in (fleet_lws(replicas=0), service(), opted_out_service(), pool())]
    result = audit(objects, config("Deny"))
    text = io.StringIO()
    render_text(result, text)
    section = (
        text.getvalue().split("Unnarrowed Services and InferencePools (3):\n")[1].split("Protection gaps")[0]
    )
    assert "InferencePool serve/llm-xl-pool (LeaderWorkerSet llm-xl): reported only" in section
    assert "Service serve/kept (LeaderWorkerSet llm-xl): opted out" in section
    assert "Service serve/llm-xl-api (LeaderWorkerSet llm-xl): reported only" in section
    document = io.StringIO()
    render_json(result, document)
    states = {e["name"]: e["state"] for e in json.loads(document.getvalue())["unnarrowed"]}
    assert states == {"llm-xl-pool": "reported only", "kept": "opted out", "llm-xl-api": "reported only"}


# ---- the running reconciler: woken by the live view, not by its period -------------------------


def test_the_running_reconciler_is_woken_by_an_lws_appearing_and_a_template_change(tmp_path: Path) -> None:
    import threading
    import time

    from kubernetes import config as kube_config

    from guardhook.cluster.kube_transport import live_view
    from guardhook.cluster.sources import KUBECONFIG, Source
    from guardhook.leadersync.runner import start_background_sync

    def wait_for(condition: Any, seconds: float = 20.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not condition():
            time.sleep(0.02)
        return bool(condition())

    def selector_of(fake: Any, name: str) -> dict[str, str]:
        return dict((fake.get("services", "serve", name) or {})["spec"]["selector"])

    rounds: list[bool] = []  # per round: whether the view held LWS serve/other then
    other = service()
    other["metadata"]["name"] = "other-api"
    other["spec"]["selector"] = {"app": "other"}
    other_lws = fleet_lws(worker_app="shard")
    other_lws["metadata"] |= {"name": "other", "uid": "u-other"}
    other_lws["spec"]["leaderWorkerTemplate"].pop("leaderTemplate")
    with running_fake(unserved={"inferencepools"}) as fake:
        fake.put("services", service())
        fake.put("services", other)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        api = kube_config.new_client_from_config(config_file=str(kubeconfig))
        live = live_view(Source(KUBECONFIG, (str(kubeconfig),)), 60.0)
        stop = threading.Event()
        observer = Observer(
            unnarrowed=lambda counts: rounds.append(live.view.lws("serve", "other") is not None)
        )
        # a period far longer than the test: only a woken round can narrow anything
        thread = start_background_sync(
            api, "guardhook-system", live.view, lambda: config("Mutate"), 3600.0, False, stop, observer
        )
        live.start()
        try:
            assert wait_for(lambda: bool(rounds))  # the first round, after the view synced
            fake.put("leaderworkersets", fleet_lws(replicas=0))  # the LWS appears, with no groups
            assert wait_for(lambda: selector_of(fake, "llm-xl-api").get(WORKER_INDEX) == "0")
            fake.put("leaderworkersets", other_lws)  # its workers are labelled app: shard
            assert wait_for(lambda: any(rounds))  # a round ran with it in the view
            assert WORKER_INDEX not in selector_of(fake, "other-api")
            changed = copy.deepcopy(other_lws)
            changed["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["app"] = "other"
            fake.put("leaderworkersets", changed)  # a template change: now its pods carry app: other
            assert wait_for(lambda: selector_of(fake, "other-api").get(WORKER_INDEX) == "0")
        finally:
            stop.set()
            thread.join(timeout=10)
            live.stop()
        assert not thread.is_alive()


def test_a_replica_that_stops_reconciling_stops_reporting_unnarrowed_objects() -> None:
    import threading

    registry = CollectorRegistry()
    metrics = LeaderServiceSyncMetrics(registry)
    view = view_of(service(**OPT_OUT), fleet_lws())
    reconciler = Reconciler(None, lambda: config("Mutate"), Observer(unnarrowed=metrics.unnarrowed))
    reconciler._report(reconciler.plan(view))  # a round's report, as the holder of the Lease
    labels = {"kind": "Service", "reason": OPTED_OUT}
    assert registry.get_sample_value("guardhook_leader_service_unnarrowed", labels) == 1
    stopped = threading.Event()
    stopped.set()  # the Lease is lost: the loop returns at once
    reconciler.run_until(lambda: view, stopped, 3600.0)
    assert registry.get_sample_value("guardhook_leader_service_unnarrowed", labels) == 0


def test_the_standalone_command_holds_its_lease_and_narrows_a_service_created_after_it_started(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys
    import time

    from conftest import clean_env

    def narrowed(fake: Any, name: str) -> bool:
        return WORKER_INDEX in (fake.get("services", "serve", name) or {}).get("spec", {}).get("selector", {})

    def wait_for(condition: Any, seconds: float = 60.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not condition():
            time.sleep(0.1)
        return bool(condition())

    later = service()
    later["metadata"]["name"] = "later-api"
    with running_fake(unserved={"inferencepools"}) as fake:
        fake.load([fleet_lws()])
        fake.put("services", service())
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        command = [sys.executable, "-m", "guardhook", RECONCILER, "--kubeconfig", str(kubeconfig)]
        command += ["--namespace", "guardhook-system", "--interval", "3600"]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(tmp_path)
        )
        try:
            assert wait_for(lambda: narrowed(fake, "llm-xl-api"))  # the first round
            lease = fake.get("leases", "guardhook-system", "guardhook-leader-service-sync")
            assert lease is not None and lease["spec"]["holderIdentity"]
            fake.put("services", later)  # the watch wakes a round: the period is an hour
            assert wait_for(lambda: narrowed(fake, "later-api"))
        finally:
            process.terminate()
            output = process.communicate(timeout=30)[0].decode()
        assert "successfully acquired lease" in output


def test_a_service_with_a_made_up_lws_owner_is_still_planned() -> None:
    # Issue 48: an ownerReference naming the LWS with another uid does not take the Service out of
    # the reconciler's reach; the LWS's own (its uid) does.
    lws = fleet_lws()
    for uid, planned in (("made-up", [PATCH]), (lws["metadata"]["uid"], [])):
        forged = service()
        forged["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "name": "llm-xl",
                "uid": uid,
            }
        ]
        assert [e.state for e in plan(view_of(forged, lws), [], config("Mutate")).entries] == planned, uid


def _in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    moved = copy.deepcopy(obj)
    moved["metadata"]["namespace"] = namespace
    return moved


@pytest.mark.parametrize("namespace", ["kube-system", "kube-node-lease", "guardhook-system"])
def test_nothing_is_planned_in_a_namespace_the_webhooks_leave_out(namespace: str) -> None:
    # Issue 48: with the fleet in kube-system the dry run planned to patch a Service there, where
    # admission never judges anything (every entry's namespaceSelector leaves it out).
    objects = (_in_namespace(service(), namespace), _in_namespace(fleet_lws(), namespace))
    assert plan(view_of(*objects), [], config("Mutate")).entries == []
    assert [e.state for e in plan(view_of(service(), fleet_lws()), [], config("Mutate")).entries] == [PATCH]


def test_sync_namespaces_confine_the_reconciler() -> None:
    view = view_of(service(), fleet_lws())
    assert plan(view, [], config("Mutate", syncNamespaces=["other"])).entries == []
    (entry,) = plan(view, [], config("Mutate", syncNamespaces=["serve"])).entries
    assert entry.state == PATCH


def test_sync_namespaces_must_name_namespaces() -> None:
    with pytest.raises(ValueError, match="syncNamespaces"):
        config("Mutate", syncNamespaces=[""])
