"""Read Kubernetes manifests: files or folders of YAML/JSON, multi-document, `kind: List` dumps.

`kubectl get -o yaml` writes a `kind: List` (or `<Kind>List`) with `items`; Kustomize and Helm write
multi-document YAML. Both flatten to one list of objects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from guardhook.wire import KubeObject

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(ValueError):
    """A manifest path or document could not be read; the message names the file."""


@dataclass(frozen=True)
class Manifest:
    """One object and where it came from (`source` is a path or "-" for stdin)."""

    source: str
    obj: KubeObject


def flatten(doc: Any) -> Iterator[KubeObject]:
    """Yield the objects in one decoded document, unpacking List kinds; skips non-objects."""
    if not isinstance(doc, dict):
        return
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from flatten(item)
        return
    if isinstance(kind, str):
        yield doc


def parse_text(text: str, source: str) -> list[Manifest]:
    """Parse YAML (one or many documents) or JSON text. Raises ManifestError naming `source`."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        try:
            docs = [json.loads(text)]
        except ValueError:
            raise ManifestError(f"{source}: not valid YAML or JSON: {exc}") from exc
    return [Manifest(source, obj) for doc in docs for obj in flatten(doc)]


def files_under(path: Path) -> list[Path]:
    """Manifest files at `path`: the file itself, or every .yaml/.yml/.json below a folder, sorted."""
    if path.is_dir():
        found = []
        for root, _dirs, names in os.walk(path):
            found += [Path(root) / n for n in names if n.endswith(MANIFEST_SUFFIXES)]
        return sorted(found)
    if path.exists():
        return [path]
    raise ManifestError(f"{path}: no such file or folder")


def load_paths(paths: Iterable[str | Path]) -> list[Manifest]:
    """Load every object from files and folders. Raises ManifestError on a missing path or a file
    that is not YAML/JSON."""
    manifests: list[Manifest] = []
    for raw in paths:
        for file in files_under(Path(raw)):
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(f"{file}: cannot read: {exc}") from exc
            manifests += parse_text(text, str(file))
    return manifests
