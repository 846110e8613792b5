"""Start-up cost: building the parser, `--version` and every command's `--help` import no heavy
module, and `review` of a delete on the bundled sample fleet imports neither the Kubernetes client
nor flask, gunicorn, numpy or cryptography. Checked by what is imported (not by timing, which
depends on the machine; `bench/startup.py` prints the times). Every module in COMMANDS is held to
it, including commands added later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal

import pytest

from guardhook.commands.main import COMMANDS

from conftest import FIXTURES, REPO

# Third-party packages and guardhook packages a parser or `--help` has no use for.
HEAVY = (
    "kubernetes",
    "urllib3",
    "flask",
    "werkzeug",
    "gunicorn",
    "numpy",
    "cryptography",
    "prometheus_client",
    "yaml",
    "orjson",
    "jsonpatch",
    "guardhook.admission",
    "guardhook.capacity",
    "guardhook.cluster",
    "guardhook.config",
    "guardhook.ledger",
    "guardhook.pdbsync",
    "guardhook.policies",
    "guardhook.readiness",
    "guardhook.reconcile",
    "guardhook.server",
)
# What `review` of a pod delete on the sample fleet must still not need.
NOT_FOR_REVIEW = ("kubernetes", "urllib3", "flask", "werkzeug", "gunicorn", "numpy", "cryptography")

PROBE = """
import contextlib, io, json, sys
from guardhook.commands.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(*argv: str) -> list[str]:
    """The modules imported by running `guardhook ARGV` in a fresh interpreter with no cluster
    configured (so `review` judges against the sample fleet, as on a first try)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(REPO / "tests")  # no .kube/config there
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


# The one guardhook.server module every command needs at start: the log format (standard library only).
LIGHT = ("guardhook.server", "guardhook.server.logformat")


def heavy_in(modules: list[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(
        m for m in modules if m not in LIGHT and any(m == h or m.startswith(h + ".") for h in heavy)
    )


@pytest.mark.parametrize(
    "argv", [["--version"], ["--help"], ["check", "--version"]], ids=["version", "help", "version-after"]
)
def test_version_and_help_import_nothing_heavy(argv: list[str]) -> None:
    assert heavy_in(modules_after(*argv), HEAVY) == []


@pytest.mark.parametrize("command", [m.__name__.rsplit(".", 1)[-1].replace("_", "-") for m in COMMANDS])
def test_each_command_help_imports_nothing_heavy(command: str) -> None:
    assert heavy_in(modules_after(command, "--help"), HEAVY) == []
    assert heavy_in(modules_after(command, "--version"), HEAVY) == []


def test_review_of_a_delete_on_the_sample_fleet_stays_light() -> None:
    review = str(FIXTURES / "reviews" / "s01-worker-delete.validating.json")
    modules = modules_after("review", review)
    assert "guardhook.admission.engine" in modules  # it did judge
    assert heavy_in(modules, NOT_FOR_REVIEW) == []


@pytest.mark.parametrize("quantity", ["500m", "1500Gi", "8", "1.5", "100Ki", "1e3", "2M", "0.1"])
def test_quantities_parse_as_the_kubernetes_client_parses_them(quantity: str) -> None:
    from kubernetes.utils import parse_quantity as library

    from guardhook.cluster.resources import parse_quantity

    assert parse_quantity(quantity) == library(quantity)
    assert isinstance(parse_quantity(quantity), Decimal)
    with pytest.raises(ValueError):
        parse_quantity("8 GPUs")
