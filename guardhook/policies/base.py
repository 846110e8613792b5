"""What a policy is: an id, the requests it sees, its default actions, and a pure `judge`.

A policy's `judge(ctx)` reads the admission request, the cluster view and its parameters, and
returns a `Judgement`. It never writes anything except through `ctx.ledger` (the eviction budget),
and only when `ctx.may_record` is True. The engine turns judgements into an AdmissionResponse
according to the configured actions (ValidatingAdmissionPolicy's Deny/Warn/Audit, plus Mutate).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from guardhook.cluster.model import metadata
from guardhook.cluster.view.store import ClusterView
from guardhook.wire import AdmissionRequest, JSONPatchOp, KubeObject, UserInfo

Action = Literal["Deny", "Warn", "Audit", "Mutate"]
ACTIONS: tuple[Action, ...] = ("Deny", "Warn", "Audit", "Mutate")
VALIDATING_ACTIONS: frozenset[Action] = frozenset({"Deny", "Warn", "Audit"})

FORBIDDEN = 403
TOO_MANY_REQUESTS = 429
REASONS = {FORBIDDEN: "Forbidden", TOO_MANY_REQUESTS: "TooManyRequests"}


@dataclass(frozen=True)
class Violation:
    """A rule broken. `message` is without the `[policy id]` prefix (the engine adds it).

    `code` is the HTTP status a Deny carries (403, or 429 for evictions so drains retry);
    `patch` is the JSONPatch that fixes the object, for policies that can Mutate; `findings` are
    the separate findings when `message` joins several (a lint), each without the object's kind and
    name, so `check` and `audit` print one per line (empty: the message is one finding).
    """

    message: str
    code: int = FORBIDDEN
    patch: tuple[JSONPatchOp, ...] = ()
    findings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Judgement:
    """A policy's verdict on one request: at most one violation, plus advisory warnings that the
    /validate endpoint emits whatever the actions (e.g. a percentage PDB on one group), and
    `annotations`: (key, value) pairs the engine adds to the response's auditAnnotations whatever
    the verdict (e.g. the capacity model group-capacity used)."""

    violation: Violation | None = None
    advisories: tuple[str, ...] = ()
    audit_annotations: tuple[tuple[str, str], ...] = ()
    """(key, value) pairs the engine puts in the response's auditAnnotations as `<policy id>-<key>`
    (the API server prefixes the webhook's name): why a request was allowed, for the audit log."""


ALLOW = Judgement()
DISRUPTION_TARGET_KEY = "disruption-target"


def allowed_disruption_target(disruption: str, user: UserInfo) -> Judgement:
    """Allow removing a pod that a component already marked for removal (`disruption` is
    model.disruption_condition's "<type>/<reason>"), with an audit annotation saying so. Denying
    it would leave a worker on a broken node or device, block the scheduler's preemption, or leave
    a group that Kueue is stopping half deleted (Kueue stops at the first failed delete)."""
    condition, _, reason = disruption.partition("/")
    who = str(user.get("username") or "unknown user")
    why = f"pod carries {condition}=True" + (f" (reason {reason})" if reason else "")
    return Judgement(audit_annotations=((DISRUPTION_TARGET_KEY, f"allowed: {why}; requested by {who}"),))


@dataclass(frozen=True)
class Target:
    """Which requests a policy sees: API group, resource, subresource ("" for none), operations.
    Dispatch is by exactly these four (the request's `resource`, not `requestResource`)."""

    group: str
    resource: str
    subresource: str
    operations: frozenset[str]

    def matches(self, request: AdmissionRequest) -> bool:
        resource: Mapping[str, Any] = request.get("resource") or {}
        return (
            resource.get("group", "") == self.group
            and resource.get("resource", "") == self.resource
            and (request.get("subResource") or "") == self.subresource
            and request.get("operation", "") in self.operations
        )


def target(group: str, resource: str, subresource: str = "", *operations: str) -> Target:
    """Shorthand for a Target; operations default to CREATE and UPDATE."""
    return Target(group, resource, subresource, frozenset(operations or ("CREATE", "UPDATE")))


@dataclass(slots=True)
class PolicyContext:
    """Everything a policy may read for one decision.

    `params` are the policy's configured parameters (defaults merged); `ledger` is the eviction
    disruption ledger (None where nothing may be recorded); `may_record` is False for dry runs,
    `guardhook review` and `guardhook check`.
    """

    request: AdmissionRequest
    view: ClusterView
    params: Mapping[str, Any]
    ledger: Any = None
    may_record: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return str(self.request.get("namespace") or "")

    @property
    def operation(self) -> str:
        return str(self.request.get("operation") or "")

    @property
    def name(self) -> str:
        """The name of the object the request is about: `request.name`, else `metadata.name` of
        the object (or, for a DELETE, the old object); "" for a CREATE that relies on generateName."""
        given = self.request.get("name") or metadata(self.object).get("name")
        return str(given or metadata(self.old_object).get("name") or "")

    @property
    def object(self) -> KubeObject:
        obj = self.request.get("object")
        return obj if isinstance(obj, dict) else {}

    @property
    def old_object(self) -> KubeObject:
        obj = self.request.get("oldObject")
        return obj if isinstance(obj, dict) else {}

    @property
    def user(self) -> UserInfo:
        user = self.request.get("userInfo")
        return user if isinstance(user, dict) else {}


class Policy(ABC):
    """Base of every policy; each policy module exports one instance as `POLICY`.

    `fail_closed`: when the view is stale (or the policy fails), deny with `stale_code` (True) or
    allow with a warning (False). `params` holds the policy's configurable parameters and their
    defaults (config keys besides `actions`).
    """

    id: ClassVar[str]
    targets: ClassVar[tuple[Target, ...]]
    default_actions: ClassVar[tuple[Action, ...]]
    can_mutate: ClassVar[bool] = False
    fail_closed: ClassVar[bool] = False
    stale_code: ClassVar[int] = FORBIDDEN
    params: ClassVar[Mapping[str, Any]] = {}
    param_minimums: ClassVar[Mapping[str, float]] = {}
    """Lowest allowed value of a numeric parameter, where 0 would switch the rule off unseen."""
    reads_view: ClassVar[bool] = True
    """False for a policy that judges the object alone (a lint): a stale view cannot change it."""
    reads_nodes: ClassVar[bool] = False
    """True for a policy that judges against free node capacity: meaningless without Nodes."""
    judges_lws_controller: ClassVar[bool] = False
    """True for a policy whose default exemptions leave the LWS controller's account judged
    (guardhook.config.PER_POLICY_EXEMPT_USERS); every other policy exempts it by default, unless
    it does not honour user exemptions at all (`honours_user_exemptions`)."""

    def param_problem(self, name: str, value: Any) -> str | None:
        """What is wrong with parameter `name` = `value` beyond its type (None when fine); the
        configuration rejects it with this text."""
        return None

    shared_params: ClassVar[Mapping[str, str]] = {}
    """Parameters whose default is another policy's configured value: name -> that policy's id."""
    honours_user_exemptions: ClassVar[bool] = True
    """False for a policy that must see the exempt controllers' requests too (group-readiness:
    leader pods are created by the StatefulSet controller): neither the global user and group
    exemptions nor the per-policy default users (the LWS controller) skip it; its own configured
    `policies.<id>.exemptions` and the namespace exemptions still apply."""

    @abstractmethod
    def judge(self, ctx: PolicyContext) -> Judgement:
        """Judge one request; see the module docstring of the policy for its rule."""

    def already_running(self, view: ClusterView, obj: KubeObject) -> bool:
        """For `check` and `audit`, which judge existing objects as CREATEs: True when `obj` is
        already running in `view`, so that judging it as new would count it twice (it is then
        judged as an UPDATE that changes nothing). False by default."""
        return False


def stale_judgement(policy: Policy, view: ClusterView) -> Judgement:
    """The documented failure mode when the cluster view cannot be trusted: fail closed policies
    deny (so the caller retries later), fail open ones allow with a warning."""
    age = view.stale_seconds()
    why = "has never synced" if not view.synced else f"has not been refreshed for {age:.0f}s"
    if policy.fail_closed:
        return Judgement(
            violation=Violation(
                f"guardhook's cluster view {why}; cannot judge this request safely, retry shortly",
                code=policy.stale_code,
            )
        )
    return Judgement(advisories=(f"guardhook's cluster view {why}; this request was not checked",))


def error_judgement(policy: Policy, error: Exception) -> Judgement:
    """The failure mode when a policy raised on a request (a bug, or an object the API server
    would not have admitted): the same as for a stale view — fail closed policies deny, fail open
    ones allow with a warning — but saying what happened instead of blaming the view."""
    failure = f"{type(error).__name__} in policy {policy.id}; see guardhook's log"
    what = f"guardhook could not judge this request ({failure})"
    if policy.fail_closed:
        message = f"{what}; denied because this policy fails closed"
        return Judgement(violation=Violation(message, policy.stale_code))
    return Judgement(advisories=(f"{what}; this request was not checked",))
