"""The Helm chart's default, self-managed certificates on a real cluster (issue 49): `helm install`
with no cert-manager (the post-install check waits until guardhook answers), a CA and serving
certificate rotated by guardhook's own controller under a short validity while evictions are sent
(none refused for a certificate reason: the caBundle keeps the previous CA, every replica reloads
its mounted Secret), `helm test`, an upgrade with a mistyped value refused before anything changes,
and `helm uninstall --no-hooks` followed by the documented `guardhook uninstall` leaving nothing.

Run as the `helm` suite of e2e/realcluster/run.sh runs e2e/test_helm.py (same settings:
`GUARDHOOK_E2E_HELM=1`, `GUARDHOOK_E2E_REPLACE=1`, the image already on the nodes).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from cryptography import x509
from test_helm import (
    CALL_FAILED,
    CHART,
    NAMESPACE,
    RELEASE,
    WEBHOOK_KINDS,
    Helm,
    _drain,
    _skip_reason,
    installed,
    refused_source_switch,
    release_state,
)

from guardhook.pki import issued_by

from cluster import REQUIRE_ENV, eventually, webhooks_answering

pytestmark = [
    pytest.mark.skipif(
        _skip_reason() is not None and os.environ.get(REQUIRE_ENV) != "1", reason=str(_skip_reason())
    ),
    # the install (with the first mount of the certificate) and the rotation window take minutes
    pytest.mark.timeout(900),
]
# Short enough to rotate during the test: the serving certificate every 45 s (renewed at 45 s of its
# 3m15s), the CA every minute (at 1 minute of its 3.5); each with 2.5 minutes left when renewed, as
# much room for the kubelet's refresh of the mounted Secret (its sync period, 1 minute) as the
# 4m/6m/2m30s this test first used, and each CA still valid 2.5 minutes after the next replaces it.
SHORT = [
    "--set", "certs.selfManaged.validity=3m15s",
    "--set", "certs.selfManaged.caValidity=3m30s",
    "--set", "certs.selfManaged.renewBefore=2m30s",
]  # fmt: skip


@pytest.fixture(scope="module")
def release() -> Iterator[Helm]:
    # fresh: a release with other certificates is uninstalled first (a Secret's type cannot change)
    yield from installed("self-managed", SHORT, fresh=True, wait="8m", answer_within=180)


def test_install_makes_the_certificates_and_sets_every_ca_bundle(release: Helm) -> None:
    secret = release.secret()
    assert set(secret) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    bundles = release.bundles()
    assert "group-eviction.guardhook.io" in bundles and "worker-delete.guardhook.io" in bundles
    assert set(bundles.values()) == {base64.b64encode(secret["ca.crt"]).decode()}
    # the post-install check ran and succeeded (hook-succeeded deletes its Job)
    assert release.cluster.kubectl("get", "job", "guardhook-startup-check", "-n", NAMESPACE).returncode != 0


ROTATION_BOUND_SECONDS = 330.0
"""The rotation window's bound (the fixed window this test watched before it ended on the events): a
CA rotation (at 1 minute) and the replicas' reload of its serving certificate (the kubelet's refresh
of the mount, about a minute) well within it."""


def _ca(pem_data: bytes) -> bytes:
    """The first (current) certificate of a CA bundle, as PEM."""
    return pem_data.split(b"-----END CERTIFICATE-----")[0]


def _served(pod_ip: str, port: int) -> bytes | None:
    """The serving certificate (DER) the replica at `pod_ip` presents, or None when it does not
    answer (the host reaches pod IPs on the one-node real cluster)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((pod_ip, port), timeout=5) as raw, context.wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)
    except OSError:
        return None


