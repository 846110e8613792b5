"""Prometheus metrics (prometheus_client), served at /metrics in the text format.

Each Metrics holds its own CollectorRegistry, so tests and several apps in one process never
collide. Latency buckets are fine enough to tell 1 ms from 5 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from guardhook.admission.engine import Verdict
from guardhook.cluster.giveway import giving_way
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import each_gang_set
from guardhook.groups.counts import each_lws_groups
from guardhook.groups.ready import DEFAULT_STARTUP_WINDOW_SECONDS, gate_counts
from guardhook.groups.stuck import stuck_groups
from guardhook.server import refusals
from guardhook.server.tally import Family, Tally

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
CONTENT_TYPE = CONTENT_TYPE_LATEST

REQUESTS = "guardhook_requests"
LATENCY = "guardhook_request_duration_seconds"
DECISIONS = "guardhook_decisions"
POLICY_LATENCY = "guardhook_policy_duration_seconds"
REQUEST_FAMILIES = (
    Family(
        "counter",
        REQUESTS,
        "Admission requests answered, by endpoint and HTTP status code.",
        ("endpoint", "code"),
    ),
    Family(
        "histogram",
        LATENCY,
        "Time to judge and answer one admission request, in seconds.",
        ("endpoint",),
        LATENCY_BUCKETS,
    ),
    Family(
        "counter",
        DECISIONS,
        "Policy decisions, by policy, the enforcement action taken and outcome.",
        ("policy", "action", "outcome"),
    ),
    Family(
        "histogram",
        POLICY_LATENCY,
        "Time one policy's judge took on one request, in seconds, by policy id and endpoint.",
        ("policy", "endpoint"),
        LATENCY_BUCKETS,
    ),
)
"""The metrics every review counts (guardhook.server.tally), as prometheus_client declared them."""


class Metrics:
    """The webhook's request, decision and cluster-view metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.reviews_answered = 0
        """AdmissionReviews this process answered: proof the API server calls it (guardhook's entries
        are installed, through the API or from the API server's configuration)."""
        # The request path's four metrics are counted per thread without prometheus_client's
        # per-call lock and Python bucket search (guardhook.server.tally), summed at scrape.
        self.tally = Tally(REQUEST_FAMILIES)
        self.registry.register(self.tally)
        self.config_reloads = Counter(
            "guardhook_config_reloads",
            "Changes of the --config file seen, by result: success (applied) or failure (the "
            "previous configuration kept).",
            ["result"],
            registry=self.registry,
        )
        self.view_synced = Gauge(
            "guardhook_cluster_view_synced",
            "1 once every kind of the cluster view has synced for the first time.",
            registry=self.registry,
        )
        self.view_stale_seconds = Gauge(
            "guardhook_cluster_view_stale_seconds",
            "Seconds the oldest broken watch has been broken (0 while all are healthy).",
            registry=self.registry,
        )

        self.view_stale = Gauge(
            "guardhook_cluster_view_stale",
            "1 while decisions follow the stale-view failure mode (never synced, or a watch broken "
            "longer than clusterView.staleAfterSeconds).",
            registry=self.registry,
        )
        self.view_objects = Gauge(
            "guardhook_cluster_view_objects",
            "Objects the cluster view holds, by kind (resource name).",
            ["kind"],
            registry=self.registry,
        )
        self.view_last_sync_age = Gauge(
            "guardhook_cluster_view_last_sync_age_seconds",
            "Seconds since the API server last confirmed a kind current (list, watch connect, event or "
            "bookmark); -1 before the first.",
            ["kind"],
            registry=self.registry,
        )
        self.view_watch_restarts = Counter(
            "guardhook_cluster_view_watch_restarts",
            "Watches restarted, by kind: server timeouts, broken connections and 410 Gone relists.",
            ["kind"],
            registry=self.registry,
        )

    def observe(self, endpoint: str, verdict: Verdict) -> None:
        """Count the decisions of one judged request and time each policy that ran."""
        tally = self.tally
        for policy, seconds in verdict.timings.items():
            tally.observe((POLICY_LATENCY, policy, endpoint), seconds)
        for decision in verdict.decisions:
            tally.inc((DECISIONS, decision.policy, decision.action or "none", decision.outcome))

    def config_reloaded(self, ok: bool) -> None:
        """Count one change of the --config file: applied (`ok`) or refused."""
        self._child(self.config_reloads, "success" if ok else "failure").inc()

    def answered(self, endpoint: str, status_code: int, seconds: float) -> None:
        """Count one answered request and its latency in seconds."""
        self.tally.inc((REQUESTS, endpoint, str(status_code)))
        self.tally.observe((LATENCY, endpoint), seconds)
        if status_code == 200:
            self.reviews_answered += 1

    def _child(self, metric: Any, *labels: str) -> Any:
        # labels() takes a lock and builds a key on every call; the label sets here are few.
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def render(self) -> bytes:
        """The registry in the Prometheus text format. generate_latest writes each family as it
        is handed one, and the GIL is given away between families (guardhook.cluster.giveway):
        a per-LWS family of a large fleet is thousands of lines."""
        return generate_latest(FamiliesGivingWay(self.registry))


