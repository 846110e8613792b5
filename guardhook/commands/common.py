"""What every command shares: the view and config flags, opening the cluster view, and the one
place that turns an unusable cluster source into a clear error (SourceError, exit 2).

Imported by every command module at start, so it imports nothing heavy at module level: the
Kubernetes client and the cluster view are imported inside the functions that use them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from guardhook.commands import argtypes

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from guardhook.cluster.sources import Source
    from guardhook.cluster.view.store import ClusterView

EXIT_USAGE = 2

T = TypeVar("T")


class CommandError(RuntimeError):
    """A command cannot do what it was asked with the input it was given: the CLI prints the
    message as one line and exits 2 (EXIT_USAGE)."""


class SourceError(CommandError):
    """The configured cluster source cannot be used."""


def add_view_flags(parser: argparse.ArgumentParser, kubeconfig_help: str, enforcement: bool = True) -> None:
    """Flags that choose the cluster view and configuration, shared by every command;
    `kubeconfig_help` says what the command does with that cluster (`serve` watches it, the one-shot
    commands list it once); `enforcement` False for a command that judges no request (no
    `--enforcement`, which only turns Deny actions into Audit)."""
    parser.add_argument(
        "--cluster-state",
        action="append",
        default=[],
        metavar="PATH",
        help="build the cluster view from YAML/JSON manifests or `kubectl get -o yaml` dumps (repeatable)",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{kubeconfig_help} (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)",
    )
    if enforcement:
        add_config_flags(parser)
    else:
        parser.add_argument("--config", metavar="FILE", help="policy configuration (YAML)")


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """`--config FILE` and `--enforcement deny|audit`."""
    parser.add_argument("--config", metavar="FILE", help="policy configuration (YAML)")
    parser.add_argument(
        "--enforcement",
        choices=("deny", "audit"),
        default="deny",
        help="audit: turn every Deny into Audit, for a cluster-wide dry run (default deny)",
    )


def require_cluster(source: Source, command: str, cluster_state: bool = True) -> None:
    """Raise SourceError when `source` is the bundled sample fleet: `command` (the caller, whose
    name the CLI's error prefix carries) judges or changes a
    real cluster, so it must never pretend the sample fleet is one (the fleet is for `serve`'s
    first run and for `--cluster-state` demos). `cluster_state` False: the command takes no
    `--cluster-state` (`drain`), so the line does not offer it."""
    from guardhook.cluster.sources import EMBEDDED

    if source.kind != EMBEDDED:
        return
    if not cluster_state:
        raise SourceError(
            "no cluster configured: pass --kubeconfig FILE (or set $KUBECONFIG, or run in a pod); "
            f"{command} works on a live cluster only (`guardhook drain-plan` plans on the sample "
            "fleet or --cluster-state PATH)"
        )
    raise SourceError(
        "no cluster configured: pass --kubeconfig FILE or --cluster-state PATH "
        "(or set $KUBECONFIG, or run in a pod)"
    )


def using_source(source: Source, doing: str, make: Callable[[], T]) -> T:
    """Run `make` (which reads `source`'s kubeconfig or API server) and turn any failure into a
    SourceError that says what was being done and where: the one wrapper for live-source errors.

    Kubernetes raises ConfigException, ApiException, urllib3 errors, file errors and ValueError
    here; none of them may reach the user as a traceback."""
    try:
        return make()
    except Exception as exc:  # bad kubeconfig, unreachable server, HTTP errors
        from kubernetes.client.exceptions import ApiException

        from guardhook.cluster.kube import api_error

        reason = api_error(exc) if isinstance(exc, ApiException) else str(exc)
        raise SourceError(f"cannot {doing} {source.describe()}: {reason}") from exc


LISTING = "list objects from"
"""What a one-shot command was doing when listing a live cluster failed, as its error line says it
(`cannot list objects from kubeconfig FILE: …`): one wording for `review`, `audit`, `drain-plan`."""


PROGRAM = ["guardhook"]
"""How a warning names the running command (`guardhook check`; set by guardhook.commands.main)."""

INSECURE = (
    "{kubeconfig} sets insecure-skip-tls-verify: the API server's certificate is not verified, so the "
    "cluster read may be a server that is not your cluster"
)
"""The one line every command says for a kubeconfig whose server certificate is not verified,
instead of urllib3's InsecureRequestWarning (file, line and source, once per request)."""

_insecure_said: set[str] = set()


def live_client(source: Source, retries: bool = True) -> ApiClient:
    """An API client for a live `source`; `retries=False` for one-shot commands, so an unreachable
    API server is one error line at once rather than urllib3's "Retrying (Retry(...))" warnings
    before it. A kubeconfig with insecure-skip-tls-verify is said once (INSECURE) and urllib3's
    per-request warning silenced. Raises SourceError for an unusable kubeconfig, worded one way for
    every command: `cannot use kubeconfig FILE: no such file` (not UTF-8 text, not valid YAML, …)."""
    from guardhook.cluster.kube import api_client

    api = using_source(source, "use", lambda: api_client(source, retries=retries))
    if not api.configuration.verify_ssl:
        _say_insecure(source)
    return api


def _say_insecure(source: Source) -> None:
    import warnings

    from urllib3.exceptions import InsecureRequestWarning

    warnings.simplefilter("ignore", InsecureRequestWarning)  # said once below, not once per request
    kubeconfig = source.paths[0] if source.paths else "the kubeconfig"
    if kubeconfig not in _insecure_said:
        _insecure_said.add(kubeconfig)
        print(f"{PROGRAM[0]}: warning: {INSECURE.format(kubeconfig=kubeconfig)}", file=sys.stderr)


def open_view(source: Source, stale_after_seconds: float) -> ClusterView:
    """The view for one-shot commands: manifests or the sample fleet as they are; a live source is
    listed once (every kind, paginated, no watches). Raises SourceError when the kubeconfig cannot
    be used (worded by live_client, as for `audit`) or the API server cannot be listed (LISTING) —
    it never falls back to the sample fleet."""
    from guardhook.cluster.sources import static_view

    if not source.live:
        return static_view(source, stale_after_seconds)
    from guardhook.cluster.kube_transport import snapshot_view

    live_client(source, retries=False).close()  # an unusable kubeconfig, said as every command says it
    return using_source(source, LISTING, lambda: snapshot_view(source, stale_after_seconds))


def write_text(path: str, text: str) -> None:
    """Write `text` to `path`; SourceError when it cannot be written."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"cannot write {path}: {exc.strerror or exc}") from exc


def read_file(path: str) -> bytes:
    """The bytes of `path`; SourceError when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from exc


def add_reconciler_flags(
    parser: argparse.ArgumentParser,
    *,
    cluster_state_help: str,
    interval_help: str,
    dry_run_help: str,
    interval_default: float | None = None,
) -> None:
    """The flags every reconciler command takes (`pdb-sync`, `group-readiness`): where the cluster
    is, the election Lease's namespace, the round interval, `--once`, `--dry-run` and
    `--no-leader-elect` (dest `elect`)."""

    parser.add_argument(
        "--cluster-state", action="append", default=[], metavar="PATH", help=cluster_state_help
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="the cluster to reconcile (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)",
    )
    parser.add_argument(
        "--namespace",
        type=argtypes.dns_label,
        help="namespace of the election Lease (default: the pod's, else guardhook-system)",
    )
    parser.add_argument(
        "--interval", type=argtypes.positive_seconds, default=interval_default, help=interval_help
    )
    parser.add_argument("--once", action="store_true", help="one round, print what changed as JSON, exit")
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    parser.add_argument(
        "--no-leader-elect", dest="elect", action="store_false", help="reconcile without holding the Lease"
    )


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless one: "1 object", "3 findings", "0 nodes"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
