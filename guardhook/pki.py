"""The one certificate builder: a self-signed CA and an ECDSA P-256 serving certificate it signs,
with their PEM forms, whether a key is a certificate's and whether a CA signed a certificate. Both
the certificates written into a folder (`guardhook.server.certs`: `serve`'s first run, `guardhook
certs`) and those guardhook keeps in a Secret (`guardhook.certsync`) are built here, so they cannot
drift apart; the two packages sit on one layer and may not import each other.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.crt"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
"""The file names of the CA bundle, the serving certificate and its key: the keys of a Kubernetes
TLS Secret (and cert-manager's), and so the files of a mounted one."""
CA_NAME = "guardhook-ca"
BACKDATE = datetime.timedelta(minutes=5)
"""notBefore lies this far back, so an API server whose clock is a little behind accepts it."""


def new_ca(
    now: datetime.datetime, validity: datetime.timedelta
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A new self-signed CA (ECDSA P-256, CN guardhook-ca) valid from `now` for `validity`, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def new_serving(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    names: Sequence[str],
    now: datetime.datetime,
    validity: datetime.timedelta,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A serving certificate (ECDSA P-256, server auth) for `names`, DNS names or IP addresses (the
    first is its CN; "guardhook" when none), signed by `ca`, valid for `validity` but never past
    the CA, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + validity, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "guardhook")])
        )
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def pem(cert: x509.Certificate) -> bytes:
    """`cert` as PEM."""
    return cert.public_bytes(serialization.Encoding.PEM)


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    """`key` as unencrypted PKCS#8 PEM (what tls.key holds)."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def same_key(cert: x509.Certificate, key: PrivateKeyTypes) -> bool:
    """Whether `key` is the private key of `cert` (their public keys are the same)."""
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    return cert.public_key().public_bytes(serialization.Encoding.PEM, spki) == key.public_key().public_bytes(
        serialization.Encoding.PEM, spki
    )


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether `ca` directly signed `cert` (its issuer is `ca`'s subject and `ca`'s key verifies its
    signature); False, never an exception, for any other pair, a key type that cannot sign
    included. Only the signature: not the validity dates, names or key usages.

    The check the API server makes of a webhook's serving certificate against its caBundle, one
    link deep (guardhook's serving certificates are signed by the bundle's CA itself).
    """
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
