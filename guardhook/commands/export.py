"""`guardhook export admission-policies`: write guardhook's admission-policy floor — the rules that
need no cluster view, as ValidatingAdmissionPolicy and Binding objects the API server evaluates in
process — from guardhook's configuration (guardhook.floor.export). The YAML starts with comments
that say what was exported, what was left out and why, and each expression's estimated CEL cost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from guardhook.commands import argtypes
from guardhook.commands.common import CommandError

WHAT = ("admission-policies",)


def add_parser(commands: Any) -> None:
    """Register `guardhook export` on the CLI's subparsers."""
    cmd = commands.add_parser(
        "export",
        help="write guardhook's lookup-free rules as ValidatingAdmissionPolicies (the floor that holds "
        "while guardhook is down)",
    )
    # named after its one choice, so a bare `guardhook export` says which argument is missing
    cmd.add_argument("what", choices=WHAT, metavar="admission-policies", help="what to export")
    cmd.add_argument("--config", metavar="FILE", help="guardhook's configuration (default: the defaults)")
    cmd.add_argument(
        "--enforcement",
        choices=("deny", "audit"),
        default="deny",
        help="audit turns every Deny into Audit, as for serve (default deny)",
    )
    cmd.add_argument(
        "--api-version",
        choices=("v1", "v1beta1"),
        default="v1",
        help="admissionregistration.k8s.io version: v1 (Kubernetes 1.30+) or v1beta1 (1.28-1.29) "
        "(default v1)",
    )
    cmd.add_argument(
        "--exclude-namespace",
        action="append",
        type=argtypes.dns_label,
        default=[],
        metavar="NS",
        help="a namespace the floor leaves out, as every webhook entry does (repeatable; default "
        "kube-system, kube-node-lease, guardhook-system: an install in another namespace names its "
        "own, as the chart does)",
    )
    cmd.add_argument("--out", metavar="FILE", help="write the YAML to FILE (default: standard output)")
    cmd.set_defaults(run=run_export)


def run_export(args: argparse.Namespace) -> int:
    """Write the floor; exit 0, or 2 for a bad configuration or an unwritable --out."""
    from guardhook.cluster.coverage import EXCLUDED_NAMESPACES
    from guardhook.config import load_config
    from guardhook.floor.export import export_floor, render

    config = load_config(args.config, args.enforcement)
    excluded = tuple(args.exclude_namespace) or EXCLUDED_NAMESPACES
    text = render(export_floor(config, args.api_version, excluded))
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.out).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    return 0
