"""Apply a changed `--config` file without a restart.

In a cluster the file is a ConfigMap mounted as a directory (no subPath), which the kubelet
updates in place by swapping a symlink (Kubernetes docs, "Mounted ConfigMaps are updated
automatically", within the kubelet sync period plus its cache TTL, about a minute). The worker
re-reads the file every CONFIG_POLL_SECONDS; when its bytes change it validates the new document
like start-up does (with the same `--enforcement`) and swaps it into the engine, so requests that
start afterwards are judged with it. A file that does not validate (or cannot be read) is logged
once, counted in `guardhook_config_reloads{result="failure"}`, and the previous configuration stays.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from guardhook.admission.engine import Engine
from guardhook.config import ConfigError, load_config

log = logging.getLogger(__name__)

CONFIG_POLL_SECONDS = 2.0


class ConfigWatcher:
    """Watches `path` and reconfigures `engine` when it changes.

    `report(ok)` is called after each attempted reload (True: applied, False: kept the previous).
    """

    def __init__(
        self,
        path: str | Path,
        enforcement: str,
        engine: Engine,
        report: Callable[[bool], None] = lambda ok: None,
        interval: float = CONFIG_POLL_SECONDS,
    ) -> None:
        self.path = Path(path)
        self.enforcement = enforcement
        self.engine = engine
        self.report = report
        self.interval = interval
        self._seen: bytes | None = self._read()
        self._stop = threading.Event()

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except OSError:
            return None

    def check(self) -> bool | None:
        """Reload when the file's bytes changed since the last look: True when the new
        configuration was applied, False when it was refused, None when nothing changed."""
        data = self._read()
        if data == self._seen:
            return None
        self._seen = data
        if data is None:
            log.warning("cannot read the configuration %s: keeping the previous one", self.path)
            self.report(False)
            return False
        try:
            config = load_config(self.path, self.enforcement)
        except ConfigError as exc:
            log.error("keeping the previous configuration: %s", exc)
            self.report(False)
            return False
        self.engine.reconfigure(config)
        log.info("configuration reloaded from %s", self.path)
        self.report(True)
        return True

    def run(self) -> None:
        """Check every `interval` seconds until `stop()`."""
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # never let the watcher die: the next change must still apply
                log.exception("configuration reload failed")

    def start(self) -> ConfigWatcher:
        """Run the watch loop on a daemon thread; returns self."""
        threading.Thread(target=self.run, name="guardhook-config-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        """End the watch loop (within one poll interval)."""
        self._stop.set()