def _every_replica_serves_a_certificate_of(release: Helm, ca_pems: set[bytes]) -> bool:
    """Whether every running guardhook replica presents a serving certificate signed by one of
    `ca_pems` (it has reloaded the mounted Secret since the first of them was made)."""
    cas = [x509.load_pem_x509_certificate(pem + b"-----END CERTIFICATE-----\n") for pem in ca_pems]
    pods = release.json("get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=guardhook")["items"]
    running = [p for p in pods if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP")]
    if not running:
        return False
    for pod in running:
        port = next(
            c["containerPort"]
            for container in pod["spec"]["containers"]
            for c in container.get("ports") or []
            if c.get("name") == "https"
        )
        der = _served(pod["status"]["podIP"], port)
        if der is None:
            return False
        if not any(issued_by(x509.load_der_x509_certificate(der), ca) for ca in cas):
            return False
    return True


def test_rotation_under_evictions_refuses_none_for_a_certificate_reason(release: Helm) -> None:
    cluster = release.cluster
    stop, answers = threading.Event(), []  # type: ignore[var-annotated]
    drain = threading.Thread(target=_drain, args=(cluster, stop, answers), daemon=True)
    seen: list[dict[str, bytes]] = [release.secret()]
    first_ca = _ca(seen[0]["ca.crt"])
    drain.start()
    try:
        # Evictions go on until the CA has rotated, the serving certificate at least twice, and every
        # replica presents a serving certificate of a new CA (it reloaded the mount), then for a few
        # more answers: the waits end on the events, bounded by the old fixed window.
        deadline = time.monotonic() + ROTATION_BOUND_SECONDS
        while time.monotonic() < deadline:
            time.sleep(5)
            current = release.secret()
            if current != seen[-1]:
                seen.append(current)
            rotated_cas = {_ca(s["ca.crt"]) for s in seen} - {first_ca}
            if (
                len({s["tls.crt"] for s in seen}) >= 3
                and rotated_cas
                and _every_replica_serves_a_certificate_of(release, rotated_cas)
            ):
                break
        reloaded_at = len(answers)
        eventually(lambda: len(answers) >= reloaded_at + 10, 60, "evictions answered after the reload")
    finally:
        stop.set()
        drain.join(timeout=120)
    failed = [a for a in answers if a.startswith("error") and any(s in a for s in CALL_FAILED)]
    assert answers and not failed, failed[:5]
    assert {"evicted", "refused by guardhook"} & set(answers)  # guardhook judged them meanwhile
    serving = {s["tls.crt"] for s in seen}
    cas = {_ca(s["ca.crt"]) for s in seen}
    assert len(serving) >= 3, f"{len(serving)} serving certificates seen"
    assert len(cas) >= 2, "no CA rotation seen"
    # (with the CA now in the Secret: one that rotated meanwhile may be served already)
    later = (cas | {_ca(release.secret()["ca.crt"])}) - {first_ca}
    assert _every_replica_serves_a_certificate_of(release, later), "a replica kept the first CA's"
    rotated = next(s for s in seen if _ca(s["ca.crt"]) != first_ca)
    assert rotated["ca.crt"].count(b"BEGIN CERTIFICATE") == 2  # the previous CA kept in the bundle
    eventually(
        lambda: set(release.bundles().values()) == {base64.b64encode(release.secret()["ca.crt"]).decode()},
        30,
        "every caBundle to be the Secret's bundle",
    )
    cluster.restore()


def test_helm_test_sends_a_review_to_the_installed_webhook(release: Helm) -> None:
    out = release.must("test", RELEASE, "-n", NAMESPACE, "--timeout", "3m")
    assert "Succeeded" in out, out


def test_an_upgrade_with_a_mistyped_value_is_refused_before_anything_changes(release: Helm) -> None:
    before = release_state(release)
    done = release.run(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values",
        "--set", "policies.group-eviction.budgett=2", "--wait", "--timeout", "3m",
    )  # fmt: skip
    assert done.returncode != 0 and "budgett" in done.stderr, done.stderr
    assert release_state(release) == before
    assert webhooks_answering(release.cluster)


def test_switching_to_self_signed_certificates_is_refused_naming_the_secret_to_delete(release: Helm) -> None:
    refused_source_switch(release, "self-signed")


def test_uninstall_without_hooks_then_guardhook_uninstall_leaves_nothing(release: Helm) -> None:
    cluster = release.cluster
    release.must("uninstall", RELEASE, "-n", NAMESPACE, "--no-hooks", "--wait", "--timeout", "5m")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "guardhook",
            "uninstall",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--namespace={NAMESPACE}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
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
    left = cluster.must(
        "get", "deployment,service,configmap,secret,serviceaccount,role,rolebinding,job,poddisruptionbudget",
        "-n", NAMESPACE, "-l", "app.kubernetes.io/name=guardhook", "-o", "name",
    )  # fmt: skip
    assert not left.strip(), left
    assert cluster.kubectl("get", "secret", "guardhook-tls", "-n", NAMESPACE).returncode != 0
    managed = cluster.must("get", "pdb", "-A", "-l", "app.kubernetes.io/managed-by=guardhook", "-o", "name")
    assert not managed.strip(), managed
    gone = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    assert gone.returncode == 0 and "[worker-delete]" not in gone.stderr, gone.stderr
