"""Render the kustomize subset `manifests/` uses, so the manifest tests run without kubectl.

Supported: `resources` (files and folders), `components`, `patches` (a JSON 6902 patch file, or a
strategic-merge patch of a webhook configuration, whose `webhooks` merge by `name`, with a
`target` of group/version/kind/name), `secretGenerator` (files; hash suffixes disabled) and
`images`. Paths are relative to the kustomization that lists them (kustomize refuses absolute
ones; `user_overlay` writes a user's overlay that way). Anything else raises, so a kustomization
that grows past this subset fails loudly here rather than rendering differently. When kubectl is
installed the tests also compare this output with `kubectl kustomize`.
"""

from __future__ import annotations

import base64
import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

KNOWN_KEYS = {"apiVersion", "kind", "resources", "components", "patches", "secretGenerator", "images"}

Object = dict[str, Any]


class UnsupportedKustomization(ValueError):
    """The kustomization uses a feature outside the supported subset."""


def render(folder: Path) -> list[Object]:
    """The objects `kubectl kustomize folder` would print, in no particular order. Raises
    UnsupportedKustomization for two objects of one kind, namespace and name, which kustomize
    refuses too ("may not add resource with an already registered id"): a component listed
    twice, e.g. on top of an overlay that already includes it."""
    objects = _build(folder.resolve(), component=False)
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        meta = obj["metadata"]
        key = (obj["apiVersion"].rpartition("/")[0], obj["kind"], meta.get("namespace", ""), meta["name"])
        if key in seen:
            raise UnsupportedKustomization(f"{folder}: {key} is added twice")
        seen.add(key)
    return objects


def _build(folder: Path, component: bool) -> list[Object]:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text()) or {}
    unknown = set(kustomization) - KNOWN_KEYS
    if unknown:
        raise UnsupportedKustomization(f"{folder}: unsupported keys {sorted(unknown)}")
    expected_kind = "Component" if component else "Kustomization"
    if kustomization.get("kind", "Kustomization") != expected_kind:
        raise UnsupportedKustomization(f"{folder}: expected kind {expected_kind}")
    objects: list[Object] = []
    for entry in kustomization.get("resources", []):
        path = folder / _relative(folder, entry)
        objects += _build(path, component=False) if path.is_dir() else _load(path)
    objects += [_secret(folder, spec) for spec in kustomization.get("secretGenerator", [])]
    return _finish(folder, kustomization, objects)


def _finish(folder: Path, kustomization: Object, objects: list[Object]) -> list[Object]:
    for entry in kustomization.get("components", []):
        component = (folder / _relative(folder, entry)).resolve()
        spec = yaml.safe_load((component / "kustomization.yaml").read_text())
        if spec.get("kind") != "Component" or set(spec) - KNOWN_KEYS:
            raise UnsupportedKustomization(f"{component}: not a supported Component")
        for path in spec.get("resources", []):
            objects += _load(component / path)
        _finish(component, {k: v for k, v in spec.items() if k != "resources"}, objects)
    for patch in kustomization.get("patches", []):
        _apply_patch(folder, patch, objects)
    for image in kustomization.get("images", []):
        _set_image(image, objects)
    return objects


def _relative(folder: Path, entry: str) -> str:
    """`entry` of `folder`'s kustomization, refused when absolute as kustomize refuses it ("new
    root ... cannot be absolute")."""
    if Path(entry).is_absolute():
        raise UnsupportedKustomization(f"{folder}: {entry} is absolute; kustomize refuses it")
    return entry


def user_overlay(folder: Path, resources: Sequence[Path], components: Sequence[Path] = ()) -> Path:
    """Write `folder/kustomization.yaml`, a user's overlay of `resources` with `components` added,
    each path relative to `folder` as kustomize requires. Returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    spec: Object = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(path, folder) for path in resources],
    }
    if components:
        spec["components"] = [os.path.relpath(path, folder) for path in components]
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def _load(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _secret(folder: Path, spec: Object) -> Object:
    if not spec.get("options", {}).get("disableNameSuffixHash"):
        raise UnsupportedKustomization("secretGenerator without disableNameSuffixHash")
    data = {Path(f).name: base64.b64encode((folder / f).read_bytes()).decode() for f in spec["files"]}
    metadata = {"name": spec["name"], "namespace": spec["namespace"]}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": spec["type"], "data": data}


def _matches(obj: Object, target: Object) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    wanted = {"group": group, "version": version, "kind": obj["kind"], "name": obj["metadata"]["name"]}
    return all(wanted[key] == value for key, value in target.items())


def _apply_patch(folder: Path, patch: Object, objects: list[Object]) -> None:
    if set(patch) != {"path", "target"}:
        raise UnsupportedKustomization(f"patch {patch}: only path + target (JSON 6902) is supported")
    ops = yaml.safe_load((folder / patch["path"]).read_text())
    if isinstance(ops, dict) and ops.get("kind", "").endswith("WebhookConfiguration"):
        merge = _merge_webhooks
    elif isinstance(ops, list):
        merge = jsonpatch.apply_patch
    else:
        raise UnsupportedKustomization(
            f"{patch['path']}: only JSON 6902 and webhook merge patches are supported"
        )
    hits = [i for i, obj in enumerate(objects) if _matches(obj, patch["target"])]
    if not hits:
        raise UnsupportedKustomization(f"patch {patch['path']} matches no object")
    for index in hits:
        objects[index] = merge(objects[index], ops)


def _merge_webhooks(obj: Object, patch: Object) -> Object:
    """A strategic merge of a webhook configuration: maps merge key by key, `webhooks` items by
    `name` (an unknown name is appended, as kustomize does), any other list is refused."""
    merged = copy.deepcopy(obj)
    by_name = {hook["name"]: hook for hook in merged.get("webhooks") or []}
    for item in patch.get("webhooks") or []:
        if item["name"] in by_name:
            _merge_map(by_name[item["name"]], item)
        else:
            merged.setdefault("webhooks", []).append(copy.deepcopy(item))
    _merge_map(merged, {k: v for k, v in patch.items() if k not in ("webhooks", "apiVersion", "kind")})
    return merged


def _merge_map(into: Object, patch: Object) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge_map(into[key], value)
        elif isinstance(value, list):
            raise UnsupportedKustomization(f"merge patch of the list {key}: unsupported")
        else:
            into[key] = copy.deepcopy(value)


def _set_image(image: Object, objects: list[Object]) -> None:
    for obj in objects:
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            name, _, _tag = container["image"].partition(":")
            if name == image["name"]:
                new = image.get("newName", name)
                container["image"] = f"{new}:{image['newTag']}" if "newTag" in image else new
