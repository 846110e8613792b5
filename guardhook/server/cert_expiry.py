"""The serving certificate and its CA watch themselves: their expiry times as gauges, and a log
warning at start and once a day while either expires within EXPIRY_WARNING_DAYS.

`guardhook_certificate_expiry_timestamp_seconds{certificate="serving"|"ca"}` is the certificate's
notAfter as Unix seconds, read from the files at every scrape, so a rotated certificate shows at
once; while a file cannot be read (deleted, garbage) the certificate still served, or the CA last
read, stays exported, so the alert can still fire. The alert
GuardhookCertificateExpiringSoon (manifests/monitoring/prometheus-rule.yaml) fires on the same
window: after cert-manager's renewal point (30 days before, manifests/components/cert-manager), so
it means renewal failed; for `guardhook certs` it is the reminder to rotate.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cryptography import x509
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from guardhook.server.certs import CertPaths

log = logging.getLogger(__name__)

EXPIRY_WARNING_DAYS = 21
CHECK_EVERY_SECONDS = 24 * 3600.0
METRIC = "guardhook_certificate_expiry_timestamp_seconds"


def not_after(path: Path) -> datetime.datetime | None:
    """The notAfter (UTC) of the first certificate in PEM file `path`; None when it cannot be read."""
    try:
        return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc
    except (OSError, ValueError):
        return None


def expiries(paths: CertPaths) -> dict[str, datetime.datetime]:
    """{"serving": notAfter of tls.crt, "ca": notAfter of ca.crt}, leaving out files not readable."""
    found = {name: not_after(path) for name, path in (("serving", paths.cert), ("ca", paths.ca))}
    return {name: when for name, when in found.items() if when is not None}


class CertExpiryCollector(Collector):
    """The expiry gauge, computed from the certificate files at scrape time; with `tls` (a callable
    returning the server's RotatingServerContext, or None before the first connection) also
    `guardhook_certificate_reloads_total{result}`: rotations applied and changed files refused."""

    def __init__(self, paths: CertPaths, tls: Callable[[], Any] | None = None) -> None:
        self.paths = paths
        self.tls = tls
        self.last_read: dict[str, datetime.datetime] = {}

    def current(self) -> dict[str, datetime.datetime]:
        """{"serving"|"ca": notAfter}: read from the files; for a file that cannot be read (deleted,
        garbage), the certificate still served (the TLS context's) or, for the CA, the last one read,
        so the gauge and its alert outlive a broken mount."""
        found = expiries(self.paths)
        context = self.tls() if self.tls else None
        if "serving" not in found and context is not None and context.not_after is not None:
            found["serving"] = context.not_after
        for name, when in self.last_read.items():
            found.setdefault(name, when)
        self.last_read.update(found)
        return found

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            METRIC,
            "When the certificate expires (notAfter), in Unix seconds: the webhook's serving certificate "
            "(tls.crt) and its CA (ca.crt).",
            labels=["certificate"],
        )
        for name, when in sorted(self.current().items()):
            family.add_metric([name], when.timestamp())
        yield family
        if self.tls is None:
            return
        reloads = CounterMetricFamily(
            "guardhook_certificate_reloads",
            "Serving certificate changes seen on disk, by result: success (new connections get it) or "
            "failure (the files did not load; the previous certificate stays).",
            labels=["result"],
        )
        context = self.tls()
        reloads.add_metric(["success"], max(0, context.reloads - 1) if context else 0)
        reloads.add_metric(["failure"], context.failures if context else 0)
        yield reloads

    def describe(self) -> Iterator[Metric]:
        return iter(())


def warn_if_expiring(
    paths: CertPaths, now: datetime.datetime | None = None, window_days: int = EXPIRY_WARNING_DAYS
) -> list[str]:
    """Log (WARNING) and return one line per certificate that expires within `window_days` (or
    has expired)."""
    now = now or datetime.datetime.now(datetime.UTC)
    lines = []
    for name, when in sorted(expiries(paths).items()):
        left = when - now
        if left <= datetime.timedelta(days=window_days):
            path = paths.cert if name == "serving" else paths.ca
            state = "expired" if left.total_seconds() <= 0 else f"expires in {left.days} days"
            line = (
                f"the {name} certificate {path} {state} (notAfter {when.isoformat()}): rotate it "
                "(cert-manager: check the Certificate's renewal; self-managed: guardhook certs --force "
                "--patch-manifests manifests/ and apply the overlay, see docs/operations.md)"
            )
            log.warning("%s", line)
            lines.append(line)
    return lines


def start_expiry_warnings(paths: CertPaths, every_seconds: float = CHECK_EVERY_SECONDS) -> threading.Thread:
    """Check now, then every `every_seconds` (a day), from a daemon thread; returns it."""

    def loop() -> None:
        while True:
            warn_if_expiring(paths)
            time.sleep(every_seconds)

    thread = threading.Thread(target=loop, name="guardhook-cert-expiry", daemon=True)
    thread.start()
    return thread
