"""The Helm chart on a real cluster (issue 41): `helm install`, a worker delete denied, `helm upgrade`
with a changed value while a drain evicts the fleet's pods (every eviction is answered by
guardhook: never a webhook call that fails), the certificates kept and then rotated with the
previous CA kept in every caBundle, and `helm uninstall` leaving nothing behind.

It installs and removes guardhook itself, so it runs only when asked (`GUARDHOOK_E2E_HELM=1`), apart
from the rest of e2e/ (which expects guardhook installed from manifests/), as the `helm` suite of
e2e/realcluster/run.sh runs it:

    GUARDHOOK_E2E_KUBECONFIG=$KUBECONFIG GUARDHOOK_E2E_HELM=1 GUARDHOOK_HELM=$(.ci/helm.sh) \\
      GUARDHOOK_E2E_REPLACE=1 pytest -q -rs e2e/test_helm.py

A guardhook installed from manifests/ is taken out first (`guardhook uninstall`, then its objects)
with `GUARDHOOK_E2E_REPLACE=1`, else the module skips. guardhook's image must be on the nodes
already (`GUARDHOOK_E2E_GUARDHOOK_IMAGE`, default ghcr.io/guardhook/guardhook:<version>, pulled
IfNotPresent); the fleet's pods run `GUARDHOOK_E2E_IMAGE` as in the rest of e2e/.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from guardhook import __version__

from cluster import LWS_NAME_LABEL, REPO, REQUIRE_ENV, Cluster, eventually, skip_or_fail, webhooks_answering
from conftest import KUBECONFIG_ENV, _wait_whole, e2e_cluster, fleet_manifest

CHART = REPO / "charts" / "guardhook"
RELEASE = "guardhook"
NAMESPACE = "guardhook-system"
SECRET = "guardhook-tls"
WEBHOOK_KINDS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
# What the API server says when a webhook call itself fails (no endpoints, refused, TLS, timeout).
CALL_FAILED = ("failed calling webhook", "no endpoints available", "connection refused", "x509", "deadline")


def _helm_path() -> str | None:
    path = os.environ.get("GUARDHOOK_HELM") or shutil.which("helm")
    return path if path and Path(path).is_file() else None


def _skip_reason() -> str | None:
    if not os.environ.get(KUBECONFIG_ENV):
        return f"no cluster: set {KUBECONFIG_ENV}"
    if not os.environ.get("GUARDHOOK_E2E_HELM"):
        return "GUARDHOOK_E2E_HELM=1 not set (this module installs and uninstalls guardhook itself)"
    if shutil.which("kubectl") is None:
        return "kubectl is not on PATH"
    if _helm_path() is None:
        return "no helm: GUARDHOOK_HELM=$(.ci/helm.sh)"
    return None


# Required (run.sh's helm suite), a missing part fails the tests through the `release` fixture.
pytestmark = pytest.mark.skipif(
    _skip_reason() is not None and os.environ.get(REQUIRE_ENV) != "1", reason=str(_skip_reason())
)


class Helm:
    """The release under test: helm and kubectl against the e2e cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.binary = str(_helm_path())

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, f"--kubeconfig={self.cluster.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def must(self, *args: str, timeout: float = 600) -> str:
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.cluster.must(*args, "-o", "json"))

    def secret(self) -> dict[str, bytes]:
        data = self.json("get", "secret", SECRET, "-n", NAMESPACE)["data"]
        return {k: base64.b64decode(v) for k, v in data.items()}

    def bundles(self) -> dict[str, str]:
        """caBundle per webhook entry name, over both configurations."""
        out: dict[str, str] = {}
        for kind in WEBHOOK_KINDS:
            done = self.cluster.kubectl("get", kind, "guardhook", "-o", "json")
            if done.returncode == 0:
                for hook in json.loads(done.stdout).get("webhooks") or []:
                    out[hook["name"]] = hook["clientConfig"].get("caBundle", "")
        return out


def _install_values(cluster: Cluster, source: str = "self-signed") -> list[str]:
    image = os.environ.get("GUARDHOOK_E2E_GUARDHOOK_IMAGE") or f"ghcr.io/guardhook/guardhook:{__version__}"
    repository, _, tag = image.rpartition(":")
    nodes = len(json.loads(cluster.must("get", "nodes", "-o", "json"))["items"])
    return [
        "--set", f"certs.source={source}",
        "--set", f"ha.enabled={'true' if nodes >= 2 else 'false'}",
        "--set", f"image.repository={repository}",
        "--set", f"image.tag={tag}",
    ]  # fmt: skip


