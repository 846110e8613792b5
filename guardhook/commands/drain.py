"""`guardhook drain NODE…` (also `kubectl guardhook drain`): drain nodes one whole group at a time,
carrying out `drain-plan`'s plan (guardhook.planning.drain_run). Pods in no group are evicted as
`kubectl drain` evicts them, with its flags and their meanings.

Progress: plain lines (waves, groups, pods, elapsed time), a progress bar as well on a terminal,
or with `--output json` one JSON event per line for automation.

Exit codes: 0 drained, 1 stopped with groups or pods left (each named with why), 2 bad input
(unknown node, no node, a selector that cannot be parsed, an unusable kubeconfig or config), 130
interrupted (Ctrl-C; one line, no traceback: run it again to resume).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from guardhook.commands import argtypes
from guardhook.commands.common import SourceError, live_client, using_source

if TYPE_CHECKING:
    from collections.abc import Sequence

    from guardhook.config import Config
    from guardhook.planning.drain_run import DrainOptions
    from guardhook.wire import KubeObject

EXIT_DRAINED = 0
EXIT_LEFT = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C
EVICTION_POLICY = "group-eviction"
DELETE_POLICY = "worker-delete"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def duration(text: str) -> float:
    """A duration as kubectl takes one (`90`, `90s`, `5m`, `1h30m`; 0 for no limit), in seconds.
    Raises argparse.ArgumentTypeError otherwise."""
    match = _DURATION.match(text.strip())
    if not text.strip() or not match:
        raise argparse.ArgumentTypeError(f"{text} is not a duration (e.g. 90s, 5m, 1h)")
    hours, minutes, seconds = (float(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def grace_period(text: str) -> int:
    """kubectl's --grace-period: seconds, or -1 for each pod's own. Raises ArgumentTypeError."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of seconds") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"{text} must be -1 (the pod's own) or more")
    return value


def add_parser(commands: Any) -> None:
    """Register `guardhook drain` on the CLI's subparsers."""
    drain = commands.add_parser(
        "drain",
        help="drain nodes one whole group at a time: carry out drain-plan's waves, within each set's budget",
    )
    drain.add_argument(
        "nodes", nargs="*", metavar="NODE", type=argtypes.dns_subdomain, help="nodes to drain, in order"
    )
    drain.add_argument(
        "--selector", "-l", metavar="SELECTOR", help="drain the nodes with these labels (e.g. pool=gpu-a)"
    )
    drain.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="the cluster to drain (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)",
    )
    drain.add_argument("--config", metavar="FILE", help="policy configuration (YAML): the group budgets")
    drain.add_argument(
        "--delete-emptydir-data",
        action="store_true",
        help="evict pods with emptyDir volumes too (their data is lost), as kubectl drain",
    )
    drain.add_argument(
        "--force", action="store_true", help="evict pods no controller manages too, as kubectl drain"
    )
    drain.add_argument(
        "--grace-period",
        type=grace_period,
        default=-1,
        metavar="SECONDS",
        help="seconds each pod gets to terminate (default -1: the pod's own)",
    )
    drain.add_argument(
        "--timeout",
        type=duration,
        default=0.0,
        metavar="DURATION",
        help="give up after this long, naming what is left (e.g. 30m; default 0: no limit)",
    )
    drain.add_argument(
        "--dry-run",
        choices=("none", "client", "server"),
        default="none",
        help="client: print what it would do; server: send every request as a dry run (default none)",
    )
    drain.add_argument(
        "--disrupt-without-room",
        action="store_true",
        help="restart groups even where drain-plan finds no room to rebuild them (they stay down)",
    )
    drain.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="text, or one JSON event per line (default text)",
    )
    drain.add_argument(
        "--poll-interval",
        type=argtypes.positive_seconds,
        default=2.0,
        metavar="SECONDS",
        help="how often to look at the cluster while waiting for a group (default 2)",
    )
    drain.set_defaults(run=run_drain)


def run_drain(args: argparse.Namespace) -> int:
    """Drain; return 0 (drained) or 1 (something left, named). Raises SourceError (exit 2) for bad
    input or an unusable cluster."""
    from guardhook.cluster.drain_calls import KubeDrainCalls
    from guardhook.cluster.sources import choose_source
    from guardhook.commands.common import require_cluster
    from guardhook.config import load_config
    from guardhook.planning.drain import UnknownNodeError
    from guardhook.planning.drain_run import Drain

    if args.nodes and args.selector:
        raise SourceError("give the nodes to drain or --selector, not both")
    if not args.nodes and not args.selector:
        raise SourceError("no node given: give the nodes to drain, or --selector LABELS")
    selector = _selector(args.selector) if args.selector else None
    config = load_config(args.config)  # bad local input is refused before the cluster is read
    source = choose_source((), args.kubeconfig)
    require_cluster(source, "drain", cluster_state=False)  # drain takes no --cluster-state
    calls = KubeDrainCalls(live_client(source, retries=False))
    objects = using_source(source, "list objects from", calls.objects)
    nodes = tuple(args.nodes) if selector is None else _selected(objects, selector, args.selector)
    options = _options(args, config, nodes)
    report = Report(args.output, sys.stdout, time.monotonic())
    drain = Drain(_Cached(calls, objects, source), options, report.event)
    try:
        with report:
            result = drain.run()
    except UnknownNodeError as exc:
        raise SourceError(f"{exc} (not in {source.describe()})") from exc
    except KeyboardInterrupt:
        # No traceback: the drain keeps no state, so the next run picks up where the cluster is.
        print(
            "guardhook drain: interrupted; run it again to go on from where the cluster is", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    return EXIT_DRAINED if result.drained else EXIT_LEFT


class _Cached:
    """The calls, with the first listing (already made to resolve --selector) served once more,
    and every later listing's errors turned into SourceError naming the cluster."""

    def __init__(self, calls: Any, first: Sequence[KubeObject], source: Any) -> None:
        self.calls, self.source = calls, source
        self.first: Sequence[KubeObject] | None = first

    def objects(self) -> Sequence[KubeObject]:
        if self.first is not None:
            first, self.first = self.first, None
            return first
        return using_source(self.source, "list objects from", self.calls.objects)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.calls, name)


