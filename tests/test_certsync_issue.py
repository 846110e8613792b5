"""What the certificate Secret of `serve --manage-certs` should hold (guardhook.certsync.issue, issue
49): made when empty, kept while good, the serving certificate renewed before expiry under the
same CA, a new CA keeping the previous one in the bundle until it expires, bad data replaced."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from guardhook.certsync.issue import (
    CA_FILE,
    CA_KEY_FILE,
    CERT_FILE,
    KEY_FILE,
    KEYS,
    CertSettings,
    plan,
    service_names,
)

DAY = datetime.timedelta(days=1)
NOW = datetime.datetime(2026, 12, 7, 9, 0, tzinfo=datetime.UTC)
SETTINGS = CertSettings(
    names=service_names("guardhook", "guardhook-system"),
    validity=90 * DAY,
    ca_validity=3650 * DAY,
    renew_before=30 * DAY,
)


def _first() -> dict[str, bytes]:
    made = plan({}, SETTINGS, NOW)
    assert made.data is not None
    return made.data


def _serving(data: dict[str, bytes]) -> x509.Certificate:
    return x509.load_pem_x509_certificate(data[CERT_FILE])


def _cas(data: dict[str, bytes]) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(data[CA_FILE])


def test_an_empty_secret_gets_a_ca_and_a_serving_certificate_for_the_service() -> None:
    made = plan({}, SETTINGS, NOW)
    assert made.data is not None and set(made.data) == set(KEYS)
    assert "new CA" in made.why
    (ca,) = _cas(made.data)
    serving = _serving(made.data)
    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert tuple(names.get_values_for_type(x509.DNSName)) == (
        "guardhook.guardhook-system.svc",
        "guardhook.guardhook-system.svc.cluster.local",
    )
    assert (
        ExtendedKeyUsageOID.SERVER_AUTH
        in serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )
    assert serving.not_valid_after_utc == NOW + SETTINGS.validity
    assert ca.not_valid_after_utc == NOW + SETTINGS.ca_validity
    assert serving.not_valid_before_utc < NOW  # an API server whose clock lags a little accepts it


def test_good_certificates_are_kept() -> None:
    data = _first()
    assert plan(data, SETTINGS, NOW + 59 * DAY).data is None


def test_the_serving_certificate_is_renewed_before_expiry_under_the_same_ca() -> None:
    data = _first()
    later = NOW + 61 * DAY  # within renew_before (30 days) of the serving certificate's 90
    renewed = plan(data, SETTINGS, later)
    assert renewed.data is not None and "new serving certificate" in renewed.why
    assert renewed.data[CA_FILE] == data[CA_FILE] and renewed.data[CA_KEY_FILE] == data[CA_KEY_FILE]
    assert renewed.data[KEY_FILE] != data[KEY_FILE]
    _serving(renewed.data).verify_directly_issued_by(_cas(data)[0])
    assert _serving(renewed.data).not_valid_after_utc == later + SETTINGS.validity


def test_a_new_ca_keeps_the_previous_one_in_the_bundle_until_it_expires() -> None:
    data = _first()
    old_ca = _cas(data)[0]
    later = NOW + (3650 - 29) * DAY  # within renew_before of the CA's expiry
    rotated = plan(data, SETTINGS, later)
    assert rotated.data is not None and "new CA" in rotated.why
    new_ca, previous = _cas(rotated.data)
    assert previous == old_ca and new_ca != old_ca
    serving = _serving(rotated.data)
    serving.verify_directly_issued_by(new_ca)
    assert serving.not_valid_after_utc == later + SETTINGS.validity
    # kept while good; once the old CA has expired, the bundle drops it and nothing else changes
    assert plan(rotated.data, SETTINGS, later + DAY).data is None
    dropped = plan(rotated.data, SETTINGS, old_ca.not_valid_after_utc + DAY)
    assert dropped.data is not None and dropped.why == "expired CAs dropped from the bundle"
    assert _cas(dropped.data) == [new_ca]
    assert {k: dropped.data[k] for k in (CA_KEY_FILE, CERT_FILE, KEY_FILE)} == {
        k: rotated.data[k] for k in (CA_KEY_FILE, CERT_FILE, KEY_FILE)
    }


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    short_ca = CertSettings(SETTINGS.names, 90 * DAY, 100 * DAY, 5 * DAY)
    data = plan({}, short_ca, NOW).data
    assert data is not None
    renewed = plan(data, short_ca, NOW + 86 * DAY).data
    assert renewed is not None
    assert _serving(renewed).not_valid_after_utc == _cas(renewed)[0].not_valid_after_utc


def test_other_names_a_foreign_key_or_garbage_are_replaced() -> None:
    data = _first()
    other = CertSettings(
        service_names("guardhook", "other-ns"), SETTINGS.validity, SETTINGS.ca_validity, SETTINGS.renew_before
    )
    moved = plan(data, other, NOW)
    assert moved.data is not None and "names" in moved.why
    assert moved.data[CA_FILE] == data[CA_FILE]  # the CA is good: only the serving certificate changes
    second = _first()
    swapped = plan({**data, KEY_FILE: second[KEY_FILE]}, SETTINGS, NOW)
    assert swapped.data is not None and "tls.key is not" in swapped.why
    foreign = plan({**data, CERT_FILE: second[CERT_FILE], KEY_FILE: second[KEY_FILE]}, SETTINGS, NOW)
    assert foreign.data is not None and "not signed by the current CA" in foreign.why
    garbage = plan({**data, CA_KEY_FILE: b"not a key"}, SETTINGS, NOW)
    assert garbage.data is not None and "new CA" in garbage.why
    half = plan({CA_FILE: data[CA_FILE]}, SETTINGS, NOW)
    assert half.data is not None and "new CA" in half.why  # a CA without its key cannot sign
