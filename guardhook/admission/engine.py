"""The one engine that judges admission requests, for the webhook, `review`, `check` and `audit`.

It dispatches a request to the policies whose targets match, applies each policy's configured
actions (Deny / Warn / Audit on /validate, Mutate on /mutate) and combines every result into one
AdmissionResponse (design.md §3).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from guardhook.admission.decisionlog import log_decisions
from guardhook.cluster.view.store import ClusterView
from guardhook.config import Config, Exemptions, default_config
from guardhook.policies import REGISTRY
from guardhook.policies.base import (
    REASONS,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    error_judgement,
)
from guardhook.wire import AdmissionRequest, AdmissionResponse, JSONPatchOp, is_dry_run

log = logging.getLogger(__name__)

Endpoint = Literal["validate", "mutate"]


@dataclass(frozen=True, slots=True)
class Route:
    """A policy that sees a request, with what the configuration says of it, read once per
    configuration rather than per request: its `actions` at the endpoint, `params`, its own
    `exemptions` (None when it has none) and whether its advisories go out at this endpoint (on
    /validate, or on /mutate for a policy that runs there only)."""

    policy: Policy
    actions: tuple[str, ...]
    params: Mapping[str, Any]
    exemptions: Exemptions | None
    advises: bool


@dataclass(frozen=True)
class Decision:
    """What one policy did to one request, for metrics and reports.

    `outcome` is "allowed" (no violation), "denied", "warned", "audited", "mutated" or "error";
    `action` is the enforcement action taken (Deny, Warn, Audit, Mutate), "" when none was;
    `findings` the violation's separate findings (Violation.findings), for one-per-line reports;
    `patch` the JSONPatch operations a "mutated" decision added to the response's patch (so a
    reader can say which policy made each).
    """

    policy: str
    outcome: str
    message: str = ""
    action: str = ""
    findings: tuple[str, ...] = ()
    patch: tuple[JSONPatchOp, ...] = ()


@dataclass
class Verdict:
    """The engine's answer: the AdmissionResponse plus one Decision per policy that ran,
    `timings` (seconds each policy's `judge` took, by policy id) and `seconds` (the whole judging)."""

    response: AdmissionResponse
    decisions: list[Decision] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class Engine:
    """Judge AdmissionRequests against a cluster view with a configuration.

    `ledger` is the eviction disruption ledger the group-eviction policy records into; with
    `record=False` (offline `review`/`check`) nothing is ever recorded. With `log_decisions`
    (the webhook) every decision is written to the decision log (guardhook.admission.decisionlog).
    """

    def __init__(
        self,
        view: ClusterView,
        config: Config | None = None,
        policies: Sequence[Policy] = REGISTRY,
        ledger: Any = None,
        record: bool = True,
        log_decisions: bool = False,
    ) -> None:
        self.view = view
        self.policies = list(policies)
        self.ledger = ledger
        self.record = record
        self.log_decisions = log_decisions
        self._setup = _Setup(config or default_config(policies))

    @property
    def config(self) -> Config:
        """The configuration requests are judged with now."""
        return self._setup.config

    def reconfigure(self, config: Config) -> None:
        """Judge the requests that start from now on with `config` (a request in flight finishes
        with the configuration it started with), and apply its staleness limit to the view."""
        self._setup = _Setup(config)
        self.view.stale_after_seconds = config.stale_after_seconds

    def judge(self, request: AdmissionRequest, endpoint: Endpoint = "validate") -> Verdict:
        """Judge one request at `endpoint`. Never raises for any request content: a policy that
        fails follows its failure mode and the failure is logged. An exempt namespace skips every
        policy; an exempt user or group skips every policy that honours user exemptions (all but
        group-readiness, which must see the StatefulSet controller's pod creations); a policy's own
        exemptions (`policies.<id>.exemptions`) skip that policy."""
        started = time.perf_counter()
        setup = self._setup  # one configuration for the whole request, even across a reload
        verdict = Verdict(response={"uid": str(request.get("uid", "")), "allowed": True})
        namespace = str(request.get("namespace") or "")
        raw_user = request.get("userInfo") or {}
        user = raw_user if isinstance(raw_user, dict) else {}
        exemptions = setup.config.exemptions
        if exemptions.exempts({}, namespace):
            return verdict
        exempt_user = exemptions.exempts(user, "")
        may_record: bool | None = None  # read once, at the first policy that runs
        for route in self._dispatch(setup, request, endpoint):
            policy = route.policy
            if exempt_user and policy.honours_user_exemptions:
                continue
            if route.exemptions is not None and route.exemptions.exempts(user, namespace):
                continue  # exempt from this policy only (policies.<id>.exemptions)
            if may_record is None:
                may_record = self.record and not is_dry_run(request)
            policy_started = time.perf_counter()
            judgement, errored = self._run(route, request, may_record)
            verdict.timings[policy.id] = time.perf_counter() - policy_started
            self._apply(verdict, route, judgement, errored)
        verdict.seconds = time.perf_counter() - started
        if self.log_decisions:
            log_decisions(request, verdict.decisions, verdict.timings, verdict.seconds)
        return verdict

    def _dispatch(self, setup: _Setup, request: AdmissionRequest, endpoint: Endpoint) -> list[Route]:
        """The policies (with their actions at `endpoint`) that see this request, in registry order.
        Dispatch is by (group, resource, subResource, operation), so the answer is cached per key."""
        resource: Mapping[str, Any] = request.get("resource") or {}
        key = (
            endpoint,
            resource.get("group", ""),
            resource.get("resource", ""),
            request.get("subResource") or "",
            request.get("operation", ""),
        )
        found = setup.routes.get(key)
        if found is None:
            found = []
            for policy in self.policies:
                actions = _actions_at(setup.config, policy, endpoint)
                if actions and any(t.matches(request) for t in policy.targets):
                    found.append(_route(setup.config, policy, actions, endpoint))
            setup.routes[key] = found
        return found

    def _run(self, route: Route, request: AdmissionRequest, may_record: bool) -> tuple[Judgement, bool]:
        policy = route.policy
        ctx = PolicyContext(
            request=request, view=self.view, params=route.params, ledger=self.ledger, may_record=may_record
        )
        try:
            return policy.judge(ctx), False
        except Exception as error:  # a policy bug must not turn into a 500 or a crash
            log.exception("policy %s failed on request %s", policy.id, request.get("uid"))
            return error_judgement(policy, error), True

    def _apply(self, verdict: Verdict, route: Route, judgement: Judgement, errored: bool) -> None:
        response = verdict.response
        policy, actions = route.policy, route.actions
        if route.advises:
            for advisory in judgement.advisories:
                _add_warning(response, f"[{policy.id}] {advisory}")
        for key, value in judgement.audit_annotations:
            response.setdefault("auditAnnotations", {})[f"{policy.id}-{key}"] = value
        violation = judgement.violation
        if violation is None:
            verdict.decisions.append(Decision(policy.id, "error" if errored else "allowed"))
            return
        text = f"[{policy.id}] {violation.message}"
        message, findings = violation.message, violation.findings
        for action in actions:
            if action == "Deny":
                _deny(response, violation, text)
                verdict.decisions.append(Decision(policy.id, "denied", message, "Deny", findings))
            elif action == "Warn":
                _add_warning(response, text)
                verdict.decisions.append(Decision(policy.id, "warned", message, "Warn", findings))
            elif action == "Audit":
                response.setdefault("auditAnnotations", {})[policy.id] = message
                verdict.decisions.append(Decision(policy.id, "audited", message, "Audit", findings))
            elif action == "Mutate" and violation.patch:
                _add_patch(response, violation.patch)
                verdict.decisions.append(
                    Decision(policy.id, "mutated", message, "Mutate", findings, tuple(violation.patch))
                )


@dataclass
class _Setup:
    """A configuration and the dispatch cache built from it, swapped together on a reload."""

    config: Config
    routes: dict[tuple[str, ...], list[Route]] = field(default_factory=dict)


def _route(config: Config, policy: Policy, actions: tuple[str, ...], endpoint: Endpoint) -> Route:
    settings = config.settings(policy.id)
    own = settings.exemptions
    return Route(
        policy=policy,
        actions=actions,
        params=settings.params,
        exemptions=own if own.users or own.groups or own.namespaces else None,
        # Advisories go out on /validate, or on /mutate for a policy that runs there only.
        advises=endpoint == "validate" or not _actions_at(config, policy, "validate"),
    )


def _actions_at(config: Config, policy: Policy, endpoint: Endpoint) -> tuple[str, ...]:
    configured = config.settings(policy.id).actions
    if endpoint == "mutate":
        return ("Mutate",) if "Mutate" in configured else ()
    return tuple(a for a in configured if a != "Mutate")


def _add_warning(response: AdmissionResponse, text: str) -> None:
    response.setdefault("warnings", []).append(text)


def _deny(response: AdmissionResponse, violation: Violation, text: str) -> None:
    if response.get("allowed", True):
        response["allowed"] = False
        response["status"] = {
            "code": violation.code,
            "reason": REASONS.get(violation.code, "Forbidden"),
            "message": text,
            "status": "Failure",
        }
        return
    status = response["status"]
    status["message"] = f"{status.get('message', '')}; {text}"


def _add_patch(response: AdmissionResponse, ops: Sequence[JSONPatchOp]) -> None:
    existing: list[JSONPatchOp] = []
    if response.get("patch"):
        existing = json.loads(base64.b64decode(response["patch"]))
    existing.extend(ops)
    response["patch"] = base64.b64encode(json.dumps(existing).encode()).decode()
    response["patchType"] = "JSONPatch"
