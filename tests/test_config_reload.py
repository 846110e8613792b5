"""`--config` from a mounted ConfigMap applies without a restart (issue 15 item 13): the file is
swapped the way the kubelet updates a ConfigMap volume (a new timestamped folder, then an atomic
rename of the `..data` symlink), and the server judges with the new configuration."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.config import load_config
from guardhook.server.configwatch import ConfigWatcher

from conftest import Server, load_review

DENY = "policies:\n  worker-delete: {actions: [Deny]}\n"
WARN = "policies:\n  worker-delete: {actions: [Warn]}\nclusterView:\n  staleAfterSeconds: 90\n"
BROKEN = "policies:\n  worker-delete: {actions: [Explode]}\n"


class ConfigMapVolume:
    """A folder laid out as the kubelet lays out a ConfigMap volume: `config.yaml` ->
    `..data/config.yaml`, `..data` -> `..<version>`; `update` swaps `..data` atomically."""

    def __init__(self, folder: Path, text: str) -> None:
        self.folder = folder
        self.version = 0
        folder.mkdir(parents=True, exist_ok=True)
        self.update(text)
        (folder / "config.yaml").symlink_to("..data/config.yaml")

    @property
    def path(self) -> Path:
        return self.folder / "config.yaml"

    def update(self, text: str) -> None:
        self.version += 1
        payload = self.folder / f"..2026_12_01_{self.version}"
        payload.mkdir()
        (payload / "config.yaml").write_text(text)
        staging = self.folder / "..data_tmp"
        staging.symlink_to(payload.name)
        os.replace(staging, self.folder / "..data")


def s01() -> dict:
    return load_review("s01-worker-delete.validating")["request"]


def test_a_changed_file_applies_and_a_broken_one_keeps_the_previous(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path / "config", DENY)
    engine = Engine(embedded_fleet_view(), load_config(volume.path))
    results: list[bool] = []
    watcher = ConfigWatcher(volume.path, "deny", engine, results.append)
    assert watcher.check() is None  # unchanged since start-up
    assert engine.judge(s01()).response["allowed"] is False

    volume.update(WARN)
    assert watcher.check() is True
    answer = engine.judge(s01()).response
    assert answer["allowed"] is True and answer["warnings"][0].startswith("[worker-delete]")
    assert engine.view.stale_after_seconds == 90

    volume.update(BROKEN)
    assert watcher.check() is False  # refused: still Warn
    assert watcher.check() is None  # and not retried until the file changes again
    assert engine.judge(s01()).response["allowed"] is True

    volume.update(DENY)
    assert watcher.check() is True
    assert engine.judge(s01()).response["allowed"] is False
    assert results == [True, False, True]


def test_enforcement_audit_still_applies_after_a_reload(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path / "config", WARN)
    engine = Engine(embedded_fleet_view(), load_config(volume.path, "audit"))
    watcher = ConfigWatcher(volume.path, "audit", engine)
    volume.update(DENY)
    assert watcher.check() is True
    answer = engine.judge(s01()).response
    assert answer["allowed"] is True and "worker-delete" in answer["auditAnnotations"]


def test_serve_applies_a_configmap_update_without_a_restart(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    volume = ConfigMapVolume(tmp_path / "config", DENY)
    server = fresh_server("--config", str(volume.path))
    pid = server.process.pid
    assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False
    volume.update(WARN)
    deadline = time.monotonic() + 30  # the worker polls every 2 s
    answer = server.review("/validate", "s01-worker-delete.validating")
    while answer["allowed"] is False and time.monotonic() < deadline:
        time.sleep(0.5)
        answer = server.review("/validate", "s01-worker-delete.validating")
    assert answer["allowed"] is True and answer["warnings"][0].startswith("[worker-delete]")
    assert server.process.pid == pid and server.process.poll() is None  # the same process
    metrics = server.session.get(server.url + "/metrics", timeout=10).text
    assert 'guardhook_config_reloads_total{result="success"} 1.0' in metrics
    server.logged("configuration reloaded from")
