"""What the certificate Secret should hold: a pure function of its current data, the wanted names
and validities, and the time (`plan`).

The Secret holds `ca.crt` (the bundle: the current CA first, then earlier CAs not yet expired),
`ca.key` (the current CA's key, to sign the next serving certificate without a new CA), `tls.crt`
and `tls.key` (the serving certificate, ECDSA P-256, signed by the current CA). As
open-policy-agent/cert-controller's rotator (used by Gatekeeper, LWS and Kueue) does, certificates
are replaced `renew_before` ahead of their expiry, and anything that does not parse, does not
match its key or does not carry the wanted names is replaced at once. A new CA keeps the previous
one in the bundle until it expires, so API servers trust the serving certificate the pods still
serve until the kubelet refreshes their mounted Secret.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from guardhook.pki import CA_FILE, CERT_FILE, KEY_FILE, issued_by, new_ca, new_serving, pem, pem_key, same_key

CA_KEY_FILE = "ca.key"
KEYS = (CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE)


@dataclass(frozen=True)
class CertSettings:
    """What to issue: the serving certificate's DNS names (the first is its CN), its validity, the
    CA's validity, and how long before either expires it is replaced."""

    names: tuple[str, ...]
    validity: datetime.timedelta
    ca_validity: datetime.timedelta
    renew_before: datetime.timedelta


@dataclass(frozen=True)
class Plan:
    """The Secret data to write (None: what is there is good) and why, in words for the log."""

    data: dict[str, bytes] | None
    why: str


def _certs(data: bytes | None) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data) if data else []
    except ValueError:
        return []


def _key(data: bytes | None) -> ec.EllipticCurvePrivateKey | None:
    try:
        key = serialization.load_pem_private_key(data, password=None) if data else None
    except (ValueError, TypeError):
        return None
    return key if isinstance(key, ec.EllipticCurvePrivateKey) else None


def _due(cert: x509.Certificate, now: datetime.datetime, renew_before: datetime.timedelta) -> bool:
    return now + renew_before >= cert.not_valid_after_utc or now < cert.not_valid_before_utc


def _ca_problem(data: Mapping[str, bytes], settings: CertSettings, now: datetime.datetime) -> str:
    cas = _certs(data.get(CA_FILE))
    key = _key(data.get(CA_KEY_FILE))
    if not cas or key is None:
        return "no CA" if not data.get(CA_FILE) else "the CA or its key does not load"
    if not same_key(cas[0], key):
        return "ca.key is not the CA's key"
    if _due(cas[0], now, settings.renew_before):
        return f"the CA expires {cas[0].not_valid_after_utc.isoformat()}"
    return ""


def _names(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(san.get_values_for_type(x509.DNSName))


def _serving_problem(
    data: Mapping[str, bytes], ca: x509.Certificate, settings: CertSettings, now: datetime.datetime
) -> str:
    certs = _certs(data.get(CERT_FILE))
    key = _key(data.get(KEY_FILE))
    if not certs or key is None:
        return "no serving certificate" if not data.get(CERT_FILE) else "tls.crt or tls.key does not load"
    if not same_key(certs[0], key):
        return "tls.key is not the serving certificate's key"
    if not issued_by(certs[0], ca):
        return "the serving certificate is not signed by the current CA"
    if _names(certs[0]) != settings.names:
        return f"the serving certificate names {list(_names(certs[0]))}, not {list(settings.names)}"
    if _due(certs[0], now, settings.renew_before):
        return f"the serving certificate expires {certs[0].not_valid_after_utc.isoformat()}"
    return ""


def bundle(current: x509.Certificate, earlier: Iterable[x509.Certificate], now: datetime.datetime) -> bytes:
    """The caBundle: `current` first, then each of `earlier` not yet expired and not `current`."""
    kept = [c for c in earlier if c != current and c.not_valid_after_utc > now]
    return b"".join(pem(c) for c in [current, *dict.fromkeys(kept)])


def plan(data: Mapping[str, bytes], settings: CertSettings, now: datetime.datetime) -> Plan:
    """The Secret data for `settings` at `now`, given its current `data` (the four KEYS, any
    missing): None when the CA and serving certificate are good and the bundle holds no expired
    CA; else new data, keeping what is still good (a good CA signs a new serving certificate; a
    new CA keeps the previous ones in the bundle until they expire)."""
    earlier = _certs(data.get(CA_FILE))
    why = _ca_problem(data, settings, now)
    if why:
        ca, ca_key = new_ca(now, settings.ca_validity)
        cert, key = new_serving(ca, ca_key, settings.names, now, settings.validity)
        return Plan(_data(ca, ca_key, cert, key, earlier, now), f"new CA and serving certificate: {why}")
    ca = earlier[0]
    why = _serving_problem(data, ca, settings, now)
    kept_key = _key(data.get(CA_KEY_FILE))
    if why and kept_key is not None:  # _ca_problem found the key good
        cert, key = new_serving(ca, kept_key, settings.names, now, settings.validity)
        return Plan(_data(ca, kept_key, cert, key, earlier, now), f"new serving certificate: {why}")
    kept = bundle(ca, earlier, now)
    if kept != data.get(CA_FILE):
        return Plan({**{k: data[k] for k in KEYS}, CA_FILE: kept}, "expired CAs dropped from the bundle")
    return Plan(None, "")


def _data(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    cert: x509.Certificate,
    key: ec.EllipticCurvePrivateKey,
    earlier: list[x509.Certificate],
    now: datetime.datetime,
) -> dict[str, bytes]:
    return {
        CA_FILE: bundle(ca, earlier, now),
        CA_KEY_FILE: pem_key(ca_key),
        CERT_FILE: pem(cert),
        KEY_FILE: pem_key(key),
    }


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names the API server calls a webhook Service by: <svc>.<ns>.svc, and .cluster.local."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")
