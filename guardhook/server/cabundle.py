"""Patch a CA into the webhook configurations of `manifests/` for the self-managed overlay.

`guardhook certs --patch-manifests DIR` writes the certificates into
`DIR/overlays/self-managed/certs/` and one strategic-merge patch per webhook configuration beside
them, setting `clientConfig.caBundle` on every webhook entry BY NAME: the entries of the base and
those the components listed in the overlay's `components:` add or move (their JSON 6902 patches
applied here, as kustomize applies them before the overlay's own patches). An entry addressed by
index would miss every entry a component adds. The same file patches a live object:
`kubectl patch validatingwebhookconfiguration guardhook --patch-file ...`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from guardhook.server.certs import write_atomically

WEBHOOK_KINDS = {
    "ValidatingWebhookConfiguration": "validating",
    "MutatingWebhookConfiguration": "mutating",
}
BASE = Path("base")
SELF_MANAGED = Path("overlays") / "self-managed"
BEGIN = b"-----BEGIN CERTIFICATE-----"


class ManifestsError(ValueError):
    """The manifests folder has no base webhook configurations to patch."""


@dataclass(frozen=True)
class WebhookConfiguration:
    """One webhook configuration as the overlay renders it: kind, name and its entries' names."""

    kind: str
    name: str
    entries: tuple[str, ...]


