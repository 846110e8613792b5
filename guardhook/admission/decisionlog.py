"""The decision log: one structured line per policy decision the webhook makes (as Gatekeeper's
`--log-denies`), on the `guardhook.decisions` logger.

Denials, warnings, audit annotations and mutations are logged at INFO, a policy that failed at
WARNING, a plain allow at DEBUG. Fields (see guardhook.server.logformat for the two formats):
uid, operation, resource (`group/version/resource`, core group `v1/...`), subResource, namespace,
name, user (userInfo.username), dryRun, policy, action (Deny/Warn/Audit/Mutate, "" for none),
outcome (allowed/denied/warned/audited/mutated/error), message (the policy's own text, as sent to
the API server), policyMs (that policy's judge time) and latencyMs (the whole request's). Never the
object, oldObject or options: only the request's identifying attributes.

With `log_allowed_disruptions(True)` (`serve` without client authentication) an allow by a policy
that spends a group's disruption budget (DISRUPTION_POLICIES; not a dry run, which spends nothing:
guardhook.wire.is_dry_run) is logged at INFO too, with the
caller's groups (userInfo.groups) beside its user: a forged review that spent a budget can then be
traced to whoever sent it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
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


MESSAGE = "admission decision"

LEVELS = {"allowed": logging.DEBUG, "error": logging.WARNING}
"""Log level by outcome; every other outcome (a violation acted on) is INFO."""

DISRUPTION_POLICIES = frozenset({"group-eviction", "worker-delete", "group-resize"})
"""The policies whose allow records a disruption in the eviction ledger (guardhook.budget.decide):
evictions, pod deletes and group resizes."""

_allowed_disruption_level = logging.DEBUG

DirectLine = Callable[[logging.Logger, int, str, dict[str, Any]], bool]
"""Hands a structured line (logger, level, message, fields) to a log writer without a LogRecord;
False when the line must go through logging instead (guardhook.server.asynclog.direct_line)."""

_direct: DirectLine | None = None


def write_lines_with(direct: DirectLine | None) -> None:
    """Offer each decision line to `direct` first (`serve`'s background log writer, which formats
    the same line without a LogRecord); None: through logging only (the default)."""
    global _direct
    _direct = direct


def log_allowed_disruptions(enabled: bool) -> None:
    """Log a DISRUPTION_POLICIES allow at INFO, with the caller's groups (enabled), or at DEBUG as
    any allow (the default)."""
    global _allowed_disruption_level
    _allowed_disruption_level = logging.INFO if enabled else logging.DEBUG


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


def _user_groups(request: AdmissionRequest) -> list[str]:
    user = request.get("userInfo") or {}
    groups = user.get("groups") if isinstance(user, Mapping) else None
    return [str(g) for g in groups] if isinstance(groups, list) else []


def log_decisions(
    request: AdmissionRequest, decisions: Sequence[DecisionLike], timings: Mapping[str, float], seconds: float
) -> None:
    """Write one line per decision (skipping DEBUG lines unless enabled). `timings`: each policy's
    judge time in seconds by policy id; `seconds`: the whole request's judging."""
    common: dict[str, Any] | None = None
    direct = _direct
    spends = _allowed_disruption_level != logging.DEBUG and not is_dry_run(
        request
    )  # a dry run spends nothing
    for decision in decisions:
        disruption = spends and decision.outcome == "allowed" and decision.policy in DISRUPTION_POLICIES
        level = _allowed_disruption_level if disruption else LEVELS.get(decision.outcome, logging.INFO)
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
        if disruption:
            fields["groups"] = _user_groups(request)
        if direct is not None and direct(log, level, MESSAGE, fields):
            continue  # handed to the writer as it is: no LogRecord, no handler chain
        # Logger.handle(makeRecord(...)) is Logger.log without findCaller's walk up the stack:
        # the formats (guardhook.server.logformat) never print the caller, and a line per denial
        # is on the request path.
        extra = {"fields": fields}
        log.handle(log.makeRecord(log.name, level, __file__, 0, MESSAGE, (), None, extra=extra))
