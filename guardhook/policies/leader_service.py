"""Policy `leader-service`: only the pods that serve take traffic.

Workers of an LWS group run shards of the model and do not serve its protocol, so a Service or
InferencePool whose selector can match a worker sends that share of requests into connections
that hang. On CREATE and UPDATE of a Service or an InferencePool (`inference.networking.k8s.io/v1`,
selector `spec.selector.matchLabels`; `inference.networking.x-k8s.io/v1alpha2`, selector
`spec.selector`: guardhook.policies.shared.traffic), the selector is judged against the pods each
LWS in the namespace can create (`guardhook.groups.reach`: template labels plus the labels LWS
sets), so an object created before its pods is caught too. When it can match a worker and does not
pin `leaderworkerset.sigs.k8s.io/worker-index`, the fix is a JSONPatch adding `worker-index: "0"`.

Data-parallel LWSs (annotation `guardhook.io/serving-pods: "all"`: every pod serves its ranks) are
never narrowed. When a selector reaches every pod of an LWS without a `leaderTemplate` (the shape
of such a layout), the patch comes with a warning naming the annotation; the default never flips.

Advisory warnings, never rewrites: a selector that pins a non-zero worker-index; one that spans a
data-parallel LWS and workers of another (narrowing would drop the first one's pods); a v1 pool
with 64 matchLabels already (the CRD's limit); a selector naming LWS labels that no pod of any LWS
in the namespace carries (e.g. `leaderworkerset.sigs.k8s.io/role`, which LWS sets nowhere): it
selects no pod, and the warning gives a selector that would work.

Left alone (design.md §1, §2): headless Services (`clusterIP: None`, used for discovery; a
mutating review of a CREATE carries no clusterIP yet, so only a set value counts), ExternalName
and selector-less Services, Services owned by an LWS or a DisaggregatedSet (their discovery
Services). An LWS ownerReference counts only when the view holds that LWS with that uid or the LWS
controller sends the request (issue 48: a made-up reference does not switch the mutation off).

Idempotent: the patched selector cannot match a worker, so judging it again yields no patch
(the mutating webhook uses `reinvocationPolicy: IfNeeded`). Actions: `Mutate` (default, on
/mutate) or `Deny`/`Warn`/`Audit` (on /validate) where mutation is not wanted.

Opt-out: an object annotated `guardhook.io/leader-service: "ignore"` is never narrowed, neither
here nor by the leader-service-sync reconciler; when its selector can match workers it is allowed
unchanged with a warning saying so.

No silent pass (issue 38): when the view may not know every LWS of the namespace — it is stale or
has not synced, the API server did not serve LeaderWorkerSets when last asked, the selector names
an LWS (`leaderworkerset.sigs.k8s.io/name`) the view does not hold, or it names LWS pod labels in a
namespace where the view holds no LWS — the object is allowed unchanged with a warning naming it
and the leader-service-sync reconciler, which narrows it (or reports it) within its period once
the LWS is seen. Chosen over a live read of the namespace's LWSs on the request path: no API call
inside the webhook's timeout, and the reconciler is needed anyway for objects created before their
LWS (docs/policies.md: "Services admission could not see").

Reachability is judged from the LWS spec whatever `spec.replicas` (0 included:
guardhook.groups.reach.reach_any_replicas), so a Service created while an LWS has no groups is
narrowed before its first scale-up.

Fail mode: open. With a stale view the object is allowed unchanged, with a warning.
"""

from __future__ import annotations

from typing import Any

from guardhook.cluster.lws import NAME_LABEL, PREFIX, SERVING_ALL, WORKER_INDEX_LABEL, LeaderWorkerSet
from guardhook.cluster.model import metadata, str_map
from guardhook.cluster.selectors import from_map
from guardhook.cluster.view.store import LEADERWORKERSETS, ClusterView
from guardhook.groups.reach import SYSTEM_LABELS, reach_any_replicas
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.policies.shared.traffic import (
    POOL_ALPHA_GROUP,
    POOL_GROUP,
    POOL_MAX_MATCH_LABELS,
    POOL_RESOURCE,
    UNMODELLED_LWS_LABELS,
    TrafficSelector,
    lws_owner_check,
    render,
    selects_no_lws_pod,
    traffic_selector,
    working_selectors,
)
from guardhook.wire import KubeObject

