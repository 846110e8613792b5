"""The envtest helper itself (tests/envtest.py), without an API server: every file it writes —
the processes' logs, the service-account key, the kubeconfig — lands in a folder it creates when
missing (issue 20: `_spawn` raised FileNotFoundError for `<folder>/api/etcd.log`)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import envtest


def test_spawn_creates_the_folder_of_its_log(tmp_path: Path) -> None:
    log = tmp_path / "not" / "yet" / "etcd.log"
    with ExitStack() as stack:
        process = envtest._spawn(stack, log, [sys.executable, "-c", "print('started')"])
        process.wait(timeout=30)
    assert process.returncode == 0
    assert log.read_text().strip() == "started"


def test_key_and_kubeconfig_are_written_into_missing_folders(tmp_path: Path) -> None:
    key = envtest._service_account_key(tmp_path / "a" / "sa.key")
    config = envtest._write_kubeconfig(tmp_path / "b" / "kubeconfig", "https://127.0.0.1:1", "t0ken")
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert '"token": "t0ken"' in config.read_text()


def test_required_api_server_binaries_missing_is_an_error_not_a_skip(tmp_path: Path) -> None:
    """With GUARDHOOK_REQUIRE_API_SERVER=1 (as .ci/run sets it), absent binaries are a reason to fail;
    without it, or with both binaries there, there is none."""
    env = {"GUARDHOOK_REQUIRE_API_SERVER": "1", "KUBEBUILDER_ASSETS": str(tmp_path)}
    reason = envtest._required_but_missing(env)
    assert reason is not None and "kube-apiserver" in reason and "etcd" in reason
    assert envtest._required_but_missing({"KUBEBUILDER_ASSETS": str(tmp_path)}) is None
    for name in envtest.BINARIES:
        binary = tmp_path / name
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    assert envtest._required_but_missing(env) is None
