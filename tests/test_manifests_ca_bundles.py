"""Every entry gets its caBundle (issue 22): each overlay with every combination of components
renders webhook configurations whose every clientConfig trusts the serving certificate: a
caBundle that verifies it (self-managed, from `guardhook certs --patch-manifests`) or cert-manager's
CA injection annotation naming the Certificate that issues the mounted secret."""

from __future__ import annotations

import base64
import itertools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from test_manifests import MANIFESTS, by_kind, canonical, one

from guardhook.commands.main import main

from kustomize_lite import render, user_overlay

Object = dict[str, Any]
KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
HA = "ha"
SHIPPED = "leader-service-sync"
"""A component every shipped overlay lists (opt-out): never added again, never left out here."""
COMPONENTS = sorted(
    p.name for p in (MANIFESTS / "components").iterdir() if p.name not in ("cert-manager", HA, SHIPPED)
)
COMBINATIONS = [list(c) for n in range(len(COMPONENTS) + 1) for c in itertools.combinations(COMPONENTS, n)]
"""Every subset of the opt-in components (none, each alone, every pair, ..., all of them)."""
CERT_MANAGER_OVERLAYS = {"cert-manager": True, "single-node": False}
"""The cert-manager overlays, and whether each includes the `ha` component."""
INJECT = "cert-manager.io/inject-ca-from"


def _entries(objects: list[Object]) -> list[tuple[Object, Object]]:
    return [
        (config, hook)
        for kind in KINDS
        for config in by_kind(objects, kind)
        for hook in config.get("webhooks") or []
    ]


def _self_managed(tmp_path: Path, components: list[str], ha: bool = True) -> Path:
    """A copy of manifests/ whose self-managed overlay lists `components` (after `ha`, which it
    ships with, unless `ha` is False: a one-node cluster's), certificates made."""
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    _set_components(manifests, components, ha)
    assert main(["certs", "--patch-manifests", str(manifests)]) == 0
    return manifests


def _set_components(manifests: Path, components: list[str], ha: bool = True) -> None:
    path = manifests / "overlays" / "self-managed" / "kustomization.yaml"
    spec = yaml.safe_load(path.read_text())
    assert spec["components"] == [f"../../components/{c}" for c in (HA, SHIPPED)]  # as shipped
    spec["components"] = [f"../../components/{c}" for c in ([HA] if ha else []) + [SHIPPED] + components]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def _assert_own_pdb(objects: list[Object], ha: bool) -> None:
    """guardhook's own PDB and second replica exactly where the `ha` component is."""
    assert len(by_kind(objects, "PodDisruptionBudget")) == (1 if ha else 0)
    assert one(objects, "Deployment")["spec"]["replicas"] == (2 if ha else 1)


def _assert_bundles_verify(objects: list[Object], certs: Path) -> None:
    serving = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
    entries = _entries(objects)
    assert entries
    for _config, hook in entries:
        bundle = hook["clientConfig"].get("caBundle")
        assert bundle, f"{hook['name']} has no caBundle"
        cas = x509.load_pem_x509_certificates(base64.b64decode(bundle))
        serving.verify_directly_issued_by(cas[0])  # raises unless the bundle's CA signed it


