"""`guardhook config validate FILE` and `guardhook config schema`: check a configuration file
against guardhook's configuration schema and loader (the checks `serve` makes when it loads or
reloads it), and print that schema (guardhook.config_schema), e.g. for an editor.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_VALID = 0
EXIT_INVALID = 1


def add_parser(commands: Any) -> None:
    """Register `guardhook config` (validate, schema) on the CLI's subparsers."""
    cmd = commands.add_parser("config", help="validate a configuration file, or print its JSON Schema")
    actions = cmd.add_subparsers(dest="config_command", required=True, metavar="{validate,schema}")
    validate = actions.add_parser(
        "validate",
        help="check FILE as serve loads it: exit 0 valid, 1 invalid (one line per problem), 2 unreadable",
    )
    validate.add_argument("file", metavar="FILE", help="a guardhook configuration file (YAML)")
    validate.set_defaults(run=run_validate)
    schema = actions.add_parser("schema", help="print the configuration's JSON Schema (draft 7)")
    schema.set_defaults(run=run_schema)


def run_validate(args: argparse.Namespace) -> int:
    """Print `FILE: <problem>` per problem (exit 1) or `FILE: valid` (exit 0); an unreadable
    file raises ConfigError (exit 2, one line)."""
    from guardhook.config import config_problems, read_config_document

    problems = config_problems(read_config_document(args.file))
    for problem in problems:
        print(f"{args.file}: {problem}")
    if problems:
        return EXIT_INVALID
    print(f"{args.file}: valid")
    return EXIT_VALID


def run_schema(args: argparse.Namespace) -> int:
    """Print the configuration schema as JSON."""
    from guardhook.config_schema import config_schema

    sys.stdout.write(json.dumps(config_schema(), indent=2) + "\n")
    return EXIT_VALID
