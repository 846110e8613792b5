"""The request-selecting `matchConditions` guardhook ships on its webhook entries, for the coverage
report's comparison with the live configurations (guardhook.cluster.coverage).

The manifests folder is not in the package or the image, so the conditions that decide which
requests an entry sends are written here, once per entry (by name), as manifests/base and its
components and the chart's _helpers.tpl give them; tests/test_coverage_conditions.py fails while
they differ from the rendered manifests (tests/test_chart.py holds the chart to the manifests).

Only the conditions that select requests are here. The exempt-identity conditions
(IDENTITY_CONDITIONS) reflect a documented configuration choice (docs/policies.md, Exempt
identities: another LWS or Kueue install is named by a kustomize patch of `not-lws-controller` /
`not-kueue-controller`), so their text is not compared; their names are known, so they are never
reported as added by the operator.
"""

from __future__ import annotations

import functools
from typing import Any

IDENTITY_CONDITIONS = frozenset(
    {
        "not-lws-controller",
        "not-lws-controller-unless-spec-changes",
        "not-kueue-controller",
        "not-kube-system-controller",
        "not-a-node",
    }
)
"""The exempt-identity conditions' names (guardhook.config.DEFAULT_EXEMPT_USERS as CEL)."""

_LWS_POD_DELETE_OR_RELABEL = (
    "request.operation == 'DELETE' ? "
    "(has(oldObject.metadata.labels) && "
    "oldObject.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) || "
    "(has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, "
    "has(r.controller) && r.controller && r.kind in ['StatefulSet', 'ReplicaSet', 'Job', 'PodClique'])) || "
    "(has(oldObject.spec.schedulingGroup) && has(oldObject.spec.schedulingGroup.podGroupName)) : "
    "has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k, "
    "k.startsWith('leaderworkerset.sigs.k8s.io/') && !(has(object.metadata.labels) && "
    "k in object.metadata.labels && object.metadata.labels[k] == oldObject.metadata.labels[k]))"
)
_LWS_STATEFULSET = (
    "(has(oldObject.metadata.labels) && "
    "oldObject.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) || "
    "(has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, "
    "has(r.controller) && r.controller && r.kind in ['LeaderWorkerSet', 'Pod']))"
)
_LWS_POD = (
    "(has(object.metadata.labels) && "
    "object.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) || "
    "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
    "has(r.controller) && r.controller && r.kind in ['StatefulSet', 'ReplicaSet']))"
)

SHIPPED_CONDITIONS: dict[str, dict[str, str]] = {
    "worker-delete.guardhook.io": {"lws-pod-delete-or-relabel": _LWS_POD_DELETE_OR_RELABEL},
    "group-eviction.guardhook.io": {},
    "group-pdb.guardhook.io": {},
    "pod-counted-scaler.guardhook.io": {},
    "pod-counted-scaler-statefulsets.guardhook.io": {"lws-statefulset": _LWS_STATEFULSET},
    "pod-counted-scaler-scale.guardhook.io": {},
    "leaderworkersets.guardhook.io": {},
    "leaderworkerset-scale.guardhook.io": {},
    "grove-gangs.guardhook.io": {},
    "group-taint-nodes.guardhook.io": {
        "has-no-execute-taint": "has(object.spec) && has(object.spec.taints) && "
        "object.spec.taints.exists(t, has(t.effect) && t.effect == 'NoExecute')"
    },
    "group-taint-devicetaintrules.guardhook.io": {
        "has-no-execute-taint": "has(object.spec) && has(object.spec.taint) && "
        "has(object.spec.taint.effect) && object.spec.taint.effect == 'NoExecute'"
    },
    "group-resize.guardhook.io": {"lws-pod": _LWS_POD},
    "leader-service.guardhook.io": {},
    "group-readiness.guardhook.io": {},
}
"""Per guardhook entry name, the request-selecting matchConditions it ships (name -> CEL); an entry
with none ships only exempt-identity conditions. An entry not named here (another guardhook
version's) is not compared."""


def same_expression(first: str, second: str) -> bool:
    """Whether two CEL expressions are the same expression: equal parse trees (cel-python's parser,
    as guardhook.floor.cost uses it), so how the manifests fold their lines (YAML `>-`) or how an
    operator reformats them does not count, while any change of a token, string literals' insides
    included, does. An expression that does not parse is compared as text."""
    first_tree, second_tree = _tree(first), _tree(second)
    if first_tree is None or second_tree is None:
        return first == second
    return bool(first_tree == second_tree)


@functools.lru_cache(maxsize=256)
def _tree(expression: str) -> Any:
    """`expression`'s parse tree (None when it does not parse), kept per text: `serve` compares
    the same few expressions at every /metrics scrape (a parse costs ~1 ms)."""
    from celpy.celparser import CELParseError

    try:
        return _parser().parse(expression)
    except CELParseError:
        return None


@functools.cache
def _parser() -> Any:
    """cel-python's CEL parser, built once (its grammar takes ~0.2 s)."""
    from celpy.celparser import CELParser

    return CELParser()
