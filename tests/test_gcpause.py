"""The cyclic collector is paused while a reflector applies a list (guardhook.cluster.view.gcpause)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

from guardhook.cluster.view.gcpause import collector_paused
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.cluster.view.store import PODS, ClusterView


class Recording:
    """A Transport listing the fleet's pods in one page, noting whether gc was enabled meanwhile."""

    def __init__(self) -> None:
        self.enabled_during: list[bool] = []

    def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
        self.enabled_during.append(gc.isenabled())
        items = [obj for obj in embedded_fleet_objects() if obj.get("kind") == "Pod"]
        return {"metadata": {"resourceVersion": "7"}, "items": items}

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        return iter(())

    def close(self) -> None:
        pass


def test_a_relist_runs_with_the_collector_paused_and_resumes_it() -> None:
    assert gc.isenabled()
    transport = Recording()
    view = ClusterView("test")
    Reflector(PODS, view, transport).relist()
    assert transport.enabled_during == [False]
    assert gc.isenabled()
    assert view.count(PODS) > 0


def test_nested_pauses_resume_once_and_a_disabled_collector_stays_off() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds the pause
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
