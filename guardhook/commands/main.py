"""The `guardhook` command line (design.md §4): the argparse entry; each command is its own module
with `add_parser(subparsers)` and a `run` default."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from guardhook import __version__
from guardhook.cluster.view.manifests import ManifestError
from guardhook.commands import audit, certs, check, group_readiness, pdb_sync, review, serve
from guardhook.commands.common import EXIT_USAGE, SourceError
from guardhook.config import ConfigError
from guardhook.server.cabundle import ManifestsError
from guardhook.server.certs import CertificateError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
COMMANDS = (serve, review, check, audit, certs, pdb_sync, group_readiness)


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: global flags and one subparser per command module in COMMANDS."""
    parser = argparse.ArgumentParser(
        prog="guardhook", description="Admission webhook that makes the LeaderWorkerSet group the unit."
    )
    parser.add_argument("--version", action="version", version=f"guardhook {__version__}")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help=", ".join(LOG_LEVELS)
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit 2 with one line on stderr for bad configuration, input or source."""
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


if __name__ == "__main__":
    sys.exit(main())
