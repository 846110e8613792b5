"""One-shot commands against an API server that refuses connections: one clear line and exit 2
(or the command's JSON error and exit 1 for a reconciler's `--once`/`--dry-run` round), never
urllib3's "Retrying (Retry(total=...))" warnings first — a one-shot list is not retried silently."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, free_port
from fake_apiserver import kubeconfig_text

REVIEW = Path(__file__).parent.parent.parent / "shared/fixtures/reviews/s01-worker-delete.validating.json"


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://127.0.0.1:{free_port()}"))
    command = [sys.executable, "-m", "guardhook", *argv, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))


@pytest.mark.parametrize(
    ("argv", "doing"),
    [
        (["audit"], "cannot list objects from kubeconfig"),
        (["check", str(REVIEW)], "cannot list objects from kubeconfig"),
        (["drain-plan", "gpu-node-01"], "cannot list objects from kubeconfig"),
        (["review", str(REVIEW)], "cannot list objects from kubeconfig"),  # worded as audit's
    ],
    ids=["audit", "check", "drain-plan", "review"],
)
def test_an_unreachable_api_server_is_one_line_and_exit_2(
    tmp_path: Path, argv: list[str], doing: str
) -> None:
    done = run(tmp_path, *argv)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"guardhook {argv[0]}: {doing}") and "Connection refused" in line, line
    assert "Retrying" not in done.stderr and "Max retries" not in done.stderr


@pytest.mark.parametrize("argv", [["pdb-sync", "--once"], ["group-readiness", "--dry-run"]])
def test_a_one_shot_reconciler_round_reports_the_refusal_without_retry_warnings(
    tmp_path: Path, argv: list[str]
) -> None:
    done = run(tmp_path, *argv)
    assert done.returncode == 1, done.stderr
    assert "cannot list the cluster" in done.stdout and "Connection refused" in done.stdout
    assert done.stderr == ""