def _read_yaml(path: Path) -> list[Any]:
    from guardhook.cluster.view.manifests import yaml_error_line

    try:
        return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestsError(f"cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ManifestsError(f"cannot read {path}: not valid YAML: {yaml_error_line(exc)}") from exc


def _kustomization(folder: Path) -> dict[str, Any]:
    """`folder/kustomization.yaml` as one mapping whose `components` is a list of relative paths
    (kustomize refuses absolute ones) and whose `patches` is a list of mappings with a `path` (what
    is read here); ManifestsError otherwise."""
    path = folder / "kustomization.yaml"
    documents = [d for d in _read_yaml(path) if d is not None]
    spec = documents[0] if len(documents) == 1 else None
    if not documents:
        return {}
    if not isinstance(spec, dict):
        raise ManifestsError(f"{path}: not one kustomization (a single YAML mapping)")
    components = spec.get("components") or []
    if not isinstance(components, list) or not all(isinstance(c, str) and c for c in components):
        raise ManifestsError(f"{path}: components must be a list of folder paths")
    absolute = next((c for c in components if Path(c).is_absolute()), None)
    if absolute is not None:
        # kustomize loads a component only relative to the kustomization ("new root ... cannot be
        # absolute"): patches written for it would describe an overlay that never renders.
        raise ManifestsError(
            f"{path}: component {absolute} is an absolute path, which kustomize refuses; "
            f"give it relative to {folder}"
        )
    patches = spec.get("patches") or []
    if not isinstance(patches, list) or not all(isinstance(p, dict) for p in patches):
        raise ManifestsError(f"{path}: patches must be a list of mappings")
    return spec


def _base_documents(manifests: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted((manifests / BASE).glob("*.yaml")):
        found += [d for d in _read_yaml(path) if isinstance(d, dict) and d.get("kind") in WEBHOOK_KINDS]
    if not found:
        # name what is wrong with the folder given (`is manifests manifests/?` said neither)
        missing = "no such folder" if not (manifests / BASE).is_dir() else "no webhook configurations there"
        raise ManifestsError(
            f"{manifests / BASE}: {missing}; give guardhook's manifests folder, the one holding base/ "
            "and overlays/ (--patch-manifests DIR, --manifests DIR)"
        )
    return found


def _apply_component(folder: Path, documents: list[dict[str, Any]]) -> None:
    """Apply a kustomize Component's JSON 6902 patches that target webhook configurations (and
    those of the components it includes), in place. Raises ManifestsError on an unreadable one."""
    spec = _kustomization(folder)
    for nested in spec.get("components") or []:
        _apply_component((folder / nested).resolve(), documents)
    for patch in spec.get("patches") or []:
        target = patch.get("target") or {}
        if not isinstance(target, dict) or target.get("kind") not in WEBHOOK_KINDS:
            continue
        if not isinstance(patch.get("path"), str):
            raise ManifestsError(f"{folder / 'kustomization.yaml'}: a patch of {target['kind']} has no path")
        ops = (_read_yaml(folder / patch["path"]) or [None])[0]
        if not isinstance(ops, list):
            raise ManifestsError(f"{folder / patch['path']}: not a JSON 6902 patch (a list of operations)")
        for index, doc in enumerate(documents):
            if doc["kind"] == target["kind"] and doc["metadata"]["name"] == target.get("name"):
                try:
                    documents[index] = jsonpatch.apply_patch(doc, ops)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise ManifestsError(f"{folder / patch['path']}: {exc}") from exc


def overlay_components(manifests: Path) -> list[Path]:
    """The components the self-managed overlay's kustomization.yaml lists, as folders."""
    overlay = manifests / SELF_MANAGED
    return [(overlay / entry).resolve() for entry in _kustomization(overlay).get("components") or []]


def webhook_documents(manifests: Path) -> list[dict[str, Any]]:
    """The Validating/MutatingWebhookConfiguration documents of `manifests/base/*.yaml` (in file
    order) as the self-managed overlay renders them: changed by each component the overlay lists.
    Raises ManifestsError when there are none (a wrong folder) or a file is not UTF-8 YAML."""
    documents = _base_documents(manifests)
    if (manifests / SELF_MANAGED / "kustomization.yaml").is_file():
        for component in overlay_components(manifests):
            _apply_component(component, documents)
    return documents


def base_webhook_configurations(manifests: Path) -> list[WebhookConfiguration]:
    """The Validating/MutatingWebhookConfigurations of `manifests/base/*.yaml` (in file order) with
    the entries the self-managed overlay renders: the base's, changed by each component the overlay
    lists. Raises ManifestsError when there are none (a wrong folder) or a file is not UTF-8 YAML."""
    documents = webhook_documents(manifests)
    return [
        WebhookConfiguration(
            doc["kind"], doc["metadata"]["name"], tuple(hook["name"] for hook in doc.get("webhooks") or [])
        )
        for doc in documents
    ]


def ca_bundle_patch(bundle_pem: bytes, configuration: WebhookConfiguration) -> dict[str, Any]:
    """A strategic-merge patch setting `caBundle` (base64 of `bundle_pem`) on every entry of
    `configuration`, each addressed by its name (the webhooks list's merge key)."""
    value = base64.b64encode(bundle_pem).decode()
    patch: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": configuration.kind,
        "metadata": {"name": configuration.name},
    }
    if configuration.entries:
        patch["webhooks"] = [
            {"name": name, "clientConfig": {"caBundle": value}} for name in configuration.entries
        ]
    return patch


def bundle_with_previous(new_ca: bytes, previous_ca: bytes | None) -> bytes:
    """The new CA followed by the previous one (when there was one and it differs), so API servers
    trust both the old and the new serving certificate while the secret update reaches the pods."""
    if not previous_ca or previous_ca.strip() == new_ca.strip() or BEGIN not in previous_ca:
        return new_ca
    first = previous_ca[previous_ca.index(BEGIN) :]
    end = first.find(b"-----END CERTIFICATE-----")
    previous_only = first[: end + len(b"-----END CERTIFICATE-----")] + b"\n"
    return new_ca.rstrip(b"\n") + b"\n" + previous_only


def self_managed_certs(manifests: Path) -> Path:
    """Where the self-managed overlay reads its certificate files."""
    return manifests / SELF_MANAGED / "certs"


def patched_bundle(manifests: Path) -> bytes | None:
    """The CA bundle (PEM) the overlay's validating patch sets now, or None when there is none
    (also for the index-addressed patches of older releases, which a rewrite replaces)."""
    path = manifests / SELF_MANAGED / "ca-bundle.validating.yaml"
    if not path.is_file():
        return None
    docs = _read_yaml(path)
    hooks = docs[0].get("webhooks") if docs and isinstance(docs[0], dict) else None
    if not hooks:
        return None
    return base64.b64decode(hooks[0]["clientConfig"]["caBundle"])


def write_patches(manifests: Path, bundle: bytes) -> list[Path]:
    """Write `ca-bundle.<validating|mutating>.yaml` into the self-managed overlay, setting `bundle`
    (PEM: the CA, during a rotation also the previous one, see bundle_with_previous) on every entry
    the overlay renders. Returns the files written; raises ManifestsError as
    base_webhook_configurations does."""
    written = []
    for configuration in base_webhook_configurations(manifests):
        target = manifests / SELF_MANAGED / f"ca-bundle.{WEBHOOK_KINDS[configuration.kind]}.yaml"
        header = (
            f"# caBundle for every entry of {configuration.kind} {configuration.name} (by name), written by\n"
            "# `guardhook certs --patch-manifests` for the components this overlay lists: after changing\n"
            "# `components:`, run it again (with --keep-certs to keep the certificates).\n"
        )
        body = yaml.safe_dump(ca_bundle_patch(bundle, configuration), sort_keys=False)
        write_atomically(target, (header + body).encode())  # a planted symlink is replaced, not followed
        written.append(target)
    return written