def installed(
    source: str = "self-signed",
    extra: Sequence[str] = (),
    fresh: bool = False,
    wait: str = "5m",
    answer_within: float = 120,
) -> Iterator[Helm]:
    """The chart installed as RELEASE (`certs.source=source`, then the helm flags `extra`, helm
    waiting up to `wait`), the e2e fleet applied and guardhook answering through the API server
    within `answer_within` seconds; yields its Helm, then uninstalls it and the fleet. A guardhook
    installed from manifests/ is taken out first with GUARDHOOK_E2E_REPLACE=1 (else the module
    skips); a release of this chart already there is upgraded, or with `fresh` uninstalled first."""
    reason = _skip_reason()
    if reason:
        skip_or_fail(reason)
    cluster = e2e_cluster(Path(os.environ[KUBECONFIG_ENV]))
    helm = Helm(cluster)
    existing = cluster.kubectl("get", "validatingwebhookconfiguration", "guardhook", "-o", "json")
    if existing.returncode == 0:
        owner = (
            json.loads(existing.stdout)["metadata"].get("annotations", {}).get("meta.helm.sh/release-name")
        )
        if owner != RELEASE:
            if not os.environ.get("GUARDHOOK_E2E_REPLACE"):
                skip_or_fail(
                    "guardhook is installed here from manifests/ (GUARDHOOK_E2E_REPLACE=1 removes it)"
                )
            _remove_kustomize_install(cluster)
        elif fresh:
            helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "5m")
    cluster.restore = lambda: _wait_whole(cluster)
    helm.must(
        "upgrade", "--install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace",
        *_install_values(cluster, source), *extra, "--wait", "--timeout", wait, timeout=900,
    )  # fmt: skip
    cluster.must("apply", "-f", "-", stdin=fleet_manifest())
    _wait_whole(cluster)
    eventually(
        lambda: webhooks_answering(cluster), answer_within, "guardhook to answer through the API server"
    )
    yield helm
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "5m")
    cluster.kubectl("delete", "-f", "-", "--wait=false", stdin=fleet_manifest())


@pytest.fixture(scope="module")
def release() -> Iterator[Helm]:
    yield from installed()


