"""Carry out a certificate round through the API: read the Secret, write what `issue.plan` says,
and set its CA bundle as the `caBundle` of every entry of guardhook's own webhook configurations.

The Secret is replaced with its `resourceVersion` (optimistic concurrency): two replicas that both
found it empty (at start, before any holds the Lease) cannot both write a CA; the one answered 409
reads the winner's on its next round. Only the Secret and the webhook configurations named in the
`Target` are ever read or written (the chart's RBAC names them with resourceNames). A
configuration is patched only where an entry's caBundle differs, with a strategic-merge patch
addressing each entry by its name (the webhooks list's merge key), so a round with nothing to do
writes nothing.
"""

from __future__ import annotations

import base64
import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from guardhook.certsync.issue import CA_FILE, KEYS, CertSettings, plan

log = logging.getLogger(__name__)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = (5.0, 10.0)  # connect, read (seconds)
CONFLICT = 409
NOT_FOUND = 404


@dataclass(frozen=True)
class Target:
    """What the controller manages: the Secret `namespace/secret`, the certificates' settings, and
    the names of the Validating and MutatingWebhookConfigurations whose entries get the CA bundle."""

    namespace: str
    secret: str
    settings: CertSettings
    webhook_configurations: tuple[str, ...] = ("guardhook",)


@dataclass
class Outcome:
    """What one round did: why the Secret was rewritten ("" when it was not), the webhook
    configurations patched ("Kind/name"), errors (messages), and the CA bundle the Secret holds
    afterwards (empty when it could not be read or written)."""

    rotated: str = ""
    patched: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    bundle: bytes = b""


def _decoded(secret: Any) -> dict[str, bytes]:
    data = secret.data or {}
    return {k: base64.b64decode(v) for k, v in data.items() if k in KEYS and v}


def sync_secret(core: client.CoreV1Api, target: Target, now: datetime.datetime, outcome: Outcome) -> None:
    """Make the Secret hold good certificates (`issue.plan`), recording into `outcome` the CA
    bundle it holds afterwards (empty when it could not be read or written)."""
    try:
        secret = core.read_namespaced_secret(
            target.secret, target.namespace, _request_timeout=REQUEST_TIMEOUT
        )
    except (ApiException, HTTPError, OSError) as exc:
        outcome.errors.append(f"cannot read Secret {target.namespace}/{target.secret}: {_why(exc)}")
        return
    current = _decoded(secret)
    step = plan(current, target.settings, now)
    if step.data is None:
        outcome.bundle = current[CA_FILE]
        return
    data = {k: base64.b64encode(v).decode() for k, v in step.data.items()}
    secret.data = {**(secret.data or {}), **data}
    try:
        core.replace_namespaced_secret(
            target.secret, target.namespace, secret, _request_timeout=REQUEST_TIMEOUT
        )
    except (ApiException, HTTPError, OSError) as exc:
        if isinstance(exc, ApiException) and exc.status == CONFLICT:
            log.info(
                "Secret %s/%s changed meanwhile; reading it again next round", target.namespace, target.secret
            )
        else:
            outcome.errors.append(f"cannot write Secret {target.namespace}/{target.secret}: {_why(exc)}")
        return
    outcome.rotated = step.why
    outcome.bundle = step.data[CA_FILE]
    log.info("wrote Secret %s/%s: %s", target.namespace, target.secret, step.why)


def _why(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return str(exc) or type(exc).__name__


def ca_bundle_patch(entries: list[str], value: str) -> dict[str, Any]:
    """The strategic-merge patch setting caBundle `value` (base64) on the entries named `entries`."""
    return {"webhooks": [{"name": n, "clientConfig": {"caBundle": value}} for n in entries]}


def patch_ca_bundles(
    api: client.AdmissionregistrationV1Api, target: Target, bundle: bytes, outcome: Outcome
) -> None:
    """Set base64(`bundle`) as the caBundle of every entry of the target's webhook configurations
    where it differs. A configuration that does not exist (e.g. no mutating entries) is skipped."""
    value = base64.b64encode(bundle).decode()
    kinds = (
        (
            "ValidatingWebhookConfiguration",
            api.read_validating_webhook_configuration,
            api.patch_validating_webhook_configuration,
        ),
        (
            "MutatingWebhookConfiguration",
            api.read_mutating_webhook_configuration,
            api.patch_mutating_webhook_configuration,
        ),
    )
    for name in target.webhook_configurations:
        for kind, read, patch in kinds:
            try:
                found = read(name, _request_timeout=REQUEST_TIMEOUT)
                stale = [
                    hook.name
                    for hook in found.webhooks or []
                    if (hook.client_config.ca_bundle or "") != value
                ]
                if not stale:
                    continue
                patch(
                    name,
                    ca_bundle_patch(stale, value),
                    _content_type=STRATEGIC_MERGE,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            except (ApiException, HTTPError, OSError) as exc:
                if isinstance(exc, ApiException) and exc.status == NOT_FOUND:
                    continue
                outcome.errors.append(f"cannot set the caBundle of {kind} {name}: {_why(exc)}")
                continue
            outcome.patched.append(f"{kind}/{name}")
            log.info("set the caBundle of %d entries of %s %s", len(stale), kind, name)


def sync_once(api: client.ApiClient, target: Target, now: datetime.datetime | None = None) -> Outcome:
    """One round: the Secret, then the caBundles from the bundle it holds. Never raises for an API
    error (they are in the Outcome's errors)."""
    outcome = Outcome()
    sync_secret(client.CoreV1Api(api), target, now or datetime.datetime.now(datetime.UTC), outcome)
    if outcome.bundle:
        patch_ca_bundles(client.AdmissionregistrationV1Api(api), target, outcome.bundle, outcome)
    for error in outcome.errors:
        log.warning("certificates: %s", error)
    return outcome
