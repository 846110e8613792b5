"""`guardhook review [FILE|-]`: judge one AdmissionReview offline and print the response."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from guardhook.admission.codec import ReviewError, decode, encode
from guardhook.admission.engine import Engine
from guardhook.admission.review import review_both
from guardhook.cluster.sources import choose_source
from guardhook.commands.common import EXIT_USAGE, add_view_flags, open_view, read_file
from guardhook.config import load_config


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
    add_view_flags(review)
    review.set_defaults(run=run_review)


def run_review(args: argparse.Namespace) -> int:
    """Print the response AdmissionReview; exit 2 when the input is not an AdmissionReview."""
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
    response = review_both(engine, decoded.request, args.endpoint)
    print(json.dumps(encode(decoded.api_version, response), indent=2))
    return 0
