"""`guardhook serve` judges every flag and the cluster source before it tries its address, so a
refused flag says why even while another server holds the port (the README's first set-up command
leaves one on 8443 while the second runs the tests). The port here is one the OS gives this test,
held by it while serve is asked to listen there: no test binds a fixed port (8443 may be the
README's own server)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FIXTURES, clean_env


@contextlib.contextmanager
def port_held() -> Iterator[int]:
    """A port the OS chooses on 0.0.0.0, listened on by this test for the block."""
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def serve(tmp_path: Path, port: int, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "guardhook", "serve", "--cert-dir", str(tmp_path / "certs")]
    command += ["--port", str(port), *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--sync-group-pdbs"], "--sync-group-pdbs needs a live cluster"),
        (["--sync-group-readiness"], "--sync-group-readiness needs a live cluster"),
        (["--cluster-state", "no-such-file.yaml"], "no-such-file.yaml"),
        (["--config", "no-such-config.yaml"], "no-such-config.yaml"),
    ],
)
def test_a_refused_flag_is_named_while_its_port_is_taken(
    tmp_path: Path, flags: list[str], reason: str
) -> None:
    with port_held() as port:
        done = serve(tmp_path, port, *flags)
    assert done.returncode == 2, done.stderr
    assert reason in done.stderr.splitlines()[-1] and "Address already in use" not in done.stderr
    assert "Traceback" not in done.stderr


def test_the_port_really_was_taken(tmp_path: Path) -> None:
    # Good flags get as far as the address, and the held port is refused there.
    with port_held() as port:
        done = serve(tmp_path, port, "--cluster-state", str(FIXTURES / "fleet"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"guardhook serve: cannot listen on 0.0.0.0:{port}: Address already in use"
    )
