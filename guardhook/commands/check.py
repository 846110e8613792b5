"""`guardhook check PATH…`: the offline CI check of manifests (design.md §4).

Reads files, folders, multi-document YAML and `-` (standard input, e.g. `kustomize build .`),
builds a static cluster view from them plus `--cluster-state` extras, judges every object as a
CREATE through the one Engine and prints the violations. Exit codes: 0 clean (or only Warn /
Audit / Mutate results), 1 when a policy whose actions include Deny is violated, 2 on unreadable
input or configuration (raised as ManifestError / ConfigError for the CLI to report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from guardhook.cluster.view.manifests import ManifestError, load_paths, parse_text
from guardhook.cluster.view.static import view_from_objects
from guardhook.commands.scan import Finding, Located, scan, usable_policies
from guardhook.commands.synthetic import with_namespace
from guardhook.config import Config, load_config
from guardhook.policies import REGISTRY
from guardhook.policies.base import Policy

EXIT_CLEAN = 0
EXIT_DENIED = 1
STDIN = "-"


@dataclass
class CheckResult:
    """What `check` found: every finding (passes included), the policies skipped and why."""

    findings: list[Finding]
    skipped: dict[str, str] = field(default_factory=dict)
    objects: int = 0

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.violated]

    @property
    def exit_code(self) -> int:
        return EXIT_DENIED if any(f.outcome == "denied" for f in self.findings) else EXIT_CLEAN


def read_manifests(paths: Sequence[str], stdin: TextIO | None = None) -> list[Located]:
    """Objects from files, folders and "-" (stdin). Raises ManifestError naming what is unreadable."""
    located: list[Located] = []
    for path in paths:
        if path == STDIN:
            try:
                text = (stdin or sys.stdin).read()
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(f"-: cannot read standard input: {exc}") from exc
            located += [Located(STDIN, m.obj) for m in parse_text(text, STDIN)]
        else:
            located += [Located(m.source, m.obj) for m in load_paths([path])]
    return [Located(item.source, with_namespace(item.obj)) for item in located]


def check(
    paths: Sequence[str],
    config: Config,
    cluster_state: Sequence[str] = (),
    policies: Sequence[Policy] = REGISTRY,
    stdin: TextIO | None = None,
) -> CheckResult:
    """Judge every manifest under `paths` as a CREATE against a view of the manifests plus
    `cluster_state`. Raises ManifestError on unreadable input."""
    manifests = read_manifests(paths, stdin)
    extras = [m.obj for m in load_paths(cluster_state)] if cluster_state else []
    view = view_from_objects([*extras, *(m.obj for m in manifests)], source="check")
    usable = usable_policies(policies, view)
    skipped = {p.id: "no Nodes in the manifests or --cluster-state" for p in policies if p not in usable}
    findings = scan(view, config, usable, manifests)
    return CheckResult(findings, skipped, len(manifests))


def render_text(result: CheckResult, out: TextIO, err: TextIO) -> None:
    """One line per violation on `out`; skipped policies (once each) and a summary on `err`."""
    for policy_id, why in result.skipped.items():
        print(f"guardhook check: {policy_id} skipped: {why}", file=err)
    for finding in result.violations:
        print(finding.line(), file=out)
    denied = sum(1 for f in result.violations if f.outcome == "denied")
    print(
        f"guardhook check: {result.objects} objects, {len(result.violations)} findings, {denied} denied",
        file=err,
    )


def render_json(result: CheckResult, out: TextIO) -> None:
    """`{"objects", "violations": [Finding…], "skipped": {policy: why}, "exitCode"}` on `out`."""
    document = {
        "objects": result.objects,
        "violations": [f.as_dict() for f in result.violations],
        "skipped": result.skipped,
        "exitCode": result.exit_code,
    }
    json.dump(document, out, indent=2)
    out.write("\n")


def add_parser(commands: Any) -> None:
    """Register `guardhook check` on the CLI's subparsers."""
    check_cmd = commands.add_parser("check", help="offline CI check of manifests (judged as CREATEs)")
    check_cmd.add_argument("paths", nargs="+", metavar="PATH", help="manifest files or folders, - for stdin")
    check_cmd.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    check_cmd.add_argument(
        "--cluster-state",
        action="append",
        default=[],
        metavar="PATH",
        help="extra objects for the view, e.g. Nodes (enables group-capacity) (repeatable)",
    )
    check_cmd.add_argument("--config", help="policy configuration (YAML)")
    check_cmd.add_argument(
        "--enforcement", choices=("deny", "audit"), default="deny", help="audit: turn every Deny into Audit"
    )
    check_cmd.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Print the findings; the exit code is CheckResult.exit_code."""
    config = load_config(args.config, args.enforcement)
    result = check(args.paths, config, args.cluster_state)
    if args.format == "json":
        render_json(result, sys.stdout)
    else:
        render_text(result, sys.stdout, sys.stderr)
    return result.exit_code
