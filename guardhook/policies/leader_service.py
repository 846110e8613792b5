"""Policy `leader-service`: only leaders take traffic.

Workers of an LWS group run shards of the model and do not serve its protocol, so a Service whose
selector can match a worker sends that share of requests into connections that hang. On Service
CREATE and UPDATE, the selector is judged against the pods each LWS in the namespace can create
(`guardhook.cluster.reach`: template labels plus the labels LWS sets), so a Service created before its
pods is caught too. When it can match a worker and does not pin
`leaderworkerset.sigs.k8s.io/worker-index`, the fix is a JSONPatch adding `worker-index: "0"`.

Left alone (design.md §1, §2): headless Services (`clusterIP: None`, used for discovery; a
mutating review of a CREATE carries no clusterIP yet, so only a set value counts), ExternalName
and selector-less Services, Services owned by an LWS (its own discovery Service). A selector that
pins a non-zero worker-index is never rewritten: it gets an advisory warning.

Idempotent: the patched selector cannot match a worker, so judging it again yields no patch
(the mutating webhook uses `reinvocationPolicy: IfNeeded`). Actions: `Mutate` (default, on
/mutate) or `Deny`/`Warn`/`Audit` (on /validate) where mutation is not wanted.

Fail mode: open. With a stale view the Service is allowed unchanged, with a warning.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from guardhook.cluster.lws import WORKER_INDEX_LABEL, LeaderWorkerSet, lws_owner
from guardhook.cluster.model import as_dict
from guardhook.cluster.reach import reach
from guardhook.cluster.selectors import from_map
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.wire import JSONPatchOp, KubeObject

LEADER_PATCH_PATH: str = jsonpatch.JsonPointer.from_parts(["spec", "selector", WORKER_INDEX_LABEL]).path


def is_traffic_service(service: KubeObject) -> bool:
    """Whether a Service routes traffic through its selector: not headless (a set
    `clusterIP: None`), not ExternalName, with a non-empty selector, not owned by an LWS."""
    spec = as_dict(service.get("spec"))
    if spec.get("type") == "ExternalName" or spec.get("clusterIP") == "None":
        return False
    if not as_dict(spec.get("selector")):
        return False
    return lws_owner(service) is None


def workers_reached(selector: dict[str, Any], lws_list: list[LeaderWorkerSet]) -> list[LeaderWorkerSet]:
    """The LWSs of which `selector` (a Service's equality map) can match a worker pod."""
    requirements = from_map(selector)
    return [lws for lws in lws_list if reach(requirements, lws).workers]


class LeaderService(Policy):
    id = "leader-service"
    targets = (target("", "services", "", "CREATE", "UPDATE"),)
    default_actions = ("Mutate",)
    can_mutate = True

    def judge(self, ctx: PolicyContext) -> Judgement:
        """A violation with the worker-index patch when the Service can send traffic to workers;
        an advisory when its selector pins a non-zero worker-index; else allow."""
        service = ctx.object
        if not is_traffic_service(service):
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        selector = as_dict(as_dict(service.get("spec")).get("selector"))
        reached = workers_reached(selector, ctx.view.lws_in_namespace(ctx.namespace))
        if not reached:
            return ALLOW
        name = f"{ctx.namespace}/{ctx.name}"
        lws_names = ", ".join(sorted(lws.name for lws in reached))
        if WORKER_INDEX_LABEL in selector:
            return Judgement(
                advisories=(
                    f"Service {name} selects {WORKER_INDEX_LABEL}={selector[WORKER_INDEX_LABEL]}: workers of "
                    f'LeaderWorkerSet {lws_names} do not serve requests, only leaders (worker-index "0") do',
                )
            )
        patch: JSONPatchOp = {"op": "add", "path": LEADER_PATCH_PATH, "value": "0"}
        return Judgement(
            violation=Violation(
                f"Service {name} selector {_render(selector)} can match worker pods of LeaderWorkerSet "
                f"{lws_names}, which do not serve requests (traffic sent to them hangs); select leaders "
                f'only by adding {WORKER_INDEX_LABEL}: "0" to spec.selector',
                patch=(patch,),
            )
        )


def _render(selector: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(selector.items())) + "}"


POLICY = LeaderService()
