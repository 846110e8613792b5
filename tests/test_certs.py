"""Certificate generation, the in-cluster rule, and rotation-following TLS contexts."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from guardhook.server.certs import (
    CertificateError,
    RotatingServerContext,
    ensure_certs,
    generate,
    service_dns_names,
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
