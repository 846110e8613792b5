"""The text output of the one-shot commands (issue 39): the same bytes off a terminal whatever
NO_COLOR says, colour only on a terminal and never with NO_COLOR or --no-color, --quiet for the
findings only, warnings as `Warning: …` and log lines only with --verbose."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, REPO

PDB_CASE = "tests/manifests/lws-wide-pdb"
WORKER_DELETE = str(FIXTURES / "reviews" / "s01-worker-delete.validating.json")
ESC = "\x1b["


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "KUBECONFIG", "FORCE_COLOR")}
    return {**base, "HOME": str(tmp_path), "COLUMNS": "100", **extra}


def cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guardhook", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env(tmp_path, **extra),
    )


def on_terminal(tmp_path: Path, *args: str, **extra: str) -> str:
    """What the command writes to stdout when stdout is a terminal (a pty)."""
    parent, child = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", *args],
        stdout=child,
        stderr=subprocess.DEVNULL,
        timeout=120,
        cwd=REPO,
        env=env(tmp_path, TERM="xterm-256color", **extra),
    )
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(parent)
    assert done.returncode == 1
    return b"".join(chunks).decode()


def test_off_a_terminal_the_output_is_the_same_bytes_with_or_without_no_color(tmp_path: Path) -> None:
    plain = cli(tmp_path, "check", PDB_CASE)
    no_color = cli(tmp_path, "check", PDB_CASE, NO_COLOR="1")
    flag = cli(tmp_path, "check", "--no-color", PDB_CASE)
    assert plain.returncode == no_color.returncode == flag.returncode == 1
    assert plain.stdout == no_color.stdout == flag.stdout
    assert plain.stderr == no_color.stderr == flag.stderr
    assert ESC not in plain.stdout + plain.stderr
    [finding] = plain.stdout.splitlines()  # one line, however long: scripts read lines
    assert finding.startswith(
        f"{PDB_CASE}/pdb.yaml: PodDisruptionBudget serve/llm: Deny [group-pdb] can match"
    )
    assert plain.stderr == (
        "guardhook check: group-capacity skipped: no Nodes in the manifests or context\n"
        "OBJECTS  FINDINGS  BY ACTION  DENIED  NOT JUDGED  UNREADABLE\n"
        "2        1         Deny 1     1       0           0\n"
    )


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    coloured = on_terminal(tmp_path, "check", PDB_CASE)
    assert ESC in coloured
    # wrapped at the terminal's width: no line longer than COLUMNS
    visible = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    assert max(len(line) for line in visible.splitlines()) <= 100
    assert "Deny [group-pdb]" in visible
    for quiet in (
        on_terminal(tmp_path, "check", PDB_CASE, NO_COLOR="1"),
        on_terminal(tmp_path, "check", "--no-color", PDB_CASE),
    ):
        assert ESC not in quiet
        assert "Deny [group-pdb]" in quiet


def test_quiet_prints_the_findings_only(tmp_path: Path) -> None:
    done = cli(tmp_path, "check", "--quiet", PDB_CASE)
    assert done.returncode == 1
    assert len(done.stdout.splitlines()) == 1 and done.stderr == ""


def test_warnings_are_kubectl_style_and_logs_need_verbose(tmp_path: Path) -> None:
    done = cli(tmp_path, "review", "--format", "text", WORKER_DELETE)
    assert (
        done.stderr == "Warning: no cluster configured: using the bundled sample fleet as the cluster view\n"
    )
    verbose = cli(tmp_path, "review", "--verbose", "--format", "text", WORKER_DELETE)
    assert "WARNING guardhook.cluster.sources: no cluster configured" in verbose.stderr


def test_review_of_bad_input_says_so_before_any_cluster_warning(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    done = cli(tmp_path, "review", str(bad))
    assert done.returncode == 2
    assert done.stderr.startswith(f"guardhook review: {bad}: not an AdmissionReview")
    assert "Warning" not in done.stderr and "sample fleet" not in done.stderr
