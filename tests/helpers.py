"""Builders for tests: views derived from the sample fleet, and requests derived from fixtures."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

from guardhook.cluster.view.live import page_decoder
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.wire import KubeObject


def fleet_view(edit: Callable[[list[KubeObject]], None] | None = None) -> ClusterView:
    """A synced view of the sample fleet, after `edit` changed a deep copy of its objects."""
    objects = copy.deepcopy(embedded_fleet_objects())
    if edit is not None:
        edit(objects)
    return view_from_objects(objects)


def find(objects: list[KubeObject], kind: str, name: str) -> KubeObject:
    """The object of `kind` named `name` in `objects` (raises StopIteration when absent)."""
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def set_ready(pod: KubeObject, ready: bool) -> None:
    """Flip a pod's Ready condition."""
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "True" if ready else "False"


def request_of(review: dict[str, Any]) -> Any:
    """The request of a review body, deep-copied so a test may change it."""
    return copy.deepcopy(review["request"])


class PodPage:
    """A Transport listing `pods` in one page (other kinds: none), as JSON bytes decoded with the
    live view's own decoder, as a real list page reaches the reflector; watches end at once."""

    def __init__(self, pods: list[KubeObject], resource_version: str = "9") -> None:
        self.pods = pods
        self.resource_version = resource_version

    def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
        page = {"kind": "List", "metadata": {"resourceVersion": self.resource_version}}
        data = json.dumps({**page, "items": self.pods if kind == PODS else []}).encode()
        return page_decoder(kind)(data)  # type: ignore[no-any-return]

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        return iter(())

    def close(self) -> None:
        pass