@pytest.mark.parametrize("ha", [True, False], ids=["ha", "one-node"])
@pytest.mark.parametrize("components", COMBINATIONS, ids=lambda c: "+".join(c) or "base")
def test_self_managed_overlay_sets_a_verifying_ca_bundle_on_every_entry(
    tmp_path: Path, components: list[str], ha: bool
) -> None:
    manifests = _self_managed(tmp_path, components, ha)
    overlay = manifests / "overlays" / "self-managed"
    objects = render(overlay)
    _assert_bundles_verify(objects, overlay / "certs")
    _assert_own_pdb(objects, ha)
    expected = {h["name"] for _c, h in _entries(_with_components(tmp_path / "cm", components))}
    assert {h["name"] for _c, h in _entries(objects)} == expected  # nothing added, nothing lost
    if components == COMPONENTS and shutil.which("kubectl"):
        printed = subprocess.run(
            ["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60
        )
        assert printed.returncode == 0, printed.stderr
        assert canonical(list(yaml.safe_load_all(printed.stdout))) == canonical(objects)


def _with_components(folder: Path, components: list[str], overlay: str = "cert-manager") -> list[Object]:
    """The cert-manager `overlay` (or single-node) with `components` added, as a user's overlay."""
    user_overlay(
        folder, [MANIFESTS / "overlays" / overlay], [MANIFESTS / "components" / c for c in components]
    )
    return render(folder)


@pytest.mark.parametrize("overlay", sorted(CERT_MANAGER_OVERLAYS))
@pytest.mark.parametrize("components", COMBINATIONS, ids=lambda c: "+".join(c) or "base")
def test_cert_manager_overlay_injects_the_ca_into_every_configuration(
    tmp_path: Path, components: list[str], overlay: str
) -> None:
    objects = _with_components(tmp_path / "overlay", components, overlay)
    _assert_own_pdb(objects, CERT_MANAGER_OVERLAYS[overlay])
    if components == COMPONENTS and shutil.which("kubectl"):
        printed = subprocess.run(
            ["kubectl", "kustomize", str(tmp_path / "overlay")], capture_output=True, text=True, timeout=60
        )
        assert printed.returncode == 0, printed.stderr
        assert canonical(list(yaml.safe_load_all(printed.stdout))) == canonical(objects)
    serving = one(objects, "Certificate", "guardhook-serving")
    secret = serving["spec"]["secretName"]
    mounted = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "certs", "secret": {"secretName": secret}} in mounted
    entries = _entries(objects)
    assert entries
    for config, hook in entries:
        assert "caBundle" not in hook["clientConfig"]
        assert (
            config["metadata"]["annotations"][INJECT]
            == f"{serving['metadata']['namespace']}/guardhook-serving"
        )


def test_a_component_added_later_gets_its_bundle_from_keep_certs(tmp_path: Path) -> None:
    manifests = _self_managed(tmp_path, [])
    overlay = manifests / "overlays" / "self-managed"
    before = {name: (overlay / "certs" / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}
    _set_components(manifests, ["group-readiness"])
    stale = {h["name"]: h for _c, h in _entries(render(overlay))}
    assert "caBundle" not in stale["group-readiness.guardhook.io"]["clientConfig"]  # why the rerun
    assert main(["certs", "--patch-manifests", str(manifests), "--keep-certs"]) == 0
    assert {name: (overlay / "certs" / name).read_bytes() for name in before} == before
    _assert_bundles_verify(render(overlay), overlay / "certs")


def test_keep_certs_keeps_a_rotation_s_previous_ca(tmp_path: Path) -> None:
    manifests = _self_managed(tmp_path, [])
    old = (manifests / "overlays" / "self-managed" / "certs" / "ca.crt").read_bytes()
    assert main(["certs", "--patch-manifests", str(manifests), "--force"]) == 0
    new = (manifests / "overlays" / "self-managed" / "certs" / "ca.crt").read_bytes()
    _set_components(manifests, ["leader-service-deny"])
    assert main(["certs", "--patch-manifests", str(manifests), "--keep-certs"]) == 0
    objects = render(manifests / "overlays" / "self-managed")
    want = [x509.load_pem_x509_certificate(new), x509.load_pem_x509_certificate(old)]
    for _config, hook in _entries(objects):
        assert x509.load_pem_x509_certificates(base64.b64decode(hook["clientConfig"]["caBundle"])) == want


def test_keep_certs_without_certificates_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    assert main(["certs", "--patch-manifests", str(manifests), "--keep-certs"]) == 2
    assert "--keep-certs" in capsys.readouterr().err
    assert not list((manifests / "overlays" / "self-managed").glob("ca-bundle.*.yaml"))
