"""The e2e suite's harness, without a cluster: it skips fast with its reason when none is
configured, detects incomplete KUBEBUILDER_ASSETS, and rewrites the manifests' webhook
configurations to `url:` client configs for bare API server mode."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from kustomize_lite import render

sys.path.insert(0, str(REPO / "e2e"))

from bare import _collection, _strip, fleet_objects, missing_assets, url_client_configs  # noqa: E402


def test_e2e_suite_skips_every_test_with_the_reason_when_no_cluster_is_configured(tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "kube-apiserver").write_text("#!/bin/sh\nexit 1\n")
    (assets / "kube-apiserver").chmod(0o755)
    # No cluster configured, and the unit suite's "envtest binaries required" (.ci/run) not carried in.
    unset = ("GUARDHOOK_E2E_KUBECONFIG", "GUARDHOOK_REQUIRE_API_SERVER")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["KUBEBUILDER_ASSETS"] = str(assets)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(REPO / "e2e")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " skipped" in done.stdout and " passed" not in done.stdout and " failed" not in done.stdout
    assert f"KUBEBUILDER_ASSETS={assets} has no executable etcd" in done.stdout


def test_a_required_e2e_run_fails_instead_of_skipping_when_no_cluster_is_configured() -> None:
    """run.sh sets GUARDHOOK_E2E_REQUIRE=1: its hash and helm suites once passed as "1 skipped" on a
    cluster they could not use; they must fail, naming why."""
    unset = ("GUARDHOOK_E2E_KUBECONFIG", "GUARDHOOK_REQUIRE_API_SERVER", "KUBEBUILDER_ASSETS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(GUARDHOOK_E2E_REQUIRE="1", GUARDHOOK_E2E_HELM="1")
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "e2e/test_group_makers.py::test_a_hash_lws_is_drained_one_group_at_a_time",
            "e2e/test_helm.py::test_helm_install_denies_a_worker_delete",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert summary.startswith("2 errors in "), done.stdout
    assert "Failed: no cluster: set GUARDHOOK_E2E_KUBECONFIG (GUARDHOOK_E2E_REQUIRE=1)" in done.stdout
    assert "(KUBEBUILDER_ASSETS is not set) (GUARDHOOK_E2E_REQUIRE=1)" in done.stdout


def test_missing_assets_names_what_is_missing(tmp_path: Path) -> None:
    assert missing_assets({}) == "KUBEBUILDER_ASSETS is not set"
    for name in ("etcd", "kube-apiserver"):
        (tmp_path / name).write_text("#!/bin/sh\n")
    assert "no executable etcd or kube-apiserver" in str(
        missing_assets({"KUBEBUILDER_ASSETS": str(tmp_path)})
    )
    for name in ("etcd", "kube-apiserver"):
        (tmp_path / name).chmod(0o755)
    if missing_assets({"KUBEBUILDER_ASSETS": str(tmp_path)}) is not None:
        pytest.skip("kubectl is not on PATH")


def test_bare_mode_registers_the_manifests_webhooks_by_url() -> None:
    configurations = [
        obj for obj in render(REPO / "manifests") if obj["kind"].endswith("WebhookConfiguration")
    ]
    rewritten = url_client_configs(configurations, "https://127.0.0.1:9443", b"PEM")
    assert len(rewritten) == 2
    for before, after in zip(configurations, rewritten, strict=True):
        assert "annotations" not in after["metadata"]  # no cert-manager injection outside a cluster
        assert [h["name"] for h in after["webhooks"]] == [h["name"] for h in before["webhooks"]]
        for old, new in zip(before["webhooks"], after["webhooks"], strict=True):
            path = old["clientConfig"]["service"]["path"]
            assert new["clientConfig"] == {
                "url": f"https://127.0.0.1:9443{path}",
                "caBundle": base64.b64encode(b"PEM").decode(),
            }
            assert {k: v for k, v in new.items() if k != "clientConfig"} == {
                k: v for k, v in old.items() if k != "clientConfig"
            }


def test_bare_mode_creates_the_sample_fleet_at_the_right_rest_paths() -> None:
    paths = {}
    for captured in fleet_objects():
        stripped = _strip(captured)
        assert not {"uid", "resourceVersion", "creationTimestamp", "managedFields"} & set(
            stripped["metadata"]
        )
        assert stripped["metadata"]["name"] == captured["metadata"]["name"]
        paths[captured["kind"]] = _collection(captured)
    assert paths == {
        "Node": "/api/v1/nodes",
        "LeaderWorkerSet": "/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets",
        "StatefulSet": "/apis/apps/v1/namespaces/serve/statefulsets",
        "Pod": "/api/v1/namespaces/serve/pods",
        "Service": "/api/v1/namespaces/serve/services",
    }
    kinds = [captured["kind"] for captured in fleet_objects()]
    assert kinds.index("Node") < kinds.index("LeaderWorkerSet") < kinds.index("Pod")  # pods need their nodes