def _selector(text: str) -> Any:
    from guardhook.cluster.selectors import SelectorError, parse

    try:
        return parse(text)
    except SelectorError as exc:
        raise SourceError(f"--selector: {exc}") from exc


def _selected(objects: Sequence[KubeObject], selector: Any, text: str) -> tuple[str, ...]:
    """The names of the nodes whose labels `selector` matches, by name; SourceError for none."""
    from guardhook.cluster.selectors import matches

    found = sorted(
        str((obj.get("metadata") or {}).get("name") or "")
        for obj in objects
        if obj.get("kind") == "Node" and matches(selector, (obj.get("metadata") or {}).get("labels") or {})
    )
    if not found:
        raise SourceError(f"no node matches --selector {text}")
    return tuple(found)


def _options(args: argparse.Namespace, config: Config, nodes: tuple[str, ...]) -> DrainOptions:
    from guardhook.planning.drain_run import DrainOptions
    from guardhook.policies.worker_delete import drain_conditions, drain_taint_keys

    delete_params = config.settings(DELETE_POLICY).params
    return DrainOptions(
        nodes=nodes,
        params=config.settings(EVICTION_POLICY).params,
        drain_taint_keys=tuple(drain_taint_keys(delete_params)),
        drain_conditions=tuple(drain_conditions(delete_params)),
        grace_seconds=None if args.grace_period < 0 else args.grace_period,
        timeout_seconds=args.timeout,
        delete_emptydir_data=args.delete_emptydir_data,
        force=args.force,
        dry_run=args.dry_run,
        disrupt_without_room=args.disrupt_without_room,
        poll_seconds=args.poll_interval,
    )


class Report:
    """Prints the drain's events: one JSON object per line (`json`), or lines for people with the
    elapsed time, plus a rich progress bar of the groups and pods when `out` is a terminal. A
    `waiting` event is printed once per group and reason, not on every look."""

    def __init__(self, output: str, out: TextIO, started: float) -> None:
        self.output, self.out, self.started = output, out, started
        self.last_wait: tuple[str, str] | None = None
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> Report:
        if self.output == "text" and self.out.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            console = Console(file=self.out)
            self.progress = Progress(
                "{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
            )
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def event(self, kind: str, **fields: Any) -> None:
        """One event: `kind` and its fields (guardhook.planning.drain_run's emit)."""
        elapsed = round(time.monotonic() - self.started, 1)
        if self.output == "json":
            print(json.dumps({"event": kind, "elapsed": elapsed, **fields}), file=self.out, flush=True)
            return
        self._advance(kind, fields)
        line = self._line(kind, fields)
        if line is None:
            return
        text = f"[{elapsed:7.1f}s] {line}"
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.out, flush=True)

    def _advance(self, kind: str, fields: dict[str, Any]) -> None:
        if self.progress is None:
            return
        if kind == "plan":
            self.task = self.progress.add_task("groups and pods", total=fields["groups"] + fields["pods"])
        elif self.task is not None and (
            kind in ("rebuilt", "left", "pod") or (kind == "group" and fields.get("action") == "none")
        ):
            self.progress.advance(self.task)

    def _line(self, kind: str, fields: dict[str, Any]) -> str | None:
        if kind == "waiting":
            wait = (fields["group"], fields["why"])
            if wait == self.last_wait:
                return None
            self.last_wait = wait
            return f"  waiting for {fields['group']}: {fields['why']}"
        self.last_wait = None
        return _LINES[kind](fields) if kind in _LINES else f"{kind}: {fields}"


def _done(fields: dict[str, Any]) -> str:
    if fields["drained"]:
        return f"drained: {fields['restarted']} groups taken whole, {fields['evicted']} pods evicted"
    left = len(fields["left"])
    return f"stopped with {left} thing{'' if left == 1 else 's'} left (named above)"


def _group(fields: dict[str, Any]) -> str:
    action = fields["action"]
    if action == "restart":
        return f"  {fields['group']}: restarting it (deleting leader {fields['pod']}, foreground)"
    if action == "evict":
        return f"  {fields['group']}: evicting its {len(fields['pods'])} pods at once"
    return f"  {fields['group']}: {fields['why']}"


_LINES: dict[str, Any] = {
    "start": lambda f: (
        f"draining {', '.join(f['nodes'])}" + ("" if f["dryRun"] == "none" else f" (dry run: {f['dryRun']})")
    ),
    "cordon": lambda f: f"node {f['node']} {'cordoned already' if f['already'] else 'cordoned'}",
    "plan": lambda f: f"{f['waves']} waves, {f['groups']} groups and {f['pods']} other pods on the nodes",
    "wave": lambda f: f"wave {f['wave']}/{f['of']}: {', '.join(f['nodes'])}",
    "group": _group,
    "rebuilt": lambda f: f"  {f['group']}: whole and Ready elsewhere after {f['seconds']}s",
    "pod": lambda f: f"  pod {f['pod']}: evicting",
    "retry": lambda f: f"  {f['pod']}: 429, retrying ({f['why']})",
    "left": lambda f: f"LEFT {f['what']}: {f['why']}",
    "done": _done,
}
