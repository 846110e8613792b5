"""`guardhook uninstall` (issue 22) against the fake API server: it removes guardhook's webhook
configurations first, stops the Deployment, deletes the per-group PDBs guardhook wrote and releases
every held readiness gate, leaves everything else alone, and a second run finds nothing to do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_manifests import MANIFESTS

from guardhook.commands import uninstall
from guardhook.commands.main import main
from guardhook.config import default_config
from guardhook.floor.export import export_floor
from guardhook.groups.ready import GATE

from fake_apiserver import FakeApiServer, running_fake
from kustomize_lite import render
from readiness_helpers import fleet, group_ready, pod_of, set_condition

Object = dict[str, Any]
NAMESPACE = "guardhook-system"
LEADERS = ["llm-xl-0", "llm-xl-1", "llm-xl-2", "llm-xl-3"]


def pdb(name: str, managed: bool) -> Object:
    labels = {"app.kubernetes.io/managed-by": "guardhook"} if managed else {"team": "serving"}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "serve", "labels": labels},
        "spec": {
            "minAvailable": 4,
            "selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/group-index": "0"}},
        },
    }


def installed() -> list[Object]:
    """The sample fleet opted in to group readiness and per-group PDBs, with guardhook installed."""
    objects = fleet(opted_in=True, gated=True)
    set_condition(
        pod_of(objects, "llm-xl-0"), GATE, True, reason="GroupReady", message="GroupReady: 4 of 4 pods"
    )
    set_condition(pod_of(objects, "llm-xl-1"), GATE, False, reason="WorkerNotReady", message="x")
    objects += [pdb("llm-xl-group-0", True), pdb("llm-xl-group-1", True), pdb("serving-budget", False)]
    install = render(MANIFESTS)
    objects += [o for o in install if o["kind"].endswith("WebhookConfiguration") or o["kind"] == "Deployment"]
    other = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "someone-else"},
        "webhooks": [{"name": "check.example.com", "clientConfig": {"url": "https://example.com"}}],
    }
    other_policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "someone-elses-policy"},
        "spec": {"validations": [{"expression": "true"}]},
    }
    return [*objects, other, *export_floor(default_config()).objects, other_policy]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    with running_fake() as fake:
        fake.load(installed())
        yield fake, fake.write_kubeconfig(tmp_path / "kubeconfig")


def test_dry_run_lists_the_steps_in_order_and_changes_nothing(
    cluster: tuple[FakeApiServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = cluster
    assert main(["uninstall", "--kubeconfig", str(kubeconfig), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:6] == [
        "Would do:",
        "  1. delete MutatingWebhookConfiguration guardhook",
        "  1. delete ValidatingWebhookConfiguration guardhook",
        f"  2. scale Deployment {NAMESPACE}/guardhook to 0 replicas",
        "  3. delete PodDisruptionBudget serve/llm-xl-group-0",
        "  3. delete PodDisruptionBudget serve/llm-xl-group-1",
    ]
    releases = [line for line in out if line.startswith("  4. release")]
    assert releases == [
        f"  4. release pod serve/{name} (guardhook.io/group-ready=True)" for name in LEADERS[1:]
    ]
    floor = [line for line in out if line.startswith("  5. ")]
    assert floor == [  # bindings first: a policy left without its binding enforces nothing
        f"  5. delete {kind} guardhook-floor-{policy}"
        for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy")
        for policy in ("group-pdb", "group-spec", "worker-delete")
    ]
    assert out[-1].startswith("Then: left for `kubectl delete -k")
    assert fake.writes == []


def test_uninstall_leaves_nothing_that_blocks_a_drain_or_holds_a_leader(
    cluster: tuple[FakeApiServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = cluster
    assert main(["uninstall", "--kubeconfig", str(kubeconfig)]) == 0
    out = capsys.readouterr().out
    assert "still there" not in out and "error:" not in out
    assert fake.names("validatingwebhookconfigurations") == ["someone-else"]
    assert fake.names("mutatingwebhookconfigurations") == []
    assert fake.names("poddisruptionbudgets") == ["serving-budget"]
    assert fake.names("validatingadmissionpolicies") == ["someone-elses-policy"]
    assert fake.names("validatingadmissionpolicybindings") == []
    deployment = fake.get("deployments", NAMESPACE, "guardhook")
    assert deployment is not None and deployment["spec"]["replicas"] == 0
    for name in LEADERS:
        condition = group_ready(fake.get("pods", "serve", name))
        assert condition is not None and condition["status"] == "True", name
    assert group_ready(fake.get("pods", "serve", "llm-xl-0"))["reason"] == "GroupReady"  # not rewritten
    assert group_ready(fake.get("pods", "serve", "llm-xl-1"))["reason"] == "GuardhookUninstalled"
    # Webhooks go first: nothing else was written before both configurations were deleted.
    methods = [w[0] + " " + w[2] for w in fake.writes]
    assert methods[:2] == ["DELETE mutatingwebhookconfigurations", "DELETE validatingwebhookconfigurations"]
    # A second run finds nothing to do.
    assert main(["uninstall", "--kubeconfig", str(kubeconfig), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["left"] == [] and document["errors"] == []
    assert document["steps"] == [
        {
            "step": 2,
            "kind": "Deployment",
            "name": f"{NAMESPACE}/guardhook",
            "action": "scale-to-zero",
            "result": "done",
        }
    ]


def test_what_is_still_there_afterwards_is_reported_and_exits_1(
    cluster: tuple[FakeApiServer, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, kubeconfig = cluster
    real_apply = uninstall.apply_uninstall

    def apply_then_a_reconciler_writes_again(api: Any, planned: Any, **kwargs: Any) -> list[str]:
        errors = real_apply(api, planned, **kwargs)
        fake.put("poddisruptionbudgets", pdb("llm-xl-group-0", True))  # a pdb-sync not yet stopped
        return errors

    monkeypatch.setattr(uninstall, "apply_uninstall", apply_then_a_reconciler_writes_again)
    assert main(["uninstall", "--kubeconfig", str(kubeconfig)]) == 1
    assert "still there (run it again): PodDisruptionBudget serve/llm-xl-group-0\n" in capsys.readouterr().out
    monkeypatch.setattr(uninstall, "apply_uninstall", real_apply)
    assert main(["uninstall", "--kubeconfig", str(kubeconfig)]) == 0  # run again: done
    assert fake.names("poddisruptionbudgets") == ["serving-budget"]


def test_offline_manifests_give_the_plan_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(installed()))
    assert main(["uninstall", "--cluster-state", str(state)]) == 0
    assert capsys.readouterr().out.startswith(
        "Would do:\n  1. delete MutatingWebhookConfiguration guardhook\n"
    )


def test_without_a_cluster_it_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["uninstall"]) == 2
    assert "uninstall: no cluster configured" in capsys.readouterr().err


def test_json_steps_are_objects_with_their_result(
    cluster: tuple[FakeApiServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, kubeconfig = cluster
    assert main(["uninstall", "--kubeconfig", str(kubeconfig), "--format", "json", "--dry-run"]) == 0
    planned = json.loads(capsys.readouterr().out)["steps"]
    assert planned[:2] == [
        {
            "step": 1,
            "kind": "MutatingWebhookConfiguration",
            "name": "guardhook",
            "action": "delete",
            "result": "planned",
        },
        {
            "step": 1,
            "kind": "ValidatingWebhookConfiguration",
            "name": "guardhook",
            "action": "delete",
            "result": "planned",
        },
    ]
    assert {
        "step": 3,
        "kind": "PodDisruptionBudget",
        "name": "serve/llm-xl-group-0",
        "action": "delete",
        "result": "planned",
    } in planned
    assert main(["uninstall", "--kubeconfig", str(kubeconfig), "--format", "json"]) == 0
    done = json.loads(capsys.readouterr().out)["steps"]
    assert [step["result"] for step in done] == ["done"] * len(planned)
    assert [{**step, "result": "planned"} for step in done] == planned


def test_dry_run_of_a_cluster_state_without_the_deployment_does_not_name_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all([o for o in installed() if o["kind"] != "Deployment"]))
    assert main(["uninstall", "--cluster-state", str(state), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"  2. no Deployment {NAMESPACE}/guardhook in the cluster state\n" in out
    assert "scale Deployment" not in out
    assert main(["uninstall", "--cluster-state", str(state), "--format", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [s for s in steps if s["kind"] == "Deployment"] == []


def guardhook_pod(name: str) -> Object:
    """A guardhook pod in its preStop (terminating), labelled as the Deployment selects."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": "guardhook"},
            "deletionTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {"containers": [{"name": "guardhook", "image": "guardhook"}]},
    }


