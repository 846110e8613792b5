"""Carry out the PATCH entries of a leader-service-sync plan (`guardhook.leadersync.desired`).

Each is one JSONPatch (`application/json-patch+json`): a `test` of the selector map as judged,
then the policy's `add` of `leaderworkerset.sigs.k8s.io/worker-index: "0"`. Services through
`CoreV1Api.patch_namespaced_service`, InferencePools through
`CustomObjectsApi.patch_namespaced_custom_object`. The API server answers a failed `test` (the
selector changed since the view saw it) with 422 and an object already gone with 404: both are
left to the next round, which judges what is there then. Every failure is reported and the rest
of the plan still runs; every change is logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from guardhook.leadersync.desired import PATCH, Entry, Plan
from guardhook.reconcile.outcome import RoundOutcome

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"
FIELD_MANAGER = "guardhook-leader-service-sync"
REQUEST_TIMEOUT_SECONDS = 10.0
PATCHED = "patched"
CONFLICT = "conflict"
GONE = "gone"
ERROR = "error"
RESULTS = (PATCHED, CONFLICT, GONE, ERROR)
CONFLICT_STATUSES = (409, 422)
NOT_FOUND = 404


@dataclass
class Outcome(RoundOutcome):
    """What one round did: "Kind namespace/name" per result, and error messages."""

    unnarrowed: list[str] = field(default_factory=list)
    """Entries left as they are (reported, opted out, cannot be narrowed): their lines."""


def apply_plan(api: client.ApiClient, planned: Plan, counted: Any = None) -> Outcome:
    """Send the PATCH entries of `planned`; list the others in `unnarrowed`. `counted(kind,
    result)` is called per PATCH sent (RESULTS). Never raises for an API error."""
    outcome = Outcome()
    for entry in planned.entries:
        if entry.state != PATCH:
            outcome.unnarrowed.append(entry.line())
            continue
        result = patch_entry(api, entry, outcome)
        if counted is not None:
            counted(entry.kind, result)
    return outcome


def patch_entry(api: client.ApiClient, entry: Entry, outcome: Outcome) -> str:
    """PATCH one object; returns its result (RESULTS) and records it in `outcome`."""
    body = [dict(op) for op in entry.patch]
    try:
        if entry.kind == "Service":
            client.CoreV1Api(api).patch_namespaced_service(
                entry.name,
                entry.namespace,
                body,
                field_manager=FIELD_MANAGER,
                _content_type=JSON_PATCH,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        else:
            group, _, version = entry.api_version.partition("/")
            client.CustomObjectsApi(api).patch_namespaced_custom_object(
                group,
                version,
                entry.namespace,
                "inferencepools",
                entry.name,
                body,
                field_manager=FIELD_MANAGER,
                _content_type=JSON_PATCH,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
    except ApiException as exc:
        return _failed(entry, outcome, exc.status, f"HTTP {exc.status} {exc.reason}")
    except (HTTPError, OSError) as exc:  # API server unreachable
        return _failed(entry, outcome, 0, str(exc))
    log.info(
        'leader-service-sync: patched %s to leaders (worker-index "0"): it could match workers of '
        "LeaderWorkerSet %s",
        entry.subject,
        ", ".join(entry.lws),
    )
    outcome.patched.append(entry.subject)
    return PATCHED


def _failed(entry: Entry, outcome: Outcome, status: int, why: str) -> str:
    if status in CONFLICT_STATUSES:
        log.info("leader-service-sync: %s changed since judged (%s); next round", entry.subject, why)
        outcome.conflicts.append(entry.subject)
        return CONFLICT
    if status == NOT_FOUND:
        outcome.gone.append(entry.subject)
        return GONE
    message = f"patch {entry.subject}: {why}"
    log.warning("leader-service-sync: %s", message)
    outcome.errors.append(message)
    return ERROR