class FamiliesGivingWay:
    """A registry (anything with `collect()`) whose families come through `giving_way`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        return giving_way(self.registry.collect())


class LwsGaugeCollector(Collector):
    """Gauges per LeaderWorkerSet (labels namespace, name) computed from the cluster view at
    scrape time, so an LWS that is gone leaves no stale series. A subclass names its gauges in
    GAUGES ((field, metric name, help), each field an attribute of the rows) and yields one row
    per LWS from `rows(view)`; `view` is called on every scrape and returns the current view."""

    GAUGES: tuple[tuple[str, str, str], ...] = ()

    def __init__(self, view: Callable[[], ClusterView]) -> None:
        self.view = view

    def rows(self, view: ClusterView) -> Iterable[Any]:
        """One object per LWS with `namespace`, `name` and an attribute per GAUGES field, best
        computed as it is asked for: `collect` gives the GIL away between rows."""
        return ()

    def collect(self) -> Iterator[Metric]:
        families = [
            (field, GaugeMetricFamily(name, text, labels=["namespace", "name"]))
            for field, name, text in self.GAUGES
        ]
        for row in giving_way(self.rows(self.view())):
            for field, family in families:
                family.add_metric([row.namespace, row.name], getattr(row, field))
        yield from (family for _, family in families)

    def describe(self) -> Iterator[Metric]:
        return iter(())


class GroupCollector(LwsGaugeCollector):
    """`guardhook_lws_groups_desired`, `guardhook_lws_groups_whole` and
    `guardhook_lws_leader_ready_group_incomplete` and `guardhook_lws_groups_doomed_by_taint` per LWS
    (guardhook.groups.counts.each_lws_groups)."""

    GAUGES = (
        ("desired", "guardhook_lws_groups_desired", "Groups a LeaderWorkerSet asks for (spec.replicas)."),
        (
            "whole",
            "guardhook_lws_groups_whole",
            "Groups with every pod present, none terminating, all Ready.",
        ),
        (
            "leader_ready_group_incomplete",
            "guardhook_lws_leader_ready_group_incomplete",
            "Groups whose leader is Ready (so it takes traffic) while the group is not whole.",
        ),
        (
            "doomed_by_taint",
            "guardhook_lws_groups_doomed_by_taint",
            "Groups with a pod that a NoExecute node or device taint in force will evict (not yet "
            "terminating); counted as broken by every group budget.",
        ),
    )

    def rows(self, view: ClusterView) -> Iterable[Any]:
        return each_lws_groups(view)


class GangCollector(Collector):
    """`guardhook_gang_groups` and `guardhook_gang_groups_whole` per gang set of every gang maker
    (labels namespace, kind, name: a PodGroups' Workload, common controller owner or lone PodGroup,
    a Grove PodCliqueSet, a JobSet; guardhook.groups.each_gang_set), computed from the cluster
    view at scrape time as the per-LWS gauges are."""

    GAUGES = (
        (
            "gangs",
            "guardhook_gang_groups",
            "Gangs in a set: PodGroups with disruptionMode all, PodCliqueSet replicas, JobSet Jobs.",
        ),
        (
            "whole",
            "guardhook_gang_groups_whole",
            "Of those, gangs with every pod present, none terminating or going, all Ready.",
        ),
    )

    def __init__(self, view: Callable[[], ClusterView]) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        families = [
            (field, GaugeMetricFamily(name, text, labels=["namespace", "kind", "name"]))
            for field, name, text in self.GAUGES
        ]
        for row in giving_way(each_gang_set(self.view())):
            for field, family in families:
                family.add_metric([row.namespace, row.kind, row.name], getattr(row, field))
        yield from (family for _, family in families)

    def describe(self) -> Iterator[Metric]:
        return iter(())


class StuckCollector(Collector):
    """`guardhook_stuck_groups` per set (labels namespace, kind, name): its groups down for good
    (guardhook.groups.stuck: restarts exhausted, or gated longer than `after()` seconds, group-eviction's
    `stuckAfterSeconds`), computed from the cluster view at scrape time. Sets with none are not
    exported. Alert GuardhookGroupStuck."""

    def __init__(self, view: Callable[[], ClusterView], after: Callable[[], float]) -> None:
        self.view = view
        self.after = after

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "guardhook_stuck_groups",
            "Groups down for good in a set: restarts exhausted (maxGroupRestarts) or scheduling-gated "
            "past stuckAfterSeconds; each spends the set's disruption budget until someone acts.",
            labels=["namespace", "kind", "name"],
        )
        counts: dict[tuple[str, str, str], int] = {}
        for group in giving_way(stuck_groups(self.view(), time.time(), self.after())):
            key = (group.namespace, group.kind, group.set_name)
            counts[key] = counts.get(key, 0) + 1
        for key, count in sorted(counts.items()):
            family.add_metric(list(key), count)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


GROUP_READY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class GroupReadinessMetrics:
    """The group-readiness reconciler's own metrics (issue 16), registered into `registry`:
    `guardhook_group_readiness_condition_delay_seconds` (from the view seeing a group whole to
    its leader's condition written True) and `guardhook_group_readiness_patches` by result."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.delay = Histogram(
            "guardhook_group_readiness_condition_delay_seconds",
            "Seconds from the cluster view seeing a group whole to its leader's guardhook.io/group-ready "
            "condition written True.",
            buckets=GROUP_READY_BUCKETS,
            registry=registry,
        )
        self.patches = Counter(
            "guardhook_group_readiness_patches",
            "PATCHes of a leader's guardhook.io/group-ready condition, by result (patched, conflict, "
            "gone, error).",
            ["result"],
            registry=registry,
        )

    def patched(self, result: str) -> None:
        """Count one condition PATCH by its result."""
        self.patches.labels(result).inc()


