"""Manifest-based admission configuration (KEP-5793, beta in 1.37; issue 37 item 5): guardhook's
entries may be installed from the API server's own configuration (`*.static.k8s.io`, invisible
through the API). `audit` and `/metrics` then say "either not installed or installed from the API
server's configuration" and how to tell, the webhook server — which knows it has been called —
reports no gap once it answered a review, and `guardhook certs --static-manifests` writes the
AdmissionConfiguration and the manifests. Each case with its control."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families
from test_coverage import FLEET_NAMESPACE, namespace
from test_manifests import MANIFESTS

from guardhook.cluster.coverage import NOT_INSTALLED, coverage_gaps
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.commands.main import main
from guardhook.server.static_admission import STATIC_NAME

from conftest import Server

Object = dict[str, Any]


def other_vendor() -> list[Object]:
    """Another product's webhook configurations of both kinds (none of guardhook's entries): the
    view can read both kinds and finds no *.guardhook.io entry."""
    entry = {
        "name": "webhook.cert-manager.io",
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "cert-manager-webhook", "namespace": "cert-manager"}},
    }
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "cert-manager-webhook"},
            "webhooks": [dict(entry)],
        }
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]


def _objects() -> list[Object]:
    return [*embedded_fleet_objects(), namespace(FLEET_NAMESPACE, True), *other_vendor()]


def test_no_visible_entry_says_not_installed_or_installed_from_configuration_and_how_to_tell() -> None:
    (gap,) = [g for g in coverage_gaps(view_from_objects(_objects())) if g.kind == NOT_INSTALLED]
    assert "either not installed" in gap.message
    assert "installed from the API server's configuration" in gap.message and "*.static.k8s.io" in gap.message
    assert "guardhook_decisions_total" in gap.message
    assert "apiserver_admission_manifest_webhook_admission_duration_seconds" in gap.message
    # control: the API server is known to call guardhook (the server answered reviews): no gap
    assert not [
        g for g in coverage_gaps(view_from_objects(_objects()), called=True) if g.kind == NOT_INSTALLED
    ]


def test_audit_text_says_both(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(_objects()))
    main(["audit", "--cluster-state", str(state)])
    out = capsys.readouterr().out
    assert "not-installed" in out and "installed from the API server's configuration" in out
    assert "no policy is called by the API server\n" not in out  # no longer a flat "off"


def _gap(server: Server) -> float:
    text = server.session.get(server.url + "/metrics", timeout=10).text
    return next(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "guardhook_protection_gaps" and s.labels["gap"] == NOT_INSTALLED
    )


def test_the_webhook_server_clears_the_gap_once_the_api_server_calls_it(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(_objects()))
    server = fresh_server("--cluster-state", str(state))
    assert _gap(server) == 1  # control: no visible entry, never called
    assert server.review("/validate", "s01-worker-delete.validating")["uid"]
    assert _gap(server) == 0  # called: the entries come from the API server's configuration


# ---- guardhook certs --static-manifests ------------------------------------------------------------


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    folder = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, folder, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    return folder


def test_certs_writes_the_admission_configuration_and_static_manifests(
    manifests: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "static"
    certs = tmp_path / "certs"
    code = main(
        [
            "certs",
            "--out",
            str(certs),
            "--static-manifests",
            str(out),
            "--url",
            "https://10.0.0.20:8443",
            "--manifests",
            str(manifests),
        ]
    )
    assert code == 0
    config = yaml.safe_load((out / "admission-configuration.yaml").read_text())
    assert config["kind"] == "AdmissionConfiguration" and config["apiVersion"] == "apiserver.config.k8s.io/v1"
    dirs = {p["name"]: p["configuration"]["staticManifestsDir"] for p in config["plugins"]}
    assert dirs == {
        "ValidatingAdmissionWebhook": "/etc/kubernetes/admission/validating-webhooks/",
        "MutatingAdmissionWebhook": "/etc/kubernetes/admission/mutating-webhooks/",
    }
    assert {p["configuration"]["kind"] for p in config["plugins"]} == {"WebhookAdmissionConfiguration"}
    validating = yaml.safe_load((out / "validating-webhooks" / "guardhook.yaml").read_text())
    mutating = yaml.safe_load((out / "mutating-webhooks" / "guardhook.yaml").read_text())
    base = yaml.safe_load_all((manifests / "base" / "validating-webhook.yaml").read_text())
    base_names = [e["name"] for doc in base if doc for e in doc.get("webhooks", [])]
    assert (
        validating["metadata"]["name"]
        == mutating["metadata"]["name"]
        == STATIC_NAME
        == "guardhook.static.k8s.io"
    )
    assert [e["name"] for e in validating["webhooks"]] == base_names
    ca = (certs / "ca.crt").read_bytes()
    for entry in validating["webhooks"] + mutating["webhooks"]:
        assert set(entry["clientConfig"]) == {"url", "caBundle"}  # a Service is not allowed there
        assert base64.b64decode(entry["clientConfig"]["caBundle"]) == ca
    assert validating["webhooks"][0]["clientConfig"]["url"] == "https://10.0.0.20:8443/validate"
    assert mutating["webhooks"][0]["clientConfig"]["url"] == "https://10.0.0.20:8443/mutate"
    serving = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
    ips = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.0.0.20" in {str(ip) for ip in ips.get_values_for_type(x509.IPAddress)}
    # what the view makes of them: guardhook's entries, reachable with the serving certificate
    view = view_from_objects([*_objects(), validating, mutating])
    assert not [g for g in coverage_gaps(view, serving) if g.kind in (NOT_INSTALLED, "webhook-unreachable")]
    assert json.dumps(validating).count(".guardhook.io") == len(base_names)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--static-manifests", "X"], "--static-manifests needs --url"),
        (["--static-manifests", "X", "--url", "http://10.0.0.20"], "give https://HOST[:PORT]"),
        (["--static-manifests", "X", "--url", "https://h:1/validate"], "give https://HOST[:PORT]"),
        (["--url", "https://h"], "--url is for --static-manifests"),
        (
            ["--static-manifests", "X", "--url", "https://h", "--static-root", "rel"],
            "must be an absolute path",
        ),
    ],
)
def test_bad_static_arguments_exit_2_with_one_line(
    args: list[str], says: str, tmp_path: Path, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.replace("X", str(tmp_path / "static")) for a in args]
    assert main(["certs", "--out", str(tmp_path / "c"), "--manifests", str(manifests), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (tmp_path / "c").exists() and not (tmp_path / "static").exists()  # nothing written
