"""`guardhook serve`: the webhook over HTTPS under gunicorn, on the configured cluster view."""

from __future__ import annotations

import argparse
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from guardhook.commands import argtypes
from guardhook.commands.common import (
    CommandError,
    SourceError,
    add_view_flags,
    live_client,
    open_view,
    using_source,
)

if TYPE_CHECKING:
    from guardhook.certsync.apply import Target
    from guardhook.cluster.sources import Source
    from guardhook.cluster.view.store import ClusterView
    from guardhook.config import Config
    from guardhook.server.certs import CertPaths
    from guardhook.server.clientauth import ClientAuth

log = logging.getLogger("guardhook")


def add_parser(commands: Any) -> None:
    """Register `guardhook serve` on the CLI's subparsers."""
    serve = commands.add_parser("serve", help="serve the webhook over HTTPS under gunicorn")
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    serve.add_argument(
        "--port",
        type=argtypes.listen_port,
        default=8443,
        help="port (default 8443; 0: a free port the OS chooses, logged as `Listening at:`)",
    )
    serve.add_argument("--threads", type=argtypes.positive_int, default=8, help="request threads (default 8)")
    serve.add_argument(
        "--metrics-port",
        type=argtypes.port,
        help="also serve GET /metrics over plain HTTP on this port (default: only on --port)",
    )
    serve.add_argument(
        "--health-port",
        type=argtypes.port,
        help="also serve GET /healthz and /readyz over plain HTTP on this port, from a thread of its "
        "own, so the kubelet's probes never wait behind the webhook port's connections (the "
        "manifests use 8081, as controller-runtime does; default: only on --port)",
    )
    serve.add_argument(
        "--request-timeout",
        type=argtypes.positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="time from a connection's first byte to a complete request, else it is closed (default 5)",
    )
    serve.add_argument(
        "--max-connections",
        type=argtypes.positive_int,
        default=1000,
        metavar="N",
        help="open connections at once (gunicorn's worker_connections); at the limit the oldest idle "
        "kept-alive ones are closed (default 1000)",
    )
    serve.add_argument(
        "--max-body-bytes-in-flight",
        type=argtypes.byte_size,
        metavar="BYTES",
        help="request bytes held at once by requests being read or answered; past it a request is "
        "answered 503 with Retry-After (default: 1/8 of the container's memory limit, else 256Mi; "
        "suffixes Ki, Mi, Gi)",
    )
    serve.add_argument(
        "--cert-dir", default="certs", help="folder with ca.crt, tls.crt, tls.key (default certs/)"
    )
    serve.add_argument(
        "--client-ca-file",
        metavar="FILE",
        help="require a client certificate chaining to this PEM CA on POST /validate and /mutate "
        "(reloaded when it changes, as the serving certificate is); /healthz, /readyz and /metrics "
        "answer without one (default: no client authentication)",
    )
    serve.add_argument(
        "--client-cn",
        action="append",
        type=argtypes.certificate_name,
        default=[],
        metavar="NAME",
        help="with --client-ca-file: a name the client certificate's CN or a DNS SAN must be "
        "(repeatable; default kube-apiserver)",
    )
    serve.add_argument(
        "--dns",
        action="append",
        type=argtypes.san,
        default=[],
        metavar="NAME",
        help="extra SAN for a generated certificate",
    )
    serve.add_argument(
        "--namespace",
        type=argtypes.dns_label,
        help="namespace for guardhook's own objects (default: the pod's namespace, else guardhook-system)",
    )
    serve.add_argument(
        "--sync-group-pdbs",
        action="store_true",
        help="also keep one PodDisruptionBudget per group of LWSs annotated guardhook.io/group-pdbs",
    )
    serve.add_argument(
        "--sync-group-readiness",
        action="store_true",
        help="also keep guardhook.io/group-ready on gated leaders of LWSs opted in to group readiness",
    )
    serve.add_argument(
        "--sync-leader-services",
        action="store_true",
        help="also narrow to leaders (or report) Services and InferencePools that reach LWS workers "
        "and that admission could not judge (the leader-service-sync reconciler)",
    )
    add_cert_flags(serve)
    add_view_flags(serve, "watch the cluster of this kubeconfig")
    serve.set_defaults(run=run_serve)


