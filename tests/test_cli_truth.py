"""The command line tells the truth: `audit` and `pdb-sync` with no cluster configured say so and
exit 2 (never the sample fleet); a configuration file that is not UTF-8 is one clear line and exit 2
for every command that takes `--config` (never a traceback and exit 1, which `check` and `review
--exit-code` define as "denied")."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardhook.commands.main import build_parser, main

from conftest import FIXTURES, REPO

LATIN1_CONFIG = b"policies:\n  group-spec: {actions: [Warn]}  # caf\xe9 au lait\n"
# Arguments a command needs besides --config to get as far as reading it.
REQUIRED_ARGS = {
    "check": ["tests/manifests/lint"],
    "drain-plan": ["gpu-node-01"],
    "drain": ["gpu-node-01"],
    "export": ["admission-policies"],
}


@pytest.fixture
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No --kubeconfig, no $KUBECONFIG, no ~/.kube/config, not in a pod."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    "command", [["audit"], ["audit", "--format", "json"], ["pdb-sync"], ["pdb-sync", "--once"]]
)
def test_cluster_commands_without_a_cluster_exit_2_saying_so(
    no_cluster: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing that looks like a report of the sample fleet
    assert captured.err == (
        f"guardhook {command[0]}: no cluster configured: pass --kubeconfig FILE or --cluster-state PATH "
        "(or set $KUBECONFIG, or run in a pod)\n"
    )


def test_drain_without_a_cluster_does_not_offer_cluster_state_it_does_not_take(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `drain` has no --cluster-state (a live cluster only): the line used to offer it, and
    # following it gave `argument NODE: '<the path>' is not a valid name`.
    assert main(["drain", "--dry-run=client", "gpu-node-07"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "guardhook drain: no cluster configured: pass --kubeconfig FILE (or set $KUBECONFIG, or run "
        "in a pod); drain works on a live cluster only (`guardhook drain-plan` plans on the sample "
        "fleet or --cluster-state PATH)\n"
    )
    parser = build_parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    drain = subparsers.choices["drain"]
    assert not any("--cluster-state" in action.option_strings for action in drain._actions)


def test_cluster_state_still_works_offline(no_cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--cluster-state", str(FIXTURES / "fleet")]) == 0
    assert "llm-xl" in capsys.readouterr().out
    assert main(["pdb-sync", "--cluster-state", str(FIXTURES / "fleet")]) == 0


def test_review_keeps_the_sample_fleet_for_a_first_try(
    no_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["review", str(FIXTURES / "reviews" / "s01-worker-delete.validating.json")]) == 0
    assert '"allowed": false' in capsys.readouterr().out


def commands_with_config() -> list[str]:
    parser = build_parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(
        name
        for name, sub in subparsers.choices.items()
        if any("--config" in action.option_strings for action in sub._actions)
    )


def test_every_command_with_config_is_covered() -> None:
    assert {"serve", "review", "check", "audit"} <= set(commands_with_config())


@pytest.mark.parametrize("command", commands_with_config())
def test_a_config_that_is_not_utf8_exits_2_with_one_line(tmp_path: Path, command: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(LATIN1_CONFIG)
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "guardhook",
            command,
            "--config",
            str(config),
            *REQUIRED_ARGS.get(command, []),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "WARNING" not in line]
    at = LATIN1_CONFIG.index(0xE9)
    assert lines == [
        f"guardhook {command}: cannot read config {config}: "
        f"not UTF-8 text (invalid continuation byte at byte {at})"
    ]
    assert done.stdout == ""


def test_certs_with_manifests_that_are_not_utf8_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "manifests" / "base"
    base.mkdir(parents=True)
    (base / "kustomization.yaml").write_bytes(LATIN1_CONFIG)
    assert (
        main(["certs", "--out", str(tmp_path / "certs"), "--patch-manifests", str(tmp_path / "manifests")])
        == 2
    )
    assert f"cannot read {base / 'kustomization.yaml'}" in capsys.readouterr().err
    assert not (tmp_path / "certs").exists()  # nothing written


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # `guardhook drain-plan … --format json | head -1`: the reader closes the pipe after one line.
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    with subprocess.Popen(
        [sys.executable, "-m", "guardhook", "drain-plan", "gpu-node-01", "gpu-node-05", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=env,
        bufsize=0,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.read(1)
        process.stdout.close()  # before the whole plan is written
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=60) in (0, 141)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
