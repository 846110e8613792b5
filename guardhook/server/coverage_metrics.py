"""Protection gaps on /metrics (guardhook.cluster.coverage), computed from the view at scrape time:

- `guardhook_protection_gaps{gap}`: how many gaps of each kind (every kind exported, 0 when none,
  so an alert can compare);
- `guardhook_protection_gap{gap, namespace, name}`: one series per object with gaps of a kind,
  naming it; its value counts them (1, or e.g. 2 for an LWS with two unreadable annotations), so
  the series add up to `guardhook_protection_gaps` and no two samples share labels;
- `guardhook_coverage_unchecked{kind}`: 1 for each coverage kind the view cannot read (RBAC);
- `guardhook_admission_policy_floor{state}`: 1 for the admission-policy floor's state
  (guardhook.cluster.coverage.floor_layer: unchecked, not-installed, not-bound, stale, in-sync; the
  digest compared is the floor exported from the configuration in force), 0 for the others.

Nothing while the view has not synced (no gap is known yet). The serving certificate, read from
its file at each scrape, lets an entry whose caBundle does not verify it count as unreachable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from cryptography import x509
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from guardhook.cluster.coverage import FLOOR_STATES, GAP_KINDS, coverage_gaps, floor_layer
from guardhook.cluster.view.store import COVERAGE_KINDS, ClusterView
from guardhook.server.certs import CertPaths


class CoverageCollector(Collector):
    """The gap gauges. `view` and `config` are called on every scrape (the current view and
    configuration); `certs` is the serving certificate folder (None: not checked)."""

    def __init__(
        self,
        view: Callable[[], ClusterView],
        config: Callable[[], Any],
        certs: CertPaths | None,
        called: Callable[[], bool] = lambda: False,
    ) -> None:
        self.view = view
        self.config = config
        self.certs = certs
        self.called = called

    def _serving_cert(self) -> x509.Certificate | None:
        if self.certs is None:
            return None
        try:
            return x509.load_pem_x509_certificate(self.certs.cert.read_bytes())
        except (OSError, ValueError):
            return None

    def collect(self) -> Iterator[Metric]:
        counts = GaugeMetricFamily(
            "guardhook_protection_gaps",
            "Gaps in protection the cluster view shows, by kind (evictions-unguarded, webhook-unreachable, "
            "webhook-fails-open, webhook-conditions-differ, webhook-conditions-added, annotation-unreadable, "
            "not-installed: no *.guardhook.io entry visible "
            "through the API and no review answered yet, so either not installed or installed from the API "
            "server's configuration, *.static.k8s.io, KEP-5793).",
            labels=["gap"],
        )
        each = GaugeMetricFamily(
            "guardhook_protection_gap",
            "Gaps in protection per object and kind (1, or the number of unreadable annotations of an "
            "LWS): the namespace and name of the LWS or Namespace, or the webhook configuration/entry "
            "(namespace empty).",
            labels=["gap", "namespace", "name"],
        )
        unchecked = GaugeMetricFamily(
            "guardhook_coverage_unchecked",
            "1 for each kind the coverage report cannot read (RBAC), so its gaps are not checked.",
            labels=["kind"],
        )
        floor = GaugeMetricFamily(
            "guardhook_admission_policy_floor",
            "1 for the state of the admission-policy floor (unchecked, not-installed, not-bound, stale, "
            "in-sync): the ValidatingAdmissionPolicies that hold while guardhook is down.",
            labels=["state"],
        )
        view = self.view()
        if view.synced:
            config = self.config()
            gaps = coverage_gaps(
                view,
                self._serving_cert(),
                config.settings("group-eviction").params.get("maxDisruptedGroups"),
                config.settings("group-capacity").params.get("spareGroups"),
                self.called(),
            )
            by_kind = Counter(gap.kind for gap in gaps)
            for kind in GAP_KINDS:
                counts.add_metric([kind], by_kind.get(kind, 0))
            # an LWS can have several unreadable annotations: one series counting them
            per_object = Counter((gap.kind, gap.namespace, gap.name) for gap in gaps)
            for labels, number in per_object.items():
                each.add_metric(list(labels), number)
            for kind in COVERAGE_KINDS:
                unchecked.add_metric([kind], 0 if view.readable(kind) else 1)
            state = floor_layer(view, _floor_digest(config)).state
            for each_state in FLOOR_STATES:
                floor.add_metric([each_state], 1 if each_state == state else 0)
        yield from (counts, each, unchecked, floor)

    def describe(self) -> Iterator[Metric]:
        return iter(())


def _floor_digest(config: Any) -> str | None:
    """The digest of the floor exported from `config` (None when it cannot be exported)."""
    from guardhook.floor.export import export_floor

    try:
        return export_floor(config).digest
    except Exception:  # a scrape must not fail over the floor: report it unchecked against nothing
        return None


def coverage_startup(runtime: Any, certs: CertPaths, tls: Callable[[], Any] | None = None) -> None:
    """Register the gap and certificate gauges on `runtime`'s /metrics (`tls`: the server's
    RotatingServerContext, for the reload counts) and start the daily certificate expiry warnings."""
    from guardhook.server.cert_expiry import CertExpiryCollector, start_expiry_warnings

    registry = runtime.metrics.registry
    registry.register(
        CoverageCollector(
            lambda: runtime.engine.view,
            lambda: runtime.engine.config,
            certs,
            lambda: runtime.metrics.reviews_answered > 0,
        )
    )
    registry.register(CertExpiryCollector(certs, tls))
    start_expiry_warnings(certs)
