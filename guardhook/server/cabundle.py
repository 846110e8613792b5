"""Patch a CA into the webhook configurations of `manifests/` for the self-managed overlay.

`guardhook certs --patch-manifests DIR` writes the certificates into
`DIR/overlays/self-managed/certs/` and one JSON patch (RFC 6902, as YAML) per webhook
configuration beside them, setting `clientConfig.caBundle` on every webhook entry. The same file
patches a live object: `kubectl patch validatingwebhookconfiguration guardhook --type=json
--patch-file ...`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from guardhook.server.certs import CertPaths

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
    """One webhook configuration of the base: its kind, name and number of webhook entries."""

    kind: str
    name: str
    webhooks: int


def base_webhook_configurations(manifests: Path) -> list[WebhookConfiguration]:
    """The Validating/MutatingWebhookConfigurations in `manifests/base/*.yaml`, in file order.
    Raises ManifestsError when there are none (a wrong folder) or a file is not UTF-8 YAML."""
    found: list[WebhookConfiguration] = []
    for path in sorted((manifests / BASE).glob("*.yaml")):
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ManifestsError(f"cannot read {path}: {exc}") from exc
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") in WEBHOOK_KINDS:
                found.append(
                    WebhookConfiguration(doc["kind"], doc["metadata"]["name"], len(doc.get("webhooks") or []))
                )
    if not found:
        raise ManifestsError(f"no webhook configurations in {manifests / BASE}: is {manifests} manifests/?")
    return found


def ca_bundle_ops(bundle_pem: bytes, webhooks: int) -> list[dict[str, Any]]:
    """JSON patch operations setting `caBundle` (base64 of `bundle_pem`) on webhooks 0..webhooks-1."""
    value = base64.b64encode(bundle_pem).decode()
    return [
        {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": value}
        for index in range(webhooks)
    ]


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


def write_patches(manifests: Path, certs: CertPaths, previous_ca: bytes | None = None) -> list[Path]:
    """Write `ca-bundle.<validating|mutating>.yaml` into the self-managed overlay, trusting the CA
    in `certs` (and `previous_ca`, see bundle_with_previous). Returns the files written."""
    configurations = base_webhook_configurations(manifests)
    bundle = bundle_with_previous(certs.ca.read_bytes(), previous_ca)
    written = []
    for configuration in configurations:
        target = manifests / SELF_MANAGED / f"ca-bundle.{WEBHOOK_KINDS[configuration.kind]}.yaml"
        header = (
            f"# caBundle for {configuration.kind} {configuration.name}, written by `guardhook certs "
            "--patch-manifests`.\n"
        )
        body = yaml.safe_dump(ca_bundle_ops(bundle, configuration.webhooks), sort_keys=False)
        target.write_text(header + body)
        written.append(target)
    return written