def test_uninstall_waits_for_guardhook_pods_to_stop_before_releasing_gates(
    cluster: tuple[FakeApiServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # A pod still in its preStop holds the readiness Lease and would set a released leader's
    # condition back to False: the gates are released only once guardhook's pods are gone.
    import threading

    fake, kubeconfig = cluster
    fake.put("pods", guardhook_pod("guardhook-abc"))
    released_before_gone: list[bool] = []

    def kubelet_finishes_the_pod() -> None:
        while not any(w[2] == "deployments" for w in fake.writes):  # scaled to 0
            threading.Event().wait(0.05)
        threading.Event().wait(1.5)  # the preStop delay, shortened
        released_before_gone.append(any(w[2] == "pods/status" for w in fake.writes))
        fake.delete("pods", NAMESPACE, "guardhook-abc")

    kubelet = threading.Thread(target=kubelet_finishes_the_pod, daemon=True)
    kubelet.start()
    assert main(["uninstall", "--kubeconfig", str(kubeconfig), "--wait", "30"]) == 0
    kubelet.join(timeout=30)
    assert released_before_gone == [False]
    for name in LEADERS:
        assert group_ready(fake.get("pods", "serve", name))["status"] == "True", name
    assert "still" not in capsys.readouterr().out


def test_guardhook_pods_that_do_not_stop_in_time_exit_1_naming_them(
    cluster: tuple[FakeApiServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fake, kubeconfig = cluster
    fake.put("pods", guardhook_pod("guardhook-stuck"))
    assert main(["uninstall", "--kubeconfig", str(kubeconfig), "--wait", "1"]) == 1
    out = capsys.readouterr().out
    assert f"Deployment {NAMESPACE}/guardhook: pods still stopping after 1 s (guardhook-stuck)" in out
    assert "run it again" in out
