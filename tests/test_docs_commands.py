"""docs/commands.md documents every command and every flag `guardhook --help` knows (the README's
promise): each subcommand has a row in the Commands table, and each of its long flags is named in
that row or in the paragraph on the flags every command shares; the global flags likewise."""

from __future__ import annotations

import argparse
import re

import pytest
from docs_helpers import DOCS, section

from guardhook.commands.main import build_parser

COMMANDS_DOC = DOCS / "commands.md"


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def long_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {opt for a in parser._actions for opt in a.option_strings if opt.startswith("--")} - {"--help"}


def table_rows() -> dict[str, str]:
    rows = {}
    for line in section(COMMANDS_DOC, "## Commands").splitlines():
        if match := re.match(r"\| `guardhook ([a-z-]+)[^`]*` \|", line):
            rows[match.group(1)] = line
    return rows


def shared_text() -> str:
    """The Commands section without its table: the global and shared flags."""
    lines = section(COMMANDS_DOC, "## Commands").splitlines()
    return "\n".join(line for line in lines if not line.startswith("|"))


def test_the_table_has_one_row_per_command() -> None:
    assert set(table_rows()) == set(subparsers())


@pytest.mark.parametrize("command", sorted(subparsers()))
def test_every_flag_of_a_command_is_documented(command: str) -> None:
    text = table_rows()[command] + shared_text()
    missing = {flag for flag in long_flags(subparsers()[command]) if f"`{flag}" not in text}
    assert not missing, f"{command}: {sorted(missing)}"


def test_the_global_flags_are_documented() -> None:
    missing = {flag for flag in long_flags(build_parser()) if f"--{flag.lstrip('-')}" not in shared_text()}
    assert not missing


def test_the_audit_json_keys_are_the_documented_ones(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from guardhook.commands.main import main

    from conftest import FIXTURES

    text = " ".join(section(COMMANDS_DOC, "## `guardhook audit`").split())
    match = re.search(r"`--format json` prints `\{([^}]*)\}`", text)
    assert match, "the audit section names its JSON keys"
    documented = re.findall(r'"([A-Za-z]+)"', match.group(1))
    assert main(["audit", "--format", "json", "--cluster-state", str(FIXTURES / "fleet")]) == 0
    assert documented == list(json.loads(capsys.readouterr().out))