def _remove_kustomize_install(cluster: Cluster) -> None:
    """Take out a guardhook installed from manifests/ as docs/operations.md says: `guardhook
    uninstall`, then its objects (what `kubectl delete -k` of its overlay deletes)."""
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", "uninstall", f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kinds = "clusterrole,clusterrolebinding,validatingwebhookconfiguration,mutatingwebhookconfiguration"
    cluster.must("delete", kinds, "-l", "app.kubernetes.io/name=guardhook", "--ignore-not-found")
    cluster.must("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=300)


def test_helm_install_denies_a_worker_delete(release: Helm) -> None:
    cluster = release.cluster
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--wait=false")
    assert done.returncode != 0
    assert "denied the request" in done.stderr and "[worker-delete]" in done.stderr, done.stderr
    bundles = release.bundles()
    assert "worker-delete.guardhook.io" in bundles and "group-eviction.guardhook.io" in bundles
    assert set(bundles.values()) == {base64.b64encode(release.secret()["ca.crt"]).decode()}


def _drain(cluster: Cluster, stop: threading.Event, answers: list[str]) -> None:
    """Evict the fleet's pods over and over, as `kubectl drain` does (without the cordon, which
    would keep the upgraded guardhook pod off a one-node cluster), recording each answer."""
    selector = f"{LWS_NAME_LABEL}={cluster.lws}"
    while not stop.is_set() and len(answers) < 2000:
        pods = cluster.kubectl("get", "pods", "-n", cluster.namespace, "-l", selector, "-o", "name")
        for name in pods.stdout.split():
            done = cluster.evict(name.removeprefix("pod/"), grace_period=0)
            if done.returncode == 0:
                answers.append("evicted")
            elif "NotFound" in done.stderr or "not found" in done.stderr:
                answers.append("gone")
            elif "[group-eviction]" in done.stderr:
                answers.append("refused by guardhook")
            else:
                answers.append("error: " + done.stderr.strip())
        time.sleep(0.5)


def test_helm_upgrade_under_a_concurrent_drain_keeps_certs_and_answers_every_eviction(release: Helm) -> None:
    cluster = release.cluster
    secret, bundles = release.secret(), release.bundles()
    stop, answers = threading.Event(), []  # type: ignore[var-annotated]
    drain = threading.Thread(target=_drain, args=(cluster, stop, answers), daemon=True)
    drain.start()
    try:
        time.sleep(3)
        release.must(
            "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
            "--set", "policies.worker-delete.actions={Warn}",
            "--set-string", f"podAnnotations.e2e/rollout={int(time.time())}",  # the pods are replaced too
            "--wait", "--timeout", "5m",
        )  # fmt: skip
        time.sleep(5)
    finally:
        stop.set()
        drain.join(timeout=120)
    failed = [a for a in answers if a.startswith("error") and any(s in a for s in CALL_FAILED)]
    assert answers and not failed, failed[:5]
    assert "refused by guardhook" in answers  # the drain really was judged meanwhile
    assert release.secret() == secret  # the certificates were kept
    assert release.bundles() == bundles
    cluster.restore()

    def warned() -> bool:
        done = cluster.kubectl(
            "delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server"
        )
        return done.returncode == 0 and "[worker-delete]" in done.stderr

    eventually(warned, 180, "worker-delete to warn instead of deny (the changed value)")


def test_helm_upgrade_rotation_keeps_the_previous_ca_in_every_ca_bundle(release: Helm) -> None:
    cluster = release.cluster
    before = release.secret()
    release.must(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
        "--set", "certs.selfSigned.renewBeforeDays=100000", "--wait", "--timeout", "5m",
    )  # fmt: skip
    after = release.secret()
    assert after["tls.crt"] != before["tls.crt"]
    old_ca = before["ca.crt"].split(b"-----END CERTIFICATE-----")[0]
    assert after["ca.crt"].count(b"BEGIN CERTIFICATE") == 2
    assert after["ca.crt"].split(b"-----END CERTIFICATE-----")[1].strip().startswith(old_ca.strip())
    assert set(release.bundles().values()) == {base64.b64encode(after["ca.crt"]).decode()}
    release.must(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
        "--set", "certs.selfSigned.renewBeforeDays=30", "--wait", "--timeout", "5m",
    )  # fmt: skip
    assert release.secret() == after  # not due again: kept
    eventually(
        lambda: webhooks_answering_or_warning(cluster), 180, "guardhook to answer with the new certificate"
    )


def webhooks_answering_or_warning(cluster: Cluster) -> bool:
    """guardhook answers through the API server (worker-delete is at Warn after the upgrade test)."""
    if webhooks_answering(cluster):
        return True
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    return done.returncode == 0 and "[worker-delete]" in done.stderr


def release_state(release: Helm) -> tuple[Any, ...]:
    """What a refused upgrade must leave as it was: the Deployment's generation, the configuration,
    the certificate Secret (type and data) and the release's history."""
    deployment = release.json("get", "deployment", "guardhook", "-n", NAMESPACE)
    config = release.json("get", "configmap", "guardhook-config", "-n", NAMESPACE)
    secret = release.json("get", "secret", SECRET, "-n", NAMESPACE)
    history = release.must("history", RELEASE, "-n", NAMESPACE, "-o", "json")
    return deployment["metadata"]["generation"], config["data"], secret["type"], secret.get("data"), history


def refused_source_switch(release: Helm, source: str) -> None:
    """`helm upgrade` to certs.source=`source` over the Secret the release's own source made fails
    naming the delete to run, with nothing changed, and guardhook still answers."""
    before = release_state(release)
    done = release.run(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
        "--set", f"certs.source={source}", "--wait", "--timeout", "3m",
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "a Secret's type cannot change" in done.stderr, done.stderr
    assert f"kubectl -n {NAMESPACE} delete secret {SECRET}" in done.stderr, done.stderr
    assert release_state(release) == before
    assert webhooks_answering_or_warning(release.cluster)


def test_switching_to_self_managed_certificates_is_refused_naming_the_secret_to_delete(release: Helm) -> None:
    refused_source_switch(release, "self-managed")


def test_helm_uninstall_leaves_nothing_behind(release: Helm) -> None:
    cluster = release.cluster
    release.must("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "5m")
    for kind in WEBHOOK_KINDS:
        listed = json.loads(cluster.must("get", kind, "-o", "json"))["items"]
        own = [
            c["metadata"]["name"]
            for c in listed
            if any(h["name"].endswith(".guardhook.io") for h in c.get("webhooks") or [])
        ]
        assert not own, f"{kind} left: {own}"
    for kind in ("clusterroles", "clusterrolebindings"):
        left = cluster.must("get", kind, "-l", "app.kubernetes.io/name=guardhook", "-o", "name")
        assert not left.strip(), left
        assert cluster.kubectl("get", kind, "guardhook-uninstall").returncode != 0  # the hook's, too
    left = cluster.must(
        "get", "deployment,service,configmap,secret,serviceaccount,role,rolebinding,job,poddisruptionbudget",
        "-n", NAMESPACE, "-l", "app.kubernetes.io/name=guardhook", "-o", "name",
    )  # fmt: skip
    assert not left.strip(), left
    managed = cluster.must("get", "pdb", "-A", "-l", "app.kubernetes.io/managed-by=guardhook", "-o", "name")
    assert not managed.strip(), managed  # guardhook uninstall deleted pdb-sync's PDBs
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    assert done.returncode == 0, done.stderr  # nothing judges a worker delete any more
    assert "[worker-delete]" not in done.stderr
