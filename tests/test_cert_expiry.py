"""Certificates watch themselves (issue 22): their expiry times on /metrics, and a log warning at
start (and daily) while either expires within the alert's window."""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from guardhook.server import certs as certs_module
from guardhook.server.cert_expiry import EXPIRY_WARNING_DAYS, CertExpiryCollector, warn_if_expiring
from guardhook.server.certs import generate

from conftest import Server

UTC = datetime.UTC


def _not_after(path: Path) -> datetime.datetime:
    return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc


def test_warns_only_inside_the_window(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    paths = generate(tmp_path, ["localhost"])
    serving_end = _not_after(paths.cert)
    with caplog.at_level(logging.WARNING):
        assert (
            warn_if_expiring(paths, now=serving_end - datetime.timedelta(days=EXPIRY_WARNING_DAYS + 1)) == []
        )
        (line,) = warn_if_expiring(paths, now=serving_end - datetime.timedelta(days=10, hours=1))
    assert line.startswith(f"the serving certificate {paths.cert} expires in 10 days")
    # the rotation docs/operations.md gives: the overlay's secret and caBundle patches together
    assert "guardhook certs --force --patch-manifests manifests/" in line
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [line]
    later = warn_if_expiring(paths, now=_not_after(paths.ca) + datetime.timedelta(seconds=1))
    assert [line.split(" certificate")[0] for line in later] == ["the ca", "the serving"]
    assert all("expired" in line for line in later)


def test_collector_exports_both_expiry_times_and_skips_unreadable_files(tmp_path: Path) -> None:
    paths = generate(tmp_path, ["localhost"])
    (family,) = CertExpiryCollector(paths).collect()
    samples = {s.labels["certificate"]: s.value for s in family.samples}
    assert samples == {"serving": _not_after(paths.cert).timestamp(), "ca": _not_after(paths.ca).timestamp()}
    paths.ca.write_text("not a certificate")
    (family,) = CertExpiryCollector(paths).collect()
    assert [s.labels["certificate"] for s in family.samples] == ["serving"]


def _expiring_certs(folder: Path, days: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate folder whose serving certificate expires in `days` days."""
    monkeypatch.setattr(certs_module, "SERVING_DAYS", days)
    generate(folder, ["localhost", "127.0.0.1"])


def test_a_live_server_exports_the_expiry_and_warns_at_start(
    fresh_server: Callable[..., Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "s0" / "certs"  # where fresh_server's first server looks
    _expiring_certs(folder, 5, monkeypatch)
    server = fresh_server()
    text = server.session.get(server.url + "/metrics", timeout=10).text
    (family,) = [
        f
        for f in text_string_to_metric_families(text)
        if f.name == "guardhook_certificate_expiry_timestamp_seconds"
    ]
    samples = {s.labels["certificate"]: s.value for s in family.samples}
    assert samples["serving"] == _not_after(folder / "tls.crt").timestamp()
    assert samples["ca"] == _not_after(folder / "ca.crt").timestamp()
    server.logged(f"the serving certificate {folder / 'tls.crt'} expires in 4 days")


def _reloads(server: Server) -> dict[str, float]:
    with requests.Session() as session:  # a new connection: the handshake looks at the files
        session.trust_env = False
        session.verify = str(server.ca)
        text = session.get(server.url + "/metrics", timeout=10).text
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "guardhook_certificate_reloads"]
    return {s.labels["result"]: s.value for s in family.samples if s.name.endswith("_total")}


def test_certificate_reload_failures_are_counted_once_per_change(fresh_server: Callable[..., Server]) -> None:
    server = fresh_server()
    assert _reloads(server) == {"success": 0, "failure": 0}
    cert = server.cert_dir / "tls.crt"
    good = cert.read_bytes()
    cert.write_text("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
    os.utime(cert, (time.time() + 5, time.time() + 5))
    assert _reloads(server) == {"success": 0, "failure": 1}  # the previous certificate still serves
    assert _reloads(server) == {"success": 0, "failure": 1}  # the same change: not counted again
    cert.write_bytes(good)
    os.utime(cert, (time.time() + 10, time.time() + 10))
    assert _reloads(server) == {"success": 1, "failure": 1}
