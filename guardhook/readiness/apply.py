"""Write planned `guardhook.io/group-ready` conditions with PATCH pods/status.

Each patch is a strategic merge patch (`application/strategic-merge-patch+json`) on the status
subresource holding only guardhook's condition: PodStatus.conditions merges by `type`
(patchStrategy merge, patchMergeKey type, k8s.io/api core/v1), so the kubelet's own conditions are
left alone. `metadata.uid` rides along as a precondition, as the kubelet's status manager and the
AWS Load Balancer Controller's readiness-gate updates do: a leader replaced under the same name
answers 409 and is planned afresh next round instead of getting its predecessor's verdict.
`lastTransitionTime` moves only when the status flips. 404 (the pod is gone) is not an error.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from guardhook.groups.ready import GATE
from guardhook.readiness.desired import Entry
from guardhook.reconcile.outcome import RoundOutcome

log = logging.getLogger(__name__)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = (5.0, 10.0)  # connect, read (seconds)
CONFLICT = 409
NOT_FOUND = 404


class PodStatusApi(Protocol):
    """The CoreV1Api method the applier calls."""

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: Any, **kwargs: Any) -> Any:
        """PATCH pods/<name>/status in `namespace` with `body`."""


class Outcome(RoundOutcome):
    """What one group-readiness round wrote ("namespace/pod" each): patched, replaced meanwhile
    (409), gone (404), and errors (messages); printed by `guardhook group-readiness --once`."""


def now_rfc3339() -> str:
    """The current UTC time as Kubernetes writes metav1.Time (RFC 3339, whole seconds, Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition_patch(entry: Entry, now: str) -> dict[str, Any]:
    """The strategic merge patch body for `entry` (see the module docstring)."""
    current = entry.current
    if current is not None and current.status == entry.want.status and current.last_transition_time:
        transition = current.last_transition_time
    else:
        transition = now
    condition = {
        "type": GATE,
        "status": entry.want.status,
        "reason": entry.want.reason,
        "message": entry.want.message,
        "lastTransitionTime": transition,
    }
    return {"metadata": {"uid": entry.uid}, "status": {"conditions": [condition]}}


PATCHED = "patched"
CONFLICTED = "conflict"
GONE = "gone"
FAILED = "error"


def patch_condition(api: PodStatusApi, entry: Entry, outcome: Outcome) -> str:
    """PATCH one leader's condition; record it in `outcome` and return what happened: PATCHED,
    CONFLICTED (409), GONE (404) or FAILED. Never raises for an API or connection error."""
    name = f"{entry.namespace}/{entry.pod}"
    try:
        response = api.patch_namespaced_pod_status(
            entry.pod,
            entry.namespace,
            condition_patch(entry, now_rfc3339()),
            _content_type=STRATEGIC_MERGE,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        # The answer (the whole pod) is not needed, but it must be read to its end before the
        # connection goes back to the pool: an unread rest would be the next request's status line.
        for finish in ("drain_conn", "release_conn"):
            call = getattr(response, finish, None)
            if call is not None:
                call()
    except ApiException as exc:
        if exc.status == CONFLICT:
            log.info("group-readiness: %s was replaced meanwhile (409); planning it again", name)
            outcome.conflicts.append(name)
            return CONFLICTED
        if exc.status == NOT_FOUND:
            outcome.gone.append(name)
            return GONE
        outcome.errors.append(f"patch pods/status {name}: HTTP {exc.status} {exc.reason}")
        log.warning("group-readiness: %s", outcome.errors[-1])
        return FAILED
    except (HTTPError, OSError) as exc:  # API server unreachable
        outcome.errors.append(f"patch pods/status {name}: {exc}")
        log.warning("group-readiness: %s", outcome.errors[-1])
        return FAILED
    log.info("group-readiness: %s %s=%s (%s)", name, GATE, entry.want.status, entry.want.message)
    outcome.patched.append(name)
    return PATCHED
