"""The chart's default certificates are the ones guardhook manages itself (issue 49): an empty
Secret, no caBundle and no cert-manager object or annotation in the render, the Deployment running
`serve --manage-certs` with the values' durations and a start-up probe that waits for the mounted
certificate, and RBAC that names the one Secret and guardhook's own webhook configurations."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from helm_chart import NAMESPACE, template

from guardhook.commands.main import build_parser

Object = dict[str, Any]
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def _one(objects: list[Object], kind: str, name: str) -> Object:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _container(objects: list[Object]) -> Object:
    (container,) = _one(objects, "Deployment", "guardhook")["spec"]["template"]["spec"]["containers"]
    return container


def test_the_default_ships_an_empty_secret_and_no_ca_bundle(tmp_path: Path) -> None:
    objects = template(tmp_path)
    secret = _one(objects, "Secret", "guardhook-tls")
    assert secret["type"] == "Opaque" and "data" not in secret and "stringData" not in secret
    assert not [o for o in objects if o["apiVersion"].startswith("cert-manager.io/")]
    entries = [h for o in objects if o["kind"] in WEBHOOK_KINDS for h in o.get("webhooks") or []]
    assert len(entries) >= 11
    assert all("caBundle" not in h["clientConfig"] for h in entries)  # the controller sets them
    for obj in objects:
        if obj["kind"] in WEBHOOK_KINDS:
            assert "cert-manager.io/inject-ca-from" not in (obj["metadata"].get("annotations") or {})


def test_the_deployment_manages_its_certificates_with_the_values(tmp_path: Path) -> None:
    values = {"certs": {"selfManaged": {"validity": "2160h", "caValidity": "43800h", "renewBefore": "360h"}}}
    objects = template(tmp_path, values)
    container = _container(objects)
    managed = [
        a
        for a in container["args"]
        if a.startswith(("--manage-certs", "--ca-bundle", "--cert-v", "--cert-r", "--ca-v"))
    ]
    assert managed == [
        "--manage-certs=guardhook-tls",
        "--ca-bundle-webhook=guardhook",
        "--cert-validity=2160h",
        "--ca-validity=43800h",
        "--cert-renew-before=360h",
    ]
    args = [a.replace("$(POD_NAMESPACE)", NAMESPACE) for a in container["args"]]  # as the kubelet expands it
    serve = build_parser().parse_args(args)  # guardhook itself reads them
    assert isinstance(serve, argparse.Namespace) and serve.manage_certs == "guardhook-tls"
    assert serve.cert_renew_before.days == 15
    probe = container["startupProbe"]
    assert probe["httpGet"]["path"] == "/healthz"
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 180  # the kubelet's mount delay
    assert {"name": "certs", "secret": {"secretName": "guardhook-tls"}} in _one(
        objects, "Deployment", "guardhook"
    )["spec"]["template"]["spec"]["volumes"]


def test_other_sources_neither_manage_certificates_nor_wait_for_them(tmp_path: Path) -> None:
    for source in ("cert-manager", "self-signed"):
        objects = template(tmp_path, {"certs": {"source": source}})
        container = _container(objects)
        assert not [a for a in container["args"] if a.startswith("--manage-certs")]
        assert "startupProbe" not in container
        assert not [o for o in objects if o["metadata"]["name"] == "guardhook-certs"]


def test_rbac_names_the_one_secret_and_guardhooks_own_webhook_configurations(tmp_path: Path) -> None:
    objects = template(tmp_path)
    role = _one(objects, "Role", "guardhook-certs")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["guardhook-tls"],
            "verbs": ["get", "update"],
        }
    ]
    cluster_role = _one(objects, "ClusterRole", "guardhook-certs")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
            "resourceNames": ["guardhook"],
            "verbs": ["get", "patch"],
        }
    ]
    for kind, name in (("RoleBinding", "guardhook-certs"), ("ClusterRoleBinding", "guardhook-certs")):
        binding = _one(objects, kind, name)
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "guardhook", "namespace": NAMESPACE}
        ]
    # no other grant of Secrets: the view reads none
    grants = [
        rule
        for o in objects
        if o["kind"] in ("Role", "ClusterRole") and o["metadata"]["name"] != "guardhook-uninstall"
        for rule in o["rules"]
        if "secrets" in rule["resources"]
    ]
    assert grants == role["rules"]
