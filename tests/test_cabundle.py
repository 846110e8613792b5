"""`guardhook certs` and the caBundle patches, in-process (the subprocess runs are in test_manifests)."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from guardhook.commands.main import main
from guardhook.server.cabundle import base_webhook_configurations, bundle_with_previous, ca_bundle_patch
from guardhook.server.certs import generate

from conftest import REPO


def test_certs_without_flags_writes_certs_folder_and_prints_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["certs"]) == 0
    ca = (tmp_path / "certs" / "ca.crt").read_bytes()
    assert capsys.readouterr().out.strip() == base64.b64encode(ca).decode()
    assert not (tmp_path / "overlays").exists()


def test_patch_manifests_honours_an_explicit_out_folder(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "manifests", manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    out = tmp_path / "elsewhere"
    assert main(["certs", "--patch-manifests", str(manifests), "--out", str(out), "--namespace", "gh"]) == 0
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    assert not (manifests / "overlays" / "self-managed" / "certs").exists()
    patch = yaml.safe_load((manifests / "overlays" / "self-managed" / "ca-bundle.mutating.yaml").read_text())
    (mutating,) = [c for c in base_webhook_configurations(manifests) if c.kind.startswith("Mutating")]
    assert patch == ca_bundle_patch((out / "ca.crt").read_bytes(), mutating)
    assert [hook["name"] for hook in patch["webhooks"]] == ["leader-service.guardhook.io"]
    value = patch["webhooks"][0]["clientConfig"]["caBundle"]
    assert x509.load_pem_x509_certificates(base64.b64decode(value)) == [ca]
    serving = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "guardhook.gh.svc" in sans.get_values_for_type(x509.DNSName)


def test_bundle_keeps_only_the_newest_previous_ca(tmp_path: Path) -> None:
    cas = [generate(tmp_path / str(i), ["x"]).ca.read_bytes() for i in range(3)]
    assert bundle_with_previous(cas[0], None) == cas[0]
    assert bundle_with_previous(cas[0], cas[0]) == cas[0]
    two = bundle_with_previous(cas[1], cas[0])
    three = bundle_with_previous(cas[2], two)  # the bundle grows by one CA, never more
    loaded = x509.load_pem_x509_certificates(three)
    assert loaded == [x509.load_pem_x509_certificate(cas[2]), x509.load_pem_x509_certificate(cas[1])]


def test_certs_refuses_to_overwrite_certificates_in_use_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["certs"]) == 0
    folder = tmp_path / "certs"
    before = {name: (folder / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}
    capsys.readouterr()
    assert main(["certs"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "guardhook certs: certs already holds ca.crt, tls.crt, tls.key, which a running webhook or an "
        "applied overlay may be using; pass --force to replace them\n"
    )  # no --keep-certs hint: without patches to write, --keep-certs is refused
    assert {name: (folder / name).read_bytes() for name in before} == before  # untouched
    (folder / "ca.crt").unlink()
    assert main(["certs"]) == 2  # one file left is still a certificate in use
    assert main(["certs", "--force"]) == 0
    assert (folder / "tls.key").read_bytes() != before["tls.key"]


def test_patch_manifests_refuses_to_replace_the_overlay_certificates_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "manifests", manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    assert main(["certs", "--patch-manifests", str(manifests)]) == 0
    patch = manifests / "overlays" / "self-managed" / "ca-bundle.validating.yaml"
    written = patch.read_bytes()
    assert main(["certs", "--patch-manifests", str(manifests)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert patch.read_bytes() == written  # neither the certificates nor the patches changed


@pytest.mark.parametrize(
    ("overlay", "component", "says"),
    [
        ("- a\n", None, "not one kustomization"),
        ("a: 1\n---\nb: 2\n", None, "not one kustomization"),
        ("components: [5]\n", None, "components must be a list"),
        ("components: ../../components/pdb-sync\n", None, "components must be a list"),
        ("components: [\n", None, "not valid YAML"),
        ("components: [../../components/group-readiness]\n", "patches: 5\n", "patches must be a list"),
        (
            "components: [../../components/group-readiness]\n",
            "patches: [{target: {kind: MutatingWebhookConfiguration, name: guardhook}}]\n",
            "has no path",
        ),
    ],
)
def test_patch_manifests_with_an_odd_kustomization_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overlay: str, component: str | None, says: str
) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "manifests", manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    (manifests / "overlays" / "self-managed" / "kustomization.yaml").write_text(overlay)
    if component is not None:
        (manifests / "components" / "group-readiness" / "kustomization.yaml").write_text(component)
    assert main(["certs", "--patch-manifests", str(manifests)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize("nested", [False, True], ids=["overlay", "nested-component"])
def test_patch_manifests_refuses_an_absolute_component_path_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nested: bool
) -> None:
    # kustomize loads components only relative to their kustomization ("cannot be absolute"), so
    # patches written for such an overlay would describe one that never renders.
    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "manifests", manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    overlay = manifests / "overlays" / "self-managed"
    absolute = manifests / "components" / "group-readiness"
    listing = overlay / "kustomization.yaml"
    if nested:
        listing = manifests / "components" / "leader-service-deny" / "kustomization.yaml"
    spec = yaml.safe_load(listing.read_text())
    spec["components"] = [str(absolute)]
    listing.write_text(yaml.safe_dump(spec))
    if nested:
        spec = yaml.safe_load((overlay / "kustomization.yaml").read_text())
        spec["components"] = ["../../components/leader-service-deny"]
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump(spec))
    before = sorted(p.relative_to(manifests) for p in manifests.rglob("*"))
    assert main(["certs", "--patch-manifests", str(manifests)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"guardhook certs: {listing}: component {absolute} is an absolute path, which kustomize refuses; "
        f"give it relative to {listing.parent}\n"
    )
    assert sorted(p.relative_to(manifests) for p in manifests.rglob("*")) == before  # nothing written
    if shutil.which("kubectl"):  # what kustomize says of the same path
        probe = tmp_path / "probe"
        probe.mkdir()
        (probe / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {"resources": ["../manifests/overlays/cert-manager"], "components": [str(absolute)]}
            )
        )
        printed = subprocess.run(
            ["kubectl", "kustomize", str(probe)], capture_output=True, text=True, timeout=60
        )
        assert printed.returncode != 0 and "cannot be absolute" in printed.stderr, printed.stderr


@pytest.mark.parametrize("make_base", [False, True], ids=["no-base-folder", "empty-base-folder"])
def test_patch_manifests_into_a_folder_that_is_not_guardhooks_says_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_base: bool
) -> None:
    if make_base:
        (tmp_path / "base").mkdir()
    out = tmp_path / "certs"
    assert main(["certs", "--patch-manifests", str(tmp_path), "--out", str(out)]) == 2
    missing = "no webhook configurations there" if make_base else "no such folder"
    assert capsys.readouterr().err == (
        f"guardhook certs: {tmp_path / 'base'}: {missing}; give guardhook's manifests folder, the one "
        "holding base/ and overlays/ (--patch-manifests DIR, --manifests DIR)\n"
    )
    assert not out.exists()  # nothing written
