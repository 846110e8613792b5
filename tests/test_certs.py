"""Certificate generation, the in-cluster rule, and rotation-following TLS contexts."""

from __future__ import annotations

import datetime
import os
import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from guardhook.commands.main import main
from guardhook.pki import issued_by, new_ca, new_serving
from guardhook.server.certs import (
    CertificateError,
    RotatingServerContext,
    ensure_certs,
    generate,
    service_dns_names,
    write_atomically,
)


def serving_cert(folder: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate((folder / "tls.crt").read_bytes())


def test_generated_set_is_an_ecdsa_p256_chain_for_the_names(tmp_path: Path) -> None:
    paths = generate(tmp_path, service_dns_names("guardhook", "guardhook-system"))
    cert = serving_cert(tmp_path)
    key = cert.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "guardhook.guardhook-system.svc" in names.get_values_for_type(x509.DNSName)
    ca = x509.load_pem_x509_certificate(paths.ca.read_bytes())
    cert.verify_directly_issued_by(ca)
    assert oct(paths.key.stat().st_mode & 0o777) == "0o600"
    # The standard library accepts the pair and trusts the chain.
    client = ssl.create_default_context(cafile=str(paths.ca))
    assert client.cert_store_stats()["x509_ca"] == 1


def test_issued_by_checks_the_signature_not_only_the_issuer_name() -> None:
    now = datetime.datetime.now(datetime.UTC)
    day = datetime.timedelta(days=1)
    ca, ca_key = new_ca(now, day)
    other, _ = new_ca(now, day)  # the same subject (CN guardhook-ca), another key
    serving, _ = new_serving(ca, ca_key, ["guardhook"], now, day)
    assert serving.issuer == other.subject
    assert issued_by(serving, ca) and issued_by(ca, ca)
    assert not issued_by(serving, other) and not issued_by(ca, other) and not issued_by(ca, serving)


def test_missing_certificates_are_generated_outside_a_cluster(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path / "new", ["extra.example"])
    names = serving_cert(paths.folder).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "extra.example"}


def test_existing_certificates_are_kept(tmp_path: Path) -> None:
    generate(tmp_path, ["first"])
    before = (tmp_path / "tls.crt").read_bytes()
    ensure_certs(tmp_path, ["second"])
    assert (tmp_path / "tls.crt").read_bytes() == before


def test_missing_certificates_are_fatal_inside_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(CertificateError, match="refusing"):
        ensure_certs(tmp_path, in_cluster=True)
    assert not (tmp_path / "tls.crt").exists()


def test_rotating_context_reloads_changed_files_only(tmp_path: Path) -> None:
    paths = generate(tmp_path, ["localhost"])
    rotating = RotatingServerContext(paths)
    first = rotating.context()
    assert rotating.context() is first
    assert first.minimum_version == ssl.TLSVersion.TLSv1_2
    time.sleep(0.01)
    generate(tmp_path, ["localhost", "rotated"])
    assert rotating.context() is not first
    assert rotating.reloads == 2


def test_a_broken_rotation_keeps_the_last_good_context(tmp_path: Path) -> None:
    paths = generate(tmp_path, ["localhost"])
    rotating = RotatingServerContext(paths)
    good = rotating.context()
    paths.cert.write_text("not a certificate")
    assert rotating.context() is good


# ---- files written safely (issue 48 item 4) ----------------------------------------------------


def test_a_premade_world_writable_key_tmp_is_not_reused(tmp_path: Path) -> None:
    # Before: `certs` opened tls.key.tmp with O_TRUNC and kept its 0666 mode: a world-readable key.
    planted = tmp_path / "tls.key.tmp"
    planted.write_bytes(b"planted")
    planted.chmod(0o666)
    assert main(["certs", "--out", str(tmp_path)]) == 0
    key = tmp_path / "tls.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600" and not key.is_symlink()
    assert planted.read_bytes() == b"planted"  # neither written nor renamed into place
    assert b"PRIVATE KEY" in key.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key", "tls.key.tmp"]


def test_a_symlinked_key_tmp_is_not_followed(tmp_path: Path) -> None:
    # Before: the key was written where the link pointed (here a file outside the folder).
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched")
    folder = tmp_path / "certs"
    folder.mkdir()
    (folder / "tls.key.tmp").symlink_to(outside)
    (folder / "ca.crt.tmp").symlink_to(tmp_path / "dangling")
    assert main(["certs", "--out", str(folder)]) == 0
    assert outside.read_bytes() == b"untouched" and not (tmp_path / "dangling").exists()
    key = folder / "tls.key"
    assert not key.is_symlink() and oct(key.stat().st_mode & 0o777) == "0o600"


def test_a_symlink_at_the_key_itself_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched")
    folder = tmp_path / "certs"
    folder.mkdir()
    (folder / "tls.key").symlink_to(outside)
    generate(folder, ["localhost"])
    assert outside.read_bytes() == b"untouched"
    assert not (folder / "tls.key").is_symlink()
    assert oct((folder / "tls.key").stat().st_mode & 0o777) == "0o600"


def test_the_key_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        paths = generate(tmp_path, ["localhost"])
    finally:
        os.umask(previous)
    assert oct(paths.key.stat().st_mode & 0o777) == "0o600"
    assert oct(paths.cert.stat().st_mode & 0o777) == "0o644"


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_src: object, _dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="No space"):
        write_atomically(tmp_path / "tls.key", b"key", private=True)
    assert list(tmp_path.iterdir()) == []