LWS_POD_LABELS = SYSTEM_LABELS | UNMODELLED_LWS_LABELS
"""Every label LWS (or the StatefulSet controller) puts on LWS pods."""
OPT_OUT_ANNOTATION = "guardhook.io/leader-service"
"""Annotation on a Service or InferencePool: "ignore" keeps guardhook off its selector."""
OPT_OUT_VALUE = "ignore"
SYNC_NAME = "leader-service-sync"
"""The reconciler that narrows what admission could not see (guardhook.leadersync)."""
SYNC_NAMESPACES_PARAM = "syncNamespaces"
"""The namespaces the leader-service-sync reconciler may act in ([] = every namespace the webhooks
guard); set with namespaced RBAC (manifests/components/leader-service-sync/namespaced)."""
SYNC_PERIOD_SECONDS = 10.0
"""The reconciler's default period: the documented bound (docs/policies.md)."""
SERVING_PODS_HINT = (
    "if every pod serves (data-parallel, e.g. vLLM --data-parallel-hybrid-lb), annotate the LeaderWorkerSet "
    'guardhook.io/serving-pods: "all" and guardhook leaves its pods in traffic'
)


def is_traffic_service(service: KubeObject) -> bool:
    """Whether a Service (or InferencePool) routes traffic through its selector
    (guardhook.policies.shared.traffic.traffic_selector)."""
    return traffic_selector(service) is not None


def workers_reached(selector: dict[str, Any], lws_list: list[LeaderWorkerSet]) -> list[LeaderWorkerSet]:
    """The LWSs of which `selector` (an equality map) can match a worker pod at any
    `spec.replicas` (guardhook.groups.reach.reach_any_replicas)."""
    requirements = from_map(selector)
    return [lws for lws in lws_list if reach_any_replicas(requirements, lws).workers]


def opted_out(obj: KubeObject) -> bool:
    """Whether `obj` carries `guardhook.io/leader-service: "ignore"` (see the module docstring)."""
    annotations = str_map(metadata(obj).get("annotations"))
    return annotations.get(OPT_OUT_ANNOTATION, "").strip().lower() == OPT_OUT_VALUE


def unknown_lws(view: ClusterView, namespace: str, selector: dict[str, str]) -> str:
    """Why the view may not know an LWS that `selector` (in `namespace`) is aimed at, as a clause
    ("" when it knows every one it could be): the LWS kind was not served when last asked, the
    selector names an LWS the view does not hold, or it names LWS pod labels in a namespace where
    the view holds no LWS. (A stale view is judged before, by the caller.)"""
    if not view.readable(LEADERWORKERSETS):
        return "the API server did not serve LeaderWorkerSets when guardhook last asked"
    named = selector.get(NAME_LABEL)
    if named is not None and view.lws(namespace, named) is None:
        return f"guardhook's view holds no LeaderWorkerSet {namespace}/{named} (yet)"
    if any(k in LWS_POD_LABELS for k in selector) and not view.lws_in_namespace(namespace):
        return (
            "it names LeaderWorkerSet pod labels and guardhook's view holds no LeaderWorkerSet "
            f"in {namespace} (yet)"
        )
    return ""


def pending_advisory(subject: str, why: str) -> str:
    """The warning for an object admission could not judge: names it and the reconciler."""
    return (
        f"{subject} was not checked against LeaderWorkerSets: {why}; if its selector can match "
        f"worker pods, the {SYNC_NAME} reconciler narrows it to leaders (or reports it) within its "
        f"period ({SYNC_PERIOD_SECONDS:.0f} s by default) of guardhook seeing the LeaderWorkerSet"
    )