class LeaderServiceSyncMetrics:
    """The leader-service-sync reconciler's metrics (issue 38), registered into `registry`:
    `guardhook_leader_service_sync_patches` by kind and result (every change it makes, and every
    failed attempt) and `guardhook_leader_service_unnarrowed` by kind and reason: Services and
    InferencePools that can match workers of an LWS and were left as they are by the last round
    (report: leader-service runs as Deny/Warn/Audit; opted-out: annotated
    guardhook.io/leader-service: ignore; cannot-narrow: the policy has no patch for it)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.patches = Counter(
            "guardhook_leader_service_sync_patches",
            "PATCHes narrowing a Service or InferencePool to LWS leaders, by kind and result "
            "(patched, conflict, gone, error).",
            ["kind", "result"],
            registry=registry,
        )
        self.unnarrowed_objects = Gauge(
            "guardhook_leader_service_unnarrowed",
            "Services and InferencePools that can match LWS workers and the last leader-service-sync "
            "round left as they are, by kind and reason (report, opted-out, cannot-narrow).",
            ["kind", "reason"],
            registry=registry,
        )
        self._seen: set[tuple[str, str]] = set()

    def patched(self, kind: str, result: str) -> None:
        """Count one PATCH by the object's kind and its result."""
        self.patches.labels(kind, result).inc()

    def unnarrowed(self, counts: dict[tuple[str, str], int]) -> None:
        """Set the gauge from one round's counts; a (kind, reason) gone since drops to 0."""
        for key in self._seen | set(counts):
            self.unnarrowed_objects.labels(*key).set(counts.get(key, 0))
        self._seen |= set(counts)


class RefusalCollector(Collector):
    """`guardhook_requests_refused_unread_total{reason, code}`: requests the worker answered
    before reading them whole (guardhook.server.refusals), which guardhook_requests_total, counted
    by the app, never sees: no client certificate (401), the bound on bytes in flight (503), plain
    HTTP on the HTTPS port (400)."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "guardhook_requests_refused_unread",
            "Requests the server answered before reading them whole, by reason and HTTP status code.",
            labels=["reason", "code"],
        )
        for reason, count in refusals.counts().items():
            family.add_metric([reason, str(refusals.REASONS[reason])], count)
        yield family


class GateCollector(LwsGaugeCollector):
    """Per opted-in LWS gauges computed from the cluster view at scrape time:
    `guardhook_group_readiness_leaders_gated` (leaders carrying the readiness gate),
    `guardhook_group_readiness_groups_ready` (of those, condition True: ready by the gate) and
    `guardhook_group_readiness_conditions_behind` (condition not what the group's state says:
    the alert for a reconciler that is not running) and `guardhook_group_readiness_held` (gated
    pods held longer than `window_seconds` with their containers ready: the watchdog); none
    while the view is stale. `all_lws` is
    the policy parameter allLeaderWorkerSets."""

    GAUGES = (
        (
            "gated",
            "guardhook_group_readiness_leaders_gated",
            "Leaders of opted-in LeaderWorkerSets carrying the readiness gate guardhook.io/group-ready "
            '(every gated pod of a guardhook.io/serving-pods: "all" LWS).',
        ),
        (
            "ready",
            "guardhook_group_readiness_groups_ready",
            "Gated leaders whose guardhook.io/group-ready condition is True (groups ready by the gate).",
        ),
        (
            "behind",
            "guardhook_group_readiness_conditions_behind",
            "Gated leaders whose guardhook.io/group-ready condition is not what their group's state "
            "says (missing or out of date).",
        ),
        (
            "held",
            "guardhook_group_readiness_held",
            "Gated pods whose containers are ready but whose guardhook.io/group-ready condition has "
            "been False (or never written, since creation) longer than the startup window "
            "(policies.group-readiness.startupWindowSeconds).",
        ),
    )

    def __init__(
        self,
        view: Callable[[], ClusterView],
        all_lws: bool = False,
        window_seconds: float = DEFAULT_STARTUP_WINDOW_SECONDS,
    ) -> None:
        super().__init__(view)
        self.all_lws = all_lws
        self.window_seconds = window_seconds

    def rows(self, view: ClusterView) -> Iterable[Any]:
        return () if view.is_stale() else gate_counts(view, self.all_lws, self.window_seconds)