def add_cert_flags(serve: Any) -> None:
    """The flags of the certificates guardhook manages itself (guardhook.certsync)."""
    serve.add_argument(
        "--manage-certs",
        type=argtypes.dns_subdomain,
        metavar="SECRET",
        help="make and rotate the CA and serving certificate in the Secret SECRET of --namespace (mounted "
        "at --cert-dir), and set its CA as the caBundle of the --ca-bundle-webhook configurations; "
        "serving starts once the certificate is mounted (needs a live cluster)",
    )
    serve.add_argument(
        "--cert-service",
        type=argtypes.dns_label,
        default="guardhook",
        metavar="NAME",
        help="with --manage-certs: the webhook Service the certificate names (default guardhook)",
    )
    serve.add_argument(
        "--ca-bundle-webhook",
        action="append",
        type=argtypes.dns_subdomain,
        default=[],
        metavar="NAME",
        help="with --manage-certs: the Validating and MutatingWebhookConfigurations named NAME get the "
        "caBundle (repeatable; default guardhook); no other is touched",
    )
    serve.add_argument(
        "--cert-validity",
        type=argtypes.duration,
        default="8760h",
        metavar="DURATION",
        help="with --manage-certs: the serving certificate's validity (default 8760h)",
    )
    serve.add_argument(
        "--ca-validity",
        type=argtypes.duration,
        default="87600h",
        metavar="DURATION",
        help="with --manage-certs: the CA's validity (default 87600h)",
    )
    serve.add_argument(
        "--cert-renew-before",
        type=argtypes.duration,
        default="720h",
        metavar="DURATION",
        help="with --manage-certs: replace the CA or serving certificate this long before it expires "
        "(default 720h; less than either validity)",
    )


def cert_target(args: argparse.Namespace, namespace: str) -> Target:
    """The certificate controller's Target from `serve`'s flags (guardhook.certsync). Raises
    CommandError when --cert-renew-before is not below both validities (it would rotate every round)."""
    from guardhook.certsync.apply import Target
    from guardhook.certsync.issue import CertSettings, service_names

    for flag, validity in (("--cert-validity", args.cert_validity), ("--ca-validity", args.ca_validity)):
        if args.cert_renew_before >= validity:
            raise CommandError(
                f"--cert-renew-before ({args.cert_renew_before}) must be less than {flag} ({validity})"
            )
    settings = CertSettings(
        names=(*service_names(args.cert_service, namespace), *args.dns),
        validity=args.cert_validity,
        ca_validity=args.ca_validity,
        renew_before=args.cert_renew_before,
    )
    return Target(namespace, args.manage_certs, settings, tuple(args.ca_bundle_webhook or ["guardhook"]))


