"""The decision log: one structured line per policy decision the webhook makes (as Gatekeeper's
`--log-denies`), on the `guardhook.decisions` logger.

Denials, warnings, audit annotations and mutations are logged at INFO, a policy that failed at
WARNING, a plain allow at DEBUG. Fields (see guardhook.server.logformat for the two formats):
uid, operation, resource (`group/version/resource`, core group `v1/...`), subResource, namespace,
name, user (userInfo.username), dryRun, policy, action (Deny/Warn/Audit/Mutate, "" for none),
outcome (allowed/denied/warned/audited/mutated/error), message (the policy's own text, as sent to
the API server), policyMs (that policy's judge time) and latencyMs (the whole request's). Never the
object, oldObject or options: only the request's identifying attributes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from guardhook.wire import AdmissionRequest, is_dry_run

log = logging.getLogger("guardhook.decisions")


class DecisionLike(Protocol):
    """What the log reads of a guardhook.admission.engine.Decision."""

    @property
    def policy(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def action(self) -> str: ...


LEVELS = {"allowed": logging.DEBUG, "error": logging.WARNING}
"""Log level by outcome; every other outcome (a violation acted on) is INFO."""


def request_fields(request: AdmissionRequest) -> dict[str, Any]:
    """The identifying attributes of `request` (never its object, oldObject or options)."""
    resource: Mapping[str, Any] = request.get("resource") or {}
    group, version = str(resource.get("group") or ""), str(resource.get("version") or "")
    gvr = "/".join(part for part in (group, version, str(resource.get("resource") or "")) if part)
    user = request.get("userInfo") or {}
    return {
        "uid": str(request.get("uid") or ""),
        "operation": str(request.get("operation") or ""),
        "resource": gvr,
        "subResource": str(request.get("subResource") or ""),
        "namespace": str(request.get("namespace") or ""),
        "name": str(request.get("name") or ""),
        "user": str(user.get("username") or "") if isinstance(user, Mapping) else "",
        "dryRun": is_dry_run(request),
    }


def log_decisions(
    request: AdmissionRequest, decisions: Sequence[DecisionLike], timings: Mapping[str, float], seconds: float
) -> None:
    """Write one line per decision (skipping DEBUG lines unless enabled). `timings`: each policy's
    judge time in seconds by policy id; `seconds`: the whole request's judging."""
    common: dict[str, Any] | None = None
    for decision in decisions:
        level = LEVELS.get(decision.outcome, logging.INFO)
        if not log.isEnabledFor(level):
            continue
        if common is None:
            common = request_fields(request)
        fields = {
            **common,
            "policy": decision.policy,
            "action": decision.action,
            "outcome": decision.outcome,
            "message": decision.message,
            "policyMs": round(timings.get(decision.policy, 0.0) * 1000, 3),
            "latencyMs": round(seconds * 1000, 3),
        }
        # Logger.handle(makeRecord(...)) is Logger.log without findCaller's walk up the stack:
        # the formats (guardhook.server.logformat) never print the caller, and a line per denial
        # is on the request path.
        extra = {"fields": fields}
        log.handle(log.makeRecord(log.name, level, __file__, 0, "admission decision", (), None, extra=extra))
