"""guardhook's webhook entries as manifest-based admission configuration (KEP-5793, beta in 1.37,
feature gate `ManifestBasedAdmissionControlConfig`): files the API server loads at startup, so no
API user can remove them — the answer to "guardhook cannot guard its own off switch".

What the API server reads (kubernetes.io/docs/reference/access-authn-authz/manifest-admission-control,
KEP-5793 "New AdmissionConfiguration Schema", "Naming", "Decoding, Defaulting, and Validation"):

- `--admission-control-config-file` points at an `AdmissionConfiguration`
  (apiserver.config.k8s.io/v1) whose `ValidatingAdmissionWebhook` and `MutatingAdmissionWebhook`
  plugins carry a `WebhookAdmissionConfiguration` with `staticManifestsDir`: an absolute folder
  of manifests for that plugin only;
- each manifest is an admissionregistration.k8s.io/v1 Validating- or MutatingWebhookConfiguration
  whose name ends in `.static.k8s.io` (reserved: the REST API refuses such names) and whose entries
  call a `clientConfig.url` with a `caBundle` (`clientConfig.service` is not allowed: the API server
  may start before cluster DNS and Services).

The entries are the base manifests' (manifests/base, with the self-managed overlay's components),
unchanged but for the name and the clientConfig, so the same policies run with the same failure
policies, timeouts and match conditions.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from guardhook.server.cabundle import ManifestsError, webhook_documents
from guardhook.server.certs import write_atomically

STATIC_SUFFIX = ".static.k8s.io"
"""The name suffix reserved for manifest-based admission configurations (k8s.io/apiserver
pkg/admission/plugin/manifest StaticConfigSuffix)."""
STATIC_NAME = "guardhook" + STATIC_SUFFIX
PLUGINS = {
    "ValidatingWebhookConfiguration": ("ValidatingAdmissionWebhook", "validating-webhooks"),
    "MutatingWebhookConfiguration": ("MutatingAdmissionWebhook", "mutating-webhooks"),
}
"""Configuration kind -> (admission plugin, its manifests folder under the static root)."""
DEFAULT_STATIC_ROOT = "/etc/kubernetes/admission"


def static_configurations(manifests: Path, url: str, bundle_pem: bytes) -> list[dict[str, Any]]:
    """guardhook's webhook configurations from `manifests` (a manifests/ folder) as manifest-based
    ones: named STATIC_NAME, every entry calling `url` (scheme https, host and port; the entry's
    path, /validate or /mutate, appended) and trusting `bundle_pem`. Raises ManifestsError for a
    folder without webhook configurations and ValueError for a URL that is not https://host[:port]."""
    base = base_url(url)
    documents = webhook_documents(manifests)
    bundle = base64.b64encode(bundle_pem).decode()
    out = []
    for document in documents:
        static = copy.deepcopy(document)
        static["metadata"] = {"name": STATIC_NAME, "labels": dict(document["metadata"].get("labels") or {})}
        for entry in static.get("webhooks") or []:
            service = (entry.get("clientConfig") or {}).get("service") or {}
            path = service.get("path") or (
                "/mutate" if document["kind"].startswith("Mutating") else "/validate"
            )
            entry["clientConfig"] = {"url": base + path, "caBundle": bundle}
        out.append(static)
    return out


def base_url(url: str) -> str:
    """`https://host[:port]` of `url`; raises ValueError for anything else (another scheme, a path,
    a query)."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"--url {url!r}: give https://HOST[:PORT] (the API server calls guardhook there)")
    return f"https://{parts.netloc}"


def admission_configuration(root: str) -> dict[str, Any]:
    """The `AdmissionConfiguration` loading the two webhook plugins' manifests from `root`'s
    `validating-webhooks/` and `mutating-webhooks/` (absolute paths on the API server's host)."""
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": plugin,
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": "",
                    "staticManifestsDir": f"{root.rstrip('/')}/{folder}/",
                },
            }
            for plugin, folder in PLUGINS.values()
        ],
    }


def write_static(out: Path, manifests: Path, url: str, bundle_pem: bytes, root: str) -> list[Path]:
    """Write `out/admission-configuration.yaml` and `out/<plugin folder>/guardhook.yaml` (copy
    `out`'s contents to `root` on every API server host); returns the paths written. Raises as
    static_configurations, and ValueError for a `root` that is not absolute."""
    if not root.startswith("/"):
        raise ValueError(f"--static-root {root!r}: staticManifestsDir must be an absolute path")
    configurations = static_configurations(manifests, url, bundle_pem)
    written = []
    config = out / "admission-configuration.yaml"
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(config, yaml.safe_dump(admission_configuration(root), sort_keys=False).encode())
    written.append(config)
    for configuration in configurations:
        folder = out / PLUGINS[configuration["kind"]][1]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "guardhook.yaml"
        write_atomically(path, yaml.safe_dump(configuration, sort_keys=False).encode())
        written.append(path)
    return written


__all__ = ["STATIC_NAME", "STATIC_SUFFIX", "ManifestsError", "admission_configuration", "write_static"]