def run_serve(args: argparse.Namespace) -> int:
    """Serve until stopped; exit 2 (SourceError, ConfigError, CertificateError, CommandError) before
    serving when the configuration, certificates, cluster source or flags cannot be used, each judged
    before the listening address is tried (the address last)."""
    from guardhook.admission.engine import Engine
    from guardhook.cluster.kube_transport import live_view
    from guardhook.cluster.sources import choose_source, in_cluster, in_cluster_namespace
    from guardhook.config import load_config
    from guardhook.ledger import open_ledger
    from guardhook.ledger.lease import start_sweeper
    from guardhook.pdbsync.runner import start_background_sync
    from guardhook.server.app import Runtime
    from guardhook.server.certs import ensure_certs, with_client_ca
    from guardhook.server.clientauth import client_auth
    from guardhook.server.configwatch import ConfigWatcher
    from guardhook.server.metricsport import serve_health, serve_metrics
    from guardhook.server.webhook_server import ServeOptions, WebhookServer

    named = [
        ("--port", args.port),
        ("--metrics-port", args.metrics_port),
        ("--health-port", args.health_port),
    ]
    given = [(flag, port) for flag, port in named if port]
    for at, (flag, port) in enumerate(given):
        for other, same in given[at + 1 :]:
            if port == same:
                raise CommandError(f"{flag} and {other} must differ (both {port})")
    ports = [args.port, *(port for flag, port in given if flag != "--port")]
    config = load_config(args.config, args.enforcement)
    source = choose_source(args.cluster_state, args.kubeconfig)
    if args.sync_group_pdbs and not source.live:
        raise SourceError("--sync-group-pdbs needs a live cluster (--kubeconfig or in-cluster config)")
    if args.sync_group_readiness and not source.live:
        raise SourceError("--sync-group-readiness needs a live cluster (--kubeconfig or in-cluster config)")
    if args.sync_leader_services and not source.live:
        raise SourceError("--sync-leader-services needs a live cluster (--kubeconfig or in-cluster config)")
    if args.client_cn and not args.client_ca_file:
        raise CommandError("--client-cn needs --client-ca-file (the CA the client certificate must chain to)")
    namespace = args.namespace or in_cluster_namespace()
    cert_sync = None
    if args.manage_certs:
        if not source.live:
            raise SourceError("--manage-certs needs a live cluster (--kubeconfig or in-cluster config)")
        cert_sync = cert_target(args, namespace)
        wait_for_managed_certs(source, cert_sync, args.cert_dir)
    certs = ensure_certs(args.cert_dir, args.dns, in_cluster=in_cluster())
    auth = None
    if args.client_ca_file:
        certs = with_client_ca(certs, args.client_ca_file)
        auth = client_auth(args.client_cn)
    log.info(
        "cluster view: %s; guardhook namespace %s; certificates in %s",
        source.describe(),
        namespace,
        certs.folder,
    )
    static_view: ClusterView | None = None
    if source.live:
        live_client(source).close()  # fail fast on an unusable kubeconfig; the worker builds the view
    else:
        # Fail fast on unreadable manifests; the worker forked from here uses this same view, so
        # the manifests are read (and the sample-fleet warning logged) once.
        static_view = open_view(source, config.stale_after_seconds)
    # Last: every flag and the cluster source are judged before any port is tried, so a refused
    # flag says why even while another server holds the port.
    check_listenable(args.host, ports)

    def make_runtime() -> Runtime:
        from guardhook.server.coverage_metrics import coverage_startup

        runtime = build_runtime()
        runtime.client_auth = auth
        log_callers(auth, certs)  # in the worker: its decision log is the one that writes
        # gaps and certificates (expiry, reloads) on /metrics, expiry in the log
        coverage_startup(runtime, certs, lambda: server.tls)
        if args.config:  # a changed file (a ConfigMap update) applies without a restart
            ConfigWatcher(
                args.config, args.enforcement, runtime.engine, runtime.metrics.config_reloaded
            ).start()
        if args.metrics_port:
            serve_metrics(runtime, args.host, args.metrics_port)
        if args.health_port:
            serve_health(runtime, args.host, args.health_port)
        return runtime

    def build_runtime() -> Runtime:
        # Runs in the gunicorn worker after fork, so the watch threads live there.
        # The eviction ledger: in memory for a static view, Leases in `namespace` for a live one.
        ledger = open_ledger(source, namespace)
        start_sweeper(ledger)  # Leases of LWSs gone (whose entries all expired) are deleted
        if static_view is not None:
            view = static_view
            scaling_startup(view, config)
            runtime = Runtime(Engine(view, config, ledger=ledger, log_decisions=True))
            group_readiness_startup(runtime, config)
            leader_service_sync_startup(runtime)
            return runtime
        live = using_source(source, "use", lambda: live_view(source, config.stale_after_seconds))
        scaling_startup(live.view, config)  # the capacity index follows the watches from the start
        live.start()
        runtime = Runtime(Engine(live.view, config, ledger=ledger, log_decisions=True))
        if cert_sync is not None:  # rotation and caBundles, by the Lease holder only
            from guardhook.certsync.runner import start_background_sync as start_cert_sync

            start_cert_sync(live_client(source), cert_sync)
        if args.sync_group_pdbs:  # plans from this same live view
            start_background_sync(live_client(source), namespace, lambda: live.view)
        api = live_client(source) if args.sync_group_readiness else None
        group_readiness_startup(runtime, config, api, namespace)
        leader_service_sync_startup(
            runtime, live_client(source) if args.sync_leader_services else None, namespace
        )
        runtime.collectors.append(live.collect)
        return runtime

    options = ServeOptions(
        host=args.host,
        port=args.port,
        threads=args.threads,
        certs=certs,
        request_timeout=args.request_timeout,
        max_connections=args.max_connections,
        max_body_in_flight=body_bound(args.max_body_bytes_in_flight),
    )
    server = WebhookServer(options, make_runtime)
    server.run()
    return 0


def wait_for_managed_certs(source: Source, target: Target, cert_dir: str) -> None:
    """With --manage-certs, before the server listens: have the Secret hold certificates and wait
    until they are mounted in `cert_dir` (guardhook.certsync.runner.wait_until_mounted); at once
    when they are there already."""
    from pathlib import Path

    from guardhook.certsync.runner import mounted, wait_until_mounted

    if mounted(Path(cert_dir)):
        return
    log.info("no certificate in %s yet: making it in Secret %s/%s", cert_dir, target.namespace, target.secret)
    api = live_client(source)
    try:
        wait_until_mounted(api, target, Path(cert_dir))
    finally:
        api.close()


