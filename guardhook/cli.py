"""The `guardhook` command line (design.md §4): serve, review, certs, and more as they land."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import urllib3
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException

from guardhook import __version__, argtypes
from guardhook.app import Runtime
from guardhook.cabundle import ManifestsError, base_webhook_configurations, self_managed_certs, write_patches
from guardhook.certs import (
    CertificateError,
    CertPaths,
    ca_bundle,
    ensure_certs,
    generate,
    service_dns_names,
)
from guardhook.codec import ReviewError, decode, encode
from guardhook.config import Config, ConfigError, load_config
from guardhook.engine import Engine
from guardhook.kube import api_client
from guardhook.ledger import open_ledger
from guardhook.listing import list_cluster
from guardhook.pdb_sync_run import add_pdb_sync_command, start_background_sync
from guardhook.policies.group_capacity import warm_capacity_index
from guardhook.policies.pod_counted_scaler import startup_checks
from guardhook.review import review_both
from guardhook.scan import Located
from guardhook.server import ServeOptions, WebhookServer
from guardhook.sources import EMBEDDED, Source, choose_source, in_cluster, in_cluster_namespace, static_view
from guardhook.view.kube_transport import live_view, snapshot_view
from guardhook.view.live import LiveView
from guardhook.view.manifests import ManifestError, load_paths
from guardhook.view.static import embedded_fleet_objects
from guardhook.view.store import ClusterView

log = logging.getLogger("guardhook")

EXIT_USAGE = 2


def add_view_flags(parser: argparse.ArgumentParser) -> None:
    """Flags that choose the cluster view and configuration, shared by every command."""
    parser.add_argument(
        "--cluster-state",
        action="append",
        default=[],
        metavar="PATH",
        help="build the cluster view from YAML/JSON manifests or `kubectl get -o yaml` dumps (repeatable)",
    )
    parser.add_argument("--kubeconfig", help="watch the cluster of this kubeconfig")
    parser.add_argument("--config", help="policy configuration (YAML)")
    parser.add_argument(
        "--enforcement",
        choices=("deny", "audit"),
        default="deny",
        help="audit: turn every Deny into Audit, for a cluster-wide dry run",
    )


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="guardhook", description="Admission webhook that makes the LeaderWorkerSet group the unit."
    )
    parser.add_argument("--version", action="version", version=f"guardhook {__version__}")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help=", ".join(LOG_LEVELS)
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the webhook over HTTPS under gunicorn")
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    serve.add_argument("--port", type=argtypes.port, default=8443, help="port (default 8443)")
    serve.add_argument("--threads", type=argtypes.positive_int, default=8, help="request threads (default 8)")
    serve.add_argument(
        "--cert-dir", default="certs", help="folder with ca.crt, tls.crt, tls.key (default certs/)"
    )
    serve.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="extra SAN for a generated certificate"
    )
    serve.add_argument(
        "--namespace",
        help="namespace for guardhook's own objects (default: the pod's namespace, else guardhook-system)",
    )
    serve.add_argument(
        "--sync-group-pdbs",
        action="store_true",
        help="also keep one PodDisruptionBudget per group of LWSs annotated guardhook.io/group-pdbs",
    )
    add_view_flags(serve)
    serve.set_defaults(run=run_serve)

    review = commands.add_parser("review", help="judge one AdmissionReview offline and print the response")
    review.add_argument("file", nargs="?", default="-", help="review file, or - for standard input")
    review.add_argument(
        "--endpoint",
        choices=("both", "validate", "mutate"),
        default="both",
        help="both (default): mutate, apply the patch, then validate, as the API server does",
    )
    add_view_flags(review)
    review.set_defaults(run=run_review)

    add_check_parser(commands)
    add_audit_parser(commands)

    certs = commands.add_parser("certs", help="write a CA and serving certificate; print the caBundle")
    certs.add_argument(
        "--out",
        help="folder to write ca.crt, tls.crt, tls.key into (default certs/, or the self-managed overlay's "
        "certs/ with --patch-manifests)",
    )
    certs.add_argument("--service", default="guardhook", help="webhook Service name")
    certs.add_argument("--namespace", default="guardhook-system", help="webhook Service namespace")
    certs.add_argument("--dns", action="append", default=[], metavar="NAME", help="extra SAN")
    certs.add_argument(
        "--patch-manifests",
        metavar="DIR",
        help="also write the caBundle patches of the self-managed overlay of the manifests folder DIR",
    )
    certs.set_defaults(run=run_certs)
    add_pdb_sync_command(commands)
    return parser


def add_check_parser(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser("check", help="offline CI check of manifests (judged as CREATEs)")
    check.add_argument("paths", nargs="+", metavar="PATH", help="manifest files or folders, - for stdin")
    check.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    check.add_argument(
        "--cluster-state",
        action="append",
        default=[],
        metavar="PATH",
        help="extra objects for the view, e.g. Nodes (enables group-capacity) (repeatable)",
    )
    check.add_argument("--config", help="policy configuration (YAML)")
    check.add_argument(
        "--enforcement", choices=("deny", "audit"), default="deny", help="audit: turn every Deny into Audit"
    )
    check.set_defaults(run=run_check)


def add_audit_parser(commands: argparse._SubParsersAction) -> None:
    audit = commands.add_parser("audit", help="judge a cluster's existing objects; report groups per LWS")
    audit.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    audit.add_argument(
        "--write-reports", action="store_true", help="write wgpolicyk8s.io PolicyReports into the cluster"
    )
    audit.add_argument("--reports-file", metavar="PATH", help="write the PolicyReports as YAML to PATH")
    add_view_flags(audit)
    audit.set_defaults(run=run_audit)


def run_check(args: argparse.Namespace) -> int:
    from guardhook import check

    config = load_config(args.config, args.enforcement)
    result = check.check(args.paths, config, args.cluster_state)
    if args.format == "json":
        check.render_json(result, sys.stdout)
    else:
        check.render_text(result, sys.stdout, sys.stderr)
    return result.exit_code


def run_audit(args: argparse.Namespace) -> int:
    from guardhook import audit

    config = load_config(args.config, args.enforcement)
    source = choose_source(args.cluster_state, args.kubeconfig)
    objects, notes = _audit_objects(source)
    result = audit.audit(objects, config, notes=notes)
    if args.format == "json":
        audit.render_json(result, sys.stdout)
    else:
        audit.render_text(result, sys.stdout)
    reports = audit.policy_reports(result)
    if args.reports_file:
        _write_text(args.reports_file, yaml.safe_dump_all(reports, sort_keys=False))
    if args.write_reports:
        if not source.live:
            raise SourceError("--write-reports needs a live cluster; use --reports-file PATH offline")
        try:
            audit.write_reports(_live_client(source), reports)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError(f"cannot write PolicyReports to {source.describe()}: {exc}") from exc
    return 0


def _audit_objects(source: Source) -> tuple[list[Located], list[str]]:
    if not source.live:
        if source.kind == EMBEDDED:
            log.warning("no cluster configured: auditing the bundled sample fleet")
            return [Located("sample fleet", obj) for obj in embedded_fleet_objects()], []
        return [Located(m.source, m.obj) for m in load_paths(source.paths)], []
    try:
        listed = list_cluster(_live_client(source))
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise SourceError(f"cannot list objects from {source.describe()}: {exc}") from exc
    return [Located("cluster", obj) for obj in listed.objects], listed.notes


def _live_client(source: Source) -> ApiClient:
    try:
        return api_client(source)
    except (ConfigException, OSError, ValueError) as exc:
        raise SourceError(f"cannot use {source.describe()}: {exc}") from exc


def _write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"cannot write {path}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.run(args) or 0)
    except (ConfigError, ManifestError, CertificateError, SourceError, ManifestsError) as exc:
        print(f"guardhook: {exc}", file=sys.stderr)
        return EXIT_USAGE


class SourceError(RuntimeError):
    """The configured cluster source cannot be used."""


def open_view(source: Source, stale_after_seconds: float) -> ClusterView:
    """The view for one-shot commands: manifests or the sample fleet as they are; a live source is
    listed once (every kind, paginated, no watches). Raises SourceError when the API server cannot
    be listed — it never falls back to the sample fleet."""
    if not source.live:
        return static_view(source, stale_after_seconds)
    try:
        return snapshot_view(source, stale_after_seconds)
    except Exception as exc:  # bad kubeconfig, unreachable server, HTTP errors
        raise SourceError(f"cannot list the cluster of {source.describe()}: {exc}") from exc


def open_live_view(source: Source, stale_after_seconds: float) -> LiveView:
    """The (not yet started) watched view of a live source. Raises SourceError for unusable config."""
    try:
        return live_view(source, stale_after_seconds)
    except Exception as exc:  # kubernetes' ConfigException and file errors
        raise SourceError(f"cannot use {source.describe()}: {exc}") from exc


def run_serve(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.enforcement)
    source = choose_source(args.cluster_state, args.kubeconfig)
    if args.sync_group_pdbs and not source.live:
        raise SourceError("--sync-group-pdbs needs a live cluster (--kubeconfig or in-cluster config)")
    certs = ensure_certs(args.cert_dir, args.dns, in_cluster=in_cluster())
    namespace = args.namespace or in_cluster_namespace()
    log.info(
        "cluster view: %s; guardhook namespace %s; certificates in %s",
        source.describe(),
        namespace,
        certs.folder,
    )
    if source.live:
        open_live_view(source, config.stale_after_seconds)  # fail fast on an unusable kubeconfig
    else:
        open_view(source, config.stale_after_seconds)  # fail fast on unreadable manifests

    def make_runtime() -> Runtime:
        # Runs in the gunicorn worker after fork, so the watch threads live there.
        # The eviction ledger: in memory for a static view, Leases in `namespace` for a live one.
        ledger = open_ledger(source, namespace)
        if not source.live:
            view = open_view(source, config.stale_after_seconds)
            scaling_startup(view, config)
            return Runtime(Engine(view, config, ledger=ledger))
        live = open_live_view(source, config.stale_after_seconds)
        scaling_startup(live.view, config)  # the capacity index follows the watches from the start
        live.start()
        runtime = Runtime(Engine(live.view, config, ledger=ledger))
        if args.sync_group_pdbs:  # plans from this same live view
            start_background_sync(api_client(source), namespace, lambda: live.view)
        runtime.collectors.append(live.collect)
        return runtime

    options = ServeOptions(host=args.host, port=args.port, threads=args.threads, certs=certs)
    WebhookServer(options, make_runtime).run()
    return 0


def scaling_startup(view: ClusterView, config: Config) -> None:
    """At start: build the capacity index now rather than on the first scale-up (on a live view it
    then follows the watches), and warn about a missing LWS controller exemption once the view
    holds what the cluster holds (a live view syncs in the background)."""
    warm_capacity_index(view)
    if view.synced:
        startup_checks(view, config)
        return

    def check_when_synced() -> None:
        while not view.synced:
            time.sleep(1.0)
        startup_checks(view, config)

    threading.Thread(target=check_when_synced, name="guardhook-startup-checks", daemon=True).start()


def run_review(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.enforcement)
    source = choose_source(args.cluster_state, args.kubeconfig)
    view = open_view(source, config.stale_after_seconds)
    body = sys.stdin.buffer.read() if args.file == "-" else _read_file(args.file)
    try:
        decoded = decode(body)
    except ReviewError as exc:
        print(f"guardhook: {args.file}: not an AdmissionReview: {exc}", file=sys.stderr)
        return EXIT_USAGE
    engine = Engine(view, config, record=False)
    response = review_both(engine, decoded.request, args.endpoint)
    print(json.dumps(encode(decoded.api_version, response), indent=2))
    return 0


def _read_file(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc


def run_certs(args: argparse.Namespace) -> int:
    names = [*service_dns_names(args.service, args.namespace), *args.dns]
    manifests = Path(args.patch_manifests) if args.patch_manifests else None
    if manifests is not None:
        base_webhook_configurations(manifests)  # fail before writing anything
    out = args.out or (self_managed_certs(manifests) if manifests is not None else "certs")
    previous = CertPaths(Path(out)).ca
    previous_ca = previous.read_bytes() if previous.is_file() else None
    paths = generate(out, names)
    print(f"wrote {paths.ca}, {paths.cert}, {paths.key} for {', '.join(names)}", file=sys.stderr)
    if manifests is not None:
        for patch in write_patches(manifests, paths, previous_ca):
            print(f"wrote {patch}", file=sys.stderr)
    print(ca_bundle(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
