"""Each command's `--help` says what it does with `--kubeconfig`: `serve` (and the reconcilers)
keep watching the cluster, the one-shot commands list it once."""

from __future__ import annotations

import argparse

import pytest

from guardhook.commands.main import build_parser


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
