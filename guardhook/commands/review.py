"""`guardhook review [FILE|-]`: judge one AdmissionReview offline and print the response.

`--format review` (default) prints the response AdmissionReview as the API server would receive
it (the patch base64-encoded); `text` prints the decision, warnings, audit annotations and the
decoded JSONPatch for a person; `json` prints the same as one JSON object. `--exit-code` exits 1
when the request is denied, for scripts and CI.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from typing import Any, TextIO

from guardhook.commands.common import EXIT_USAGE, add_view_flags, open_view, read_file

EXIT_DENIED = 1
FORMATS = ("review", "text", "json")


def add_parser(commands: Any) -> None:
    """Register `guardhook review` on the CLI's subparsers."""
    review = commands.add_parser("review", help="judge one AdmissionReview offline and print the response")
    review.add_argument("file", nargs="?", default="-", help="review file, or - for standard input")
    review.add_argument(
        "--endpoint",
        choices=("both", "validate", "mutate"),
        default="both",
        help="both (default): mutate, apply the patch, then validate, as the API server does",
    )
    review.add_argument(
        "--format",
        choices=FORMATS,
        default="review",
        help="review (default): the response AdmissionReview; text: the decision, warnings and decoded "
        "patch for reading; json: the same as one JSON object",
    )
    review.add_argument(
        "--exit-code", action="store_true", help="exit 1 when the request is denied (default: 0 once judged)"
    )
    add_view_flags(review, "judge against the cluster of this kubeconfig, listed once")
    review.set_defaults(run=run_review)


def run_review(args: argparse.Namespace) -> int:
    """Print the response; exit 2 when the input is not an AdmissionReview, 1 on a denial with
    `--exit-code`, else 0."""
    from guardhook.admission.codec import ReviewError, decode, encode
    from guardhook.admission.engine import Engine
    from guardhook.admission.review import review_both
    from guardhook.cluster.sources import choose_source
    from guardhook.config import load_config

    config = load_config(args.config, args.enforcement)
    source = choose_source(args.cluster_state, args.kubeconfig)
    view = open_view(source, config.stale_after_seconds)
    body = sys.stdin.buffer.read() if args.file == "-" else read_file(args.file)
    try:
        decoded = decode(body)
    except ReviewError as exc:
        print(f"guardhook: {args.file}: not an AdmissionReview: {exc}", file=sys.stderr)
        return EXIT_USAGE
    engine = Engine(view, config, record=False)
    response = dict(review_both(engine, decoded.request, args.endpoint))
    if args.format == "review":
        print(json.dumps(encode(decoded.api_version, response), indent=2))  # type: ignore[arg-type]
    elif args.format == "json":
        print(json.dumps(summary(response), indent=2))
    else:
        render_text(response, sys.stdout)
    denied = response.get("allowed") is False
    return EXIT_DENIED if denied and args.exit_code else 0


def decoded_patch(response: dict[str, Any]) -> list[Any] | None:
    """The response's JSONPatch operations, decoded from base64 JSON; None when there is no patch.
    A patch that does not decode is returned as one `{"undecodable": …}` entry, never raised."""
    patch = response.get("patch")
    if not patch:
        return None
    try:
        ops = json.loads(base64.b64decode(patch, validate=True))
    except (binascii.Error, ValueError) as exc:
        return [{"undecodable": f"{exc}"}]
    return ops if isinstance(ops, list) else [ops]


def summary(response: dict[str, Any]) -> dict[str, Any]:
    """The response as one flat object with the patch decoded: `allowed`, `code`, `reason`,
    `message`, `warnings`, `auditAnnotations`, `patch` (JSONPatch operations or null)."""
    status = response.get("status") or {}
    return {
        "allowed": bool(response.get("allowed")),
        "code": status.get("code"),
        "reason": status.get("reason"),
        "message": status.get("message"),
        "warnings": list(response.get("warnings") or []),
        "auditAnnotations": dict(response.get("auditAnnotations") or {}),
        "patch": decoded_patch(response),
    }


def render_text(response: dict[str, Any], out: TextIO) -> None:
    """The decision on the first line (`allowed`, or `denied CODE REASON: message`), then one line
    per warning, audit annotation and JSONPatch operation."""
    brief = summary(response)
    if brief["allowed"]:
        print("allowed", file=out)
    else:
        reason = " ".join(str(part) for part in (brief["code"], brief["reason"]) if part)
        print(f"denied {reason}: {brief['message']}".replace(" :", ":"), file=out)
    for warning in brief["warnings"]:
        print(f"warning: {warning}", file=out)
    for key, value in brief["auditAnnotations"].items():
        print(f"audit: {key}: {value}", file=out)
    if brief["patch"] is None:
        return
    print("patch (JSONPatch):", file=out)
    for op in brief["patch"]:
        print("  " + json.dumps(op, separators=(", ", ": ")), file=out)