class LeaderService(Policy):
    id = "leader-service"
    targets = (
        target("", "services", "", "CREATE", "UPDATE"),
        target(POOL_GROUP, POOL_RESOURCE, "", "CREATE", "UPDATE"),
        target(POOL_ALPHA_GROUP, POOL_RESOURCE, "", "CREATE", "UPDATE"),
    )
    default_actions = ("Mutate",)
    can_mutate = True
    params = {SYNC_NAMESPACES_PARAM: []}

    def param_problem(self, name: str, value: Any) -> str | None:
        """`syncNamespaces` must list namespace names (non-empty strings)."""
        if name == SYNC_NAMESPACES_PARAM and not all(isinstance(n, str) and n for n in value):
            return "must be a list of namespace names (non-empty strings)"
        return None

    def judge(self, ctx: PolicyContext) -> Judgement:
        """A violation with the worker-index patch when the object can send traffic to workers of
        an LWS whose leaders alone serve; advisories for what cannot be patched (module
        docstring); else allow."""
        username = str(ctx.user.get("username") or "")
        found = traffic_selector(ctx.object, lws_owner_check(ctx.view, ctx.namespace, username))
        if found is None:
            return ALLOW
        subject = f"{found.kind} {ctx.namespace}/{ctx.name}"
        if ctx.view.is_stale():
            stale = stale_judgement(self, ctx.view)
            why = "guardhook's cluster view is stale or has not synced"
            return Judgement(advisories=(*stale.advisories, pending_advisory(subject, why)))
        why = unknown_lws(ctx.view, ctx.namespace, found.selector)
        if why:
            return Judgement(advisories=(pending_advisory(subject, why),))
        lws_list = ctx.view.lws_in_namespace(ctx.namespace)
        if selects_no_lws_pod(found.selector, lws_list):
            return Judgement(advisories=(_selects_nothing(subject, found, lws_list),))
        reached = workers_reached(found.selector, lws_list)
        narrowed = [lws for lws in reached if lws.serving_pods != SERVING_ALL]
        if not narrowed:
            return ALLOW
        if opted_out(ctx.object) and WORKER_INDEX_LABEL not in found.selector:
            return Judgement(
                advisories=(
                    f"{subject} can match worker pods of LeaderWorkerSet {_names(narrowed)}, which "
                    "do not serve requests; left as it is: it is annotated "
                    f'{OPT_OUT_ANNOTATION}: "{OPT_OUT_VALUE}"',
                )
            )
        return _judge_reached(subject, found, narrowed, [lws for lws in reached if lws not in narrowed])


def _judge_reached(
    subject: str, found: TrafficSelector, narrowed: list[LeaderWorkerSet], all_serving: list[LeaderWorkerSet]
) -> Judgement:
    selector = found.selector
    names = _names(narrowed)
    if WORKER_INDEX_LABEL in selector:
        return Judgement(
            advisories=(
                f"{subject} selects {WORKER_INDEX_LABEL}={selector[WORKER_INDEX_LABEL]}: workers of "
                f'LeaderWorkerSet {names} do not serve requests, only leaders (worker-index "0") do',
            )
        )
    if all_serving:
        return Judgement(
            advisories=(
                f"{subject} selects every pod of LeaderWorkerSet {_names(all_serving)} (serving-pods: all) "
                f"and workers of {names}, which do not serve requests; it cannot be narrowed to leaders "
                f"without dropping the first one's pods: use one {found.kind} per LeaderWorkerSet",
            )
        )
    if not found.room:
        return Judgement(
            advisories=(
                f"{subject} can match worker pods of LeaderWorkerSet {names}, which do not serve requests, "
                f"and {found.field} already holds {POOL_MAX_MATCH_LABELS} labels (the CRD's limit): replace "
                f'one with {WORKER_INDEX_LABEL}: "0"',
            )
        )
    hints = tuple(
        f"{subject} selects every pod of LeaderWorkerSet {lws.name}, which has no leaderTemplate: "
        + SERVING_PODS_HINT
        for lws in narrowed
        if _every_pod_alike(selector, lws)
    )
    return Judgement(
        violation=Violation(
            f"{subject} selector {render(selector)} can match worker pods of LeaderWorkerSet "
            f"{names}, which do not serve requests (traffic sent to them hangs); select leaders "
            f'only by adding {WORKER_INDEX_LABEL}: "0" to {found.field}',
            patch=(found.add(WORKER_INDEX_LABEL, "0"),),
        ),
        advisories=hints,
    )


def _every_pod_alike(selector: dict[str, str], lws: LeaderWorkerSet) -> bool:
    """Whether `selector` reaches leaders and workers of an LWS whose leaders run the worker
    template (no leaderTemplate): the shape of a data-parallel layout."""
    if lws.template.get("leaderTemplate"):
        return False
    found = reach_any_replicas(from_map(selector), lws)
    return found.leaders and found.workers


def _selects_nothing(subject: str, found: TrafficSelector, lws_list: list[LeaderWorkerSet]) -> str:
    own = {k: v for k, v in found.selector.items() if k.startswith(PREFIX)}
    working = " or ".join(render(s) for s in working_selectors(found.selector, lws_list))
    unknown = sorted(k.removeprefix(PREFIX) for k in own if k not in LWS_POD_LABELS)
    why = f" (LWS sets no {', '.join(unknown)} label on pods)" if unknown else ""
    return (
        f"{subject} selects no pod: no pod of a LeaderWorkerSet in its namespace carries "
        f"{render(own)}{why}; select e.g. {working} in {found.field}"
    )


def _names(lws_list: list[LeaderWorkerSet]) -> str:
    return ", ".join(sorted(lws.name for lws in lws_list))


POLICY = LeaderService()
