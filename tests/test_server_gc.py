"""The worker moves what start-up built out of the cyclic collector's reach (freeze_heap_when_ready)."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.server.app import Runtime
from guardhook.server.certs import generate
from guardhook.server.webhook_server import ServeOptions, WebhookServer, freeze_heap_when_ready


def test_loading_the_app_freezes_the_start_up_heap(tmp_path: Path) -> None:
    options = ServeOptions("127.0.0.1", 0, 1, generate(tmp_path, ["127.0.0.1"]))
    server = WebhookServer(options, lambda: Runtime(Engine(embedded_fleet_view())))
    gc.unfreeze()
    try:
        app = server.wsgi()
        assert gc.get_freeze_count() > 10_000  # the view and modules: a full collection skips them
        assert server.wsgi() is app
    finally:
        gc.unfreeze()


class SyncsLater:
    """A runtime stand-in whose view syncs when the test says so."""

    ready = False


def test_a_view_that_syncs_later_is_frozen_after_its_sync() -> None:
    runtime = SyncsLater()
    gc.unfreeze()
    try:
        freeze_heap_when_ready(runtime, poll_seconds=0.01)  # type: ignore[arg-type]
        gc.unfreeze()  # undo the immediate freeze, to see the one after the sync
        time.sleep(0.1)
        assert gc.get_freeze_count() == 0
        runtime.ready = True
        deadline = time.monotonic() + 5
        while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
