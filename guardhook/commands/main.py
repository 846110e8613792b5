"""The `guardhook` command line (design.md §4): the argparse entry; each command is its own module
with `add_parser(subparsers)` and a `run` default.

Start-up stays fast because building the parser imports nothing heavy: a command module imports
only the standard library and guardhook.commands.common/argtypes at module level, and everything
else (the engine, the policies, the Kubernetes client, flask, numpy, cryptography) inside the
function that runs the command. tests/test_cli_startup.py checks this for every module in COMMANDS,
so a command added here later is held to it too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from guardhook import __version__
from guardhook.commands import (
    audit,
    certs,
    check,
    config,
    drain,
    drain_plan,
    export,
    group_readiness,
    leader_service_sync,
    pdb_sync,
    review,
    serve,
    test,
    uninstall,
)
from guardhook.commands.common import EXIT_USAGE, CommandError
from guardhook.server.logformat import FORMATS
from guardhook.server.logformat import configure as configure_logging

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe
COMMANDS = (
    serve,
    review,
    check,
    audit,
    certs,
    pdb_sync,
    drain_plan,
    drain,
    group_readiness,
    leader_service_sync,
    uninstall,
    test,
    export,
    config,
)
ONE_SHOT = (
    "review",
    "check",
    "audit",
    "certs",
    "drain-plan",
    "drain",
    "uninstall",
    "test",
    "export",
    "config",
)
"""Commands a person runs and reads: warnings as `Warning: …`, log lines only with --verbose
(guardhook.commands.output). The others (serve, the reconcilers) log as configured."""

# Errors that mean bad configuration, input or source (exit 2 with one line), by module and name:
# looked up only in modules already imported, since an error cannot come from a module never loaded.
USAGE_ERRORS = (
    ("guardhook.config", "ConfigError"),
    ("guardhook.cluster.view.manifests", "ManifestError"),
    ("guardhook.server.certs", "CertificateError"),
    ("guardhook.server.cabundle", "ManifestsError"),
)


class OneLineErrors(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, `guardhook uninstall: error: argument
    --wait: -5 must be …`, exit 2 — without the usage text argparse prints above it (`--help` shows
    that), as every other bad input of a command is one line (docs/commands.md)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: global flags and one subparser per command module in COMMANDS, each
    reporting a usage error in one line (OneLineErrors)."""
    parser = OneLineErrors(
        prog="guardhook", description="Admission webhook that makes the LeaderWorkerSet group the unit."
    )
    add_version_flag(parser)
    add_global_flags(parser, defaults=True)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    for sub in subparsers.choices.values():
        # Also after the command (`guardhook check x --log-level DEBUG`): there they default to
        # nothing, so the value given before the command, or the global default, stays.
        group = sub.add_argument_group("global flags (also before the command)")
        add_version_flag(group)
        add_global_flags(group, defaults=False)
    return parser


def add_version_flag(parser: Any) -> None:
    """`--version` on `parser` (the top parser or a command's group): prints the version and exits 0
    as soon as argparse meets it, before the command's own arguments are checked or anything runs."""
    parser.add_argument("--version", action="version", version=f"guardhook {__version__}")


def add_global_flags(parser: Any, defaults: bool) -> None:
    """`--log-level` and `--log-format` on `parser` (the top parser, or a command's group, where
    `defaults=False` leaves them unset unless given)."""
    parser.add_argument(
        "--log-level",
        default="INFO" if defaults else argparse.SUPPRESS,
        type=str.upper,
        choices=LOG_LEVELS,
        help=f"{', '.join(LOG_LEVELS)} (default INFO)",
    )
    parser.add_argument(
        "--log-format",
        default="text" if defaults else argparse.SUPPRESS,
        choices=FORMATS,
        help="log lines as text or JSON (default text)",
    )
    suppress = {} if defaults else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="no colour, even on a terminal (also when NO_COLOR is set)",
        **suppress,
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="findings only: no summary or notes", **suppress
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="log lines on stderr (by default a one-shot command prints only `Warning: …` lines)",
        **suppress,
    )


def is_usage_error(exc: BaseException) -> bool:
    """Whether `exc` reports bad configuration, input or a cluster source (exit 2), not a bug."""
    if isinstance(exc, CommandError):
        return True
    for module_name, class_name in USAGE_ERRORS:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(exc, getattr(module, class_name)):
            return True
    return False


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse `argv`; an argument no parser takes is a usage error of the command it was given to,
    one line prefixed as every other (`guardhook drain: error: unrecognized arguments: --foo`),
    where argparse names only the top parser (`guardhook: error: …`)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the innermost command `args` chose (`guardhook config validate`'s): each
    level's subparsers store the name chosen under their dest. Its prog is the command's name."""
    while subparsers := [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]:
        parser = subparsers[0].choices[getattr(args, subparsers[0].dest)]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit 2 with one line on stderr for bad configuration, input or source."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parse(parser, argv)
    from guardhook.commands import common

    program = innermost(parser, args).prog  # `guardhook config validate`, as its usage errors say
    common.PROGRAM[0] = program
    configure_logging(str(args.log_level), args.log_format)
    if args.command in ONE_SHOT:
        from guardhook.commands.output import configure_logging as quiet_logs

        # a --log-level or --log-format given asks for log lines, as --verbose does
        asked = any(a.startswith(("--log-level", "--log-format")) for a in argv)
        quiet_logs(bool(args.verbose) or asked)
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:
        # The reader went away (`guardhook … | head`): stop quietly, as Unix tools do; point stdout
        # at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if not is_usage_error(exc):
            raise
        # one prefix for every command's errors, as kubectl's `error: `: the message itself
        # never names the command again
        print(f"{program}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
