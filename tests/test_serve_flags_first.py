"""`guardhook serve` judges every flag and the cluster source before it tries its address, so a
refused flag says why even while another server holds the port (the README's first set-up command
leaves one on 8443 while the second runs the tests). The port here is the default, 8443: held by
this test when free, else already held by someone else, which is the case this guards."""

from __future__ import annotations

import contextlib
import errno
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FIXTURES, clean_env

DEFAULT_PORT = 8443


@contextlib.contextmanager
def default_port_held() -> Iterator[None]:
    """Listen on 0.0.0.0:8443 for the block unless something already does."""
    holder = socket.socket()
    try:
        try:
            holder.bind(("0.0.0.0", DEFAULT_PORT))
            holder.listen()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        yield
    finally:
        holder.close()


def serve(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "guardhook", "serve", "--cert-dir", str(tmp_path / "certs"), *flags]
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
def test_a_refused_flag_is_named_while_the_default_port_is_taken(
    tmp_path: Path, flags: list[str], reason: str
) -> None:
    with default_port_held():
        done = serve(tmp_path, *flags)
    assert done.returncode == 2, done.stderr
    assert reason in done.stderr.splitlines()[-1] and "Address already in use" not in done.stderr
    assert "Traceback" not in done.stderr


def test_the_default_port_really_was_taken(tmp_path: Path) -> None:
    # Good flags get as far as the address, and the held port is refused there.
    with default_port_held():
        done = serve(tmp_path, "--cluster-state", str(FIXTURES / "fleet"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"guardhook serve: cannot listen on 0.0.0.0:{DEFAULT_PORT}: Address already in use"
    )
