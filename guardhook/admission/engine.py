"""The one engine that judges admission requests, for the webhook, `review`, `check` and `audit`.

It dispatches a request to the policies whose targets match, applies each policy's configured
actions (Deny / Warn / Audit on /validate, Mutate on /mutate) and combines every result into one
AdmissionResponse (design.md §3).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from guardhook.cluster.view.store import ClusterView
from guardhook.config import Config, default_config
from guardhook.policies import REGISTRY
from guardhook.policies.base import (
    REASONS,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    error_judgement,
)
from guardhook.wire import AdmissionRequest, AdmissionResponse, JSONPatchOp

log = logging.getLogger(__name__)

Endpoint = Literal["validate", "mutate"]
Route = tuple[Policy, tuple[str, ...]]
"""A policy that sees a request, with its configured actions at the endpoint."""


@dataclass(frozen=True)
class Decision:
    """What one policy did to one request, for metrics and reports.

    `outcome` is "allowed" (no violation), "denied", "warned", "audited", "mutated" or "error";
    `action` is the enforcement action taken (Deny, Warn, Audit, Mutate), "" when none was;
    `findings` the violation's separate findings (Violation.findings), for one-per-line reports.
    """

    policy: str
    outcome: str
    message: str = ""
    action: str = ""
    findings: tuple[str, ...] = ()


@dataclass
class Verdict:
    """The engine's answer: the AdmissionResponse plus one Decision per policy that ran."""

    response: AdmissionResponse
    decisions: list[Decision] = field(default_factory=list)


class Engine:
    """Judge AdmissionRequests against a cluster view with a configuration.

    `ledger` is the eviction disruption ledger the group-eviction policy records into; with
    `record=False` (offline `review`/`check`) nothing is ever recorded.
    """

    def __init__(
        self,
        view: ClusterView,
        config: Config | None = None,
        policies: Sequence[Policy] = REGISTRY,
        ledger: Any = None,
        record: bool = True,
    ) -> None:
        self.view = view
        self.config = config or default_config(policies)
        self.policies = list(policies)
        self.ledger = ledger
        self.record = record
        self._routes: dict[tuple[str, ...], list[Route]] = {}

    def judge(self, request: AdmissionRequest, endpoint: Endpoint = "validate") -> Verdict:
        """Judge one request at `endpoint`. Never raises for any request content: a policy that
        fails follows its failure mode and the failure is logged. An exempt namespace skips every
        policy; an exempt user or group skips every policy that honours user exemptions (all but
        group-readiness, which must see the StatefulSet controller's pod creations)."""
        verdict = Verdict(response={"uid": str(request.get("uid", "")), "allowed": True})
        namespace = str(request.get("namespace") or "")
        user = request.get("userInfo") or {}
        exemptions = self.config.exemptions
        if exemptions.exempts({}, namespace):
            return verdict
        exempt_user = exemptions.exempts(user if isinstance(user, dict) else {}, "")
        for policy, actions in self._dispatch(request, endpoint):
            if exempt_user and policy.honours_user_exemptions:
                continue
            judgement, errored = self._run(policy, request)
            self._apply(verdict, policy, actions, judgement, endpoint, errored)
        return verdict

    def _dispatch(
        self, request: AdmissionRequest, endpoint: Endpoint
    ) -> list[tuple[Policy, tuple[str, ...]]]:
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
        found = self._routes.get(key)
        if found is None:
            found = []
            for policy in self.policies:
                actions = self._actions_at(policy, endpoint)
                if actions and any(t.matches(request) for t in policy.targets):
                    found.append((policy, actions))
            self._routes[key] = found
        return found

    def _actions_at(self, policy: Policy, endpoint: Endpoint) -> tuple[str, ...]:
        configured = self.config.settings(policy.id).actions
        if endpoint == "mutate":
            return ("Mutate",) if "Mutate" in configured else ()
        return tuple(a for a in configured if a != "Mutate")

    def _run(self, policy: Policy, request: AdmissionRequest) -> tuple[Judgement, bool]:
        ctx = PolicyContext(
            request=request,
            view=self.view,
            params=self.config.settings(policy.id).params,
            ledger=self.ledger,
            may_record=self.record and request.get("dryRun") is not True,
        )
        try:
            return policy.judge(ctx), False
        except Exception as error:  # a policy bug must not turn into a 500 or a crash
            log.exception("policy %s failed on request %s", policy.id, request.get("uid"))
            return error_judgement(policy, error), True

    def _apply(
        self,
        verdict: Verdict,
        policy: Policy,
        actions: tuple[str, ...],
        judgement: Judgement,
        endpoint: Endpoint,
        errored: bool,
    ) -> None:
        response = verdict.response
        # Advisories go out on /validate, or on /mutate for a policy that runs there only.
        if endpoint == "validate" or not self._actions_at(policy, "validate"):
            for advisory in judgement.advisories:
                _add_warning(response, f"[{policy.id}] {advisory}")
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
                verdict.decisions.append(Decision(policy.id, "mutated", message, "Mutate", findings))


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
