"""Each command's `--help` says what it does with `--kubeconfig`: `serve` (and the reconcilers)
keep watching the cluster, the one-shot commands list it once."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from guardhook import __version__
from guardhook.commands.main import COMMANDS, build_parser, main

from conftest import FIXTURES, clean_env


def option_help(command: str, flag: str) -> str:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = subparsers.choices[command]
    action = next(a for a in sub._actions if flag in a.option_strings)
    return f"{action.metavar} {action.help}"


@pytest.mark.parametrize("command", ["review", "audit", "drain-plan", "check"])
def test_one_shot_commands_list_the_cluster_once(command: str) -> None:
    text = option_help(command, "--kubeconfig")
    assert "listed once" in text or "list this cluster once" in text, text
    assert "watch" not in text
    assert text.startswith("FILE ")


def test_serve_watches_the_cluster() -> None:
    assert "watch the cluster of this kubeconfig" in option_help("serve", "--kubeconfig")


@pytest.mark.parametrize("command", ["serve", "review", "audit", "drain-plan", "pdb-sync", "group-readiness"])
def test_the_default_source_order_is_named(command: str) -> None:
    assert "in-cluster config, then $KUBECONFIG, then ~/.kube/config" in option_help(command, "--kubeconfig")


def test_group_readiness_names_its_config_key_in_full() -> None:
    assert "policies.group-readiness.allLeaderWorkerSets" in option_help("group-readiness", "--config")


def every_option() -> list[tuple[str, argparse.Action]]:
    """(command, action) for the global flags and every command's flags."""
    parser = build_parser()
    found = [("guardhook", a) for a in parser._actions if a.option_strings]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        found += [(name, a) for a in sub._actions if a.option_strings]
    return found


def test_every_flag_with_a_default_says_it() -> None:
    # Switches (store_true/false) have no default to tell; everything else that has one says it.
    switches = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction)
    silent = [
        f"{command} {action.option_strings[0]}"
        for command, action in every_option()
        if not isinstance(action, switches)
        and action.default not in (None, [], argparse.SUPPRESS)
        and "default" not in (action.help or "")
    ]
    assert not silent


@pytest.mark.parametrize(
    ("command", "flag", "default"),
    [
        ("guardhook", "--log-level", "INFO"),
        ("certs", "--service", "guardhook"),
        ("certs", "--namespace", "guardhook-system"),
        ("check", "--format", "text"),
    ],
)
def test_the_defaults_the_trial_missed_are_in_the_help(command: str, flag: str, default: str) -> None:
    (action,) = [a for c, a in every_option() if c == command and flag in a.option_strings]
    assert f"(default {default})" in action.help and action.default == default


@pytest.mark.parametrize(
    ("argv", "level", "log_format"),
    [
        (["check", "x", "--log-level", "debug", "--log-format", "json"], "DEBUG", "json"),
        (["--log-level", "ERROR", "check", "x"], "ERROR", "text"),
        (["--log-level", "ERROR", "check", "x", "--log-level", "WARNING"], "WARNING", "text"),
        (["check", "x"], "INFO", "text"),
    ],
)
def test_global_flags_go_before_or_after_the_command(argv: list[str], level: str, log_format: str) -> None:
    args = build_parser().parse_args(argv)
    assert (args.log_level, args.log_format) == (level, log_format)


def test_a_global_flag_after_the_command_takes_effect(tmp_path: Path) -> None:
    review = FIXTURES / "reviews" / "s01-worker-delete.validating.json"
    command = [sys.executable, "-m", "guardhook", "review", str(review), "--log-format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stderr.splitlines()[0])  # the sample-fleet warning, as a JSON line
    assert first["level"] == "WARNING" and "sample fleet" in first["msg"]


COMMAND_NAMES = [m.__name__.rsplit(".", 1)[-1].replace("_", "-") for m in COMMANDS]


@pytest.mark.parametrize(
    "argv",
    [["--version"]]
    + [[command, "--version"] for command in COMMAND_NAMES]
    # after a command's other arguments too, and before its required ones are given
    + [["check", "x", "--version"], ["review", "--log-level", "DEBUG", "--version"]],
    ids=lambda argv: " ".join(argv),
)
def test_version_works_before_or_after_any_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 0
    printed = capsys.readouterr()
    assert printed.out == f"guardhook {__version__}\n" and printed.err == ""
