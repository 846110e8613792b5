"""A cluster view built once from manifests (`--cluster-state`, `check`, the embedded fleet)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from guardhook.cluster.view.manifests import load_paths, parse_text
from guardhook.cluster.view.store import COVERAGE_KINDS, FLOOR_KINDS, KIND_TO_RESOURCE, KINDS, ClusterView
from guardhook.wire import KubeObject

log = logging.getLogger(__name__)

EMBEDDED_FLEET = "sample fleet"


def view_from_objects(
    objects: Iterable[KubeObject], source: str = "static", unreadable: Iterable[str] | None = None
) -> ClusterView:
    """A synced view holding `objects`; kinds the view does not keep are ignored. `unreadable`:
    the COVERAGE_KINDS and FLOOR_KINDS a cluster listing could not read; None (manifests, not a
    listing): every such kind of which `objects` hold none, as manifests rarely carry them all."""
    view = ClusterView(source=source)
    present = set()
    for obj in objects:
        resource = KIND_TO_RESOURCE.get(str(obj.get("kind")))
        if resource is not None:
            view.upsert(resource, obj)
            present.add(resource)
    for kind in KINDS:
        view.mark_synced(kind)
    read = (*COVERAGE_KINDS, *FLOOR_KINDS)
    missing = [k for k in read if k not in present] if unreadable is None else unreadable
    for kind in missing:
        view.mark_unreadable(kind)
    return view


def view_from_paths(paths: Iterable[str | Path]) -> ClusterView:
    """A synced view from manifest files or folders. Raises ManifestError on unreadable input."""
    paths = list(paths)
    manifests = load_paths(paths)
    return view_from_objects((m.obj for m in manifests), source=", ".join(map(str, paths)))


def embedded_fleet_objects() -> list[KubeObject]:
    """The bundled sample fleet (guardhook/data/fleet: 22 nodes, LWS serve/llm-xl, 16 pods)."""
    folder = resources.files("guardhook").joinpath("data", "fleet")
    objects: list[KubeObject] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            objects += [m.obj for m in parse_text(entry.read_text(encoding="utf-8"), entry.name)]
    return objects


def embedded_fleet_view() -> ClusterView:
    """A synced view of the bundled sample fleet."""
    return view_from_objects(embedded_fleet_objects(), source=EMBEDDED_FLEET)
