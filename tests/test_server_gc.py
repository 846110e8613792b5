"""The worker moves what start-up built out of the cyclic collector's reach (see WebhookServer.wsgi)."""

from __future__ import annotations

import gc
from pathlib import Path

from guardhook.app import Runtime
from guardhook.certs import generate
from guardhook.engine import Engine
from guardhook.server import ServeOptions, WebhookServer
from guardhook.view.static import embedded_fleet_view


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
