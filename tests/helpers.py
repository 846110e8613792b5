"""Builders for tests: views derived from the sample fleet, and requests derived from fixtures."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import ClusterView
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