def body_bound(given: int | None) -> int:
    """The bound on request bytes in flight: `given` (--max-body-bytes-in-flight), else the default
    derived from the memory limit (guardhook.server.bodybudget); logged either way."""
    from guardhook.server.bodybudget import default_budget, mib

    bound, why = (given, "--max-body-bytes-in-flight") if given else default_budget()
    log.info("request bodies held at once are bounded to %s (%s); past it: 503", mib(bound), why)
    return bound


def log_callers(auth: ClientAuth | None, certs: CertPaths) -> None:
    """Say at start who may ask for reviews. Without client authentication, have the decision log
    write every allowed disruption at INFO with its caller (guardhook.admission.decisionlog), since
    anyone who reaches the port could spend a group's budget."""
    from guardhook.admission.decisionlog import log_allowed_disruptions

    if auth is not None:
        log.info(
            "client certificates required on the review endpoints: CA %s, names %s",
            certs.client_ca,
            auth.wanted(),
        )
        return
    log_allowed_disruptions(True)
    log.info(
        "no client authentication (--client-ca-file): any caller that reaches the port may ask for reviews; "
        "each allowed disruption is logged at INFO with its caller"
    )


def check_listenable(host: str, ports: list[int]) -> None:
    """Raise CommandError (exit 2, one line) when `host` cannot be listened on at each of `ports`:
    an address in use (another guardhook, the metrics or health port taken), an address not on
    this machine or a name that does not resolve (run_serve refuses one port given twice before).
    gunicorn would otherwise retry for 5 s and exit 1, or, for the metrics or health port bound in
    the worker, log a traceback and exit 3."""
    for port in ports:
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
                sock.bind(address)
        except OSError as exc:  # socket.gaierror included
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def group_readiness_startup(runtime: Any, config: Config, api: Any = None, namespace: str = "") -> None:
    """Register the group-readiness gauges on `runtime`'s /metrics; with `api` (an ApiClient),
    also start the group-readiness reconciler on the runtime's live view, leader-elected on a
    Lease in `namespace`, reporting into the runtime's metrics."""
    from guardhook.readiness.runner import Observer, start_background_sync
    from guardhook.server.metrics import GateCollector, GroupReadinessMetrics

    params = config.settings("group-readiness").params
    all_lws = bool(params.get("allLeaderWorkerSets", False))
    window = float(params.get("startupWindowSeconds", 1800))
    registry = runtime.metrics.registry
    registry.register(GateCollector(lambda: runtime.engine.view, all_lws, window))
    if api is None:
        return
    metrics = GroupReadinessMetrics(registry)
    observer = Observer(patched=metrics.patched, ready_after=metrics.delay.observe)
    start_background_sync(api, namespace, runtime.engine.view, all_lws, observer=observer)


def leader_service_sync_startup(runtime: Any, api: Any = None, namespace: str = "") -> None:
    """Register the leader-service-sync metrics on `runtime`'s /metrics; with `api` (an
    ApiClient), also start the reconciler on the runtime's live view, leader-elected on a Lease in
    `namespace`, following the engine's configuration (a reload included), reporting into them."""
    from guardhook.leadersync.runner import Observer, start_background_sync
    from guardhook.server.metrics import LeaderServiceSyncMetrics

    metrics = LeaderServiceSyncMetrics(runtime.metrics.registry)
    if api is None:
        return
    observer = Observer(patched=metrics.patched, unnarrowed=metrics.unnarrowed)
    engine = runtime.engine
    start_background_sync(api, namespace, engine.view, lambda: engine.config, observer=observer)


def scaling_startup(view: ClusterView, config: Config) -> None:
    """At start: build the group model's indexes (guardhook.groups.warm) and the capacity index now rather
    than on the first request (on a live view they then follow the watches), and warn about a
    missing LWS controller exemption once the view holds what the cluster holds (a live view syncs
    in the background)."""
    from guardhook.groups import warm
    from guardhook.policies.group_capacity import warm_capacity_index
    from guardhook.policies.pod_counted_scaler import startup_checks

    warm(view)
    warm_capacity_index(view)
    if view.synced:
        startup_checks(view, config)
        return

    def check_when_synced() -> None:
        while not view.synced:
            time.sleep(1.0)
        startup_checks(view, config)

    threading.Thread(target=check_when_synced, name="guardhook-startup-checks", daemon=True).start()
