"""Objects that route traffic to pods through a label selector, as `leader-service` judges them:
Services and Gateway API Inference Extension InferencePools.

Field names and validation from kubernetes-sigs/gateway-api-inference-extension:

- `inference.networking.k8s.io/v1` InferencePool (api/v1): `spec.selector.matchLabels`, required,
  1 to 64 entries (CRD `minProperties`/`maxProperties`); no `matchExpressions` ("intentionally
  simple to be compatible with Kubernetes Service selectors"). Keys and values follow label syntax.
- `inference.networking.x-k8s.io/v1alpha2` InferencePool (apix/v1alpha2, deprecated): `spec.selector`,
  a required plain map, no size limit.

The endpoint picker chooses among the pods the selector matches, exactly as a Service's endpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jsonpatch

from guardhook.cluster.disaggregated import ds_owner
from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    LWS_CONTROLLER,
    NAME_LABEL,
    PREFIX,
    SERVING_ALL,
    WORKER_INDEX_LABEL,
    LeaderWorkerSet,
    lws_owner,
)
from guardhook.cluster.model import OwnerRef, as_dict, digits, str_map
from guardhook.cluster.selectors import from_map
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.reach import reach
from guardhook.wire import JSONPatchOp, KubeObject

POOL_KIND = "InferencePool"
POOL_GROUP = "inference.networking.k8s.io"
POOL_VERSION = "v1"
POOL_ALPHA_GROUP = "inference.networking.x-k8s.io"
POOL_ALPHA_VERSION = "v1alpha2"
POOL_RESOURCE = "inferencepools"
POOL_MAX_MATCH_LABELS = 64
# Labels LWS sets only on the pods of an LWS with a subGroupPolicy; the reach model leaves them
# out, so a selector naming them is never said to select nothing.
UNMODELLED_LWS_LABELS = frozenset({PREFIX + "subgroup-index", PREFIX + "subgroup-key"})


@dataclass(frozen=True)
class TrafficSelector:
    """The selector of a Service or InferencePool: `kind`, the equality map, and `path`, the
    fields that hold the map (for the patch and messages). `room`: whether one more key fits."""

    kind: str
    selector: dict[str, str]
    path: tuple[str, ...]
    room: bool = True

    @property
    def field(self) -> str:
        """The map's field path in messages: `spec.selector` or `spec.selector.matchLabels`."""
        return ".".join(self.path)

    def add(self, key: str, value: str) -> JSONPatchOp:
        """The JSONPatch op adding `key: value` to the selector map."""
        return {"op": "add", "path": jsonpatch.JsonPointer.from_parts([*self.path, key]).path, "value": value}


OwnerCheck = Callable[[OwnerRef], bool]
"""Whether an LWS ownerReference is genuine (`lws_owner_check`)."""


def lws_owner_check(view: ClusterView, namespace: str, sender: str = "") -> OwnerCheck:
    """Whether an LWS ownerReference of an object in `namespace` is genuine: the view holds that
    LWS with that uid, or `sender` (the request's username) is the LWS controller, which writes
    such references (issue 48: anyone may write a made-up one, and the LWS controller's own
    Services are headless anyway)."""

    def genuine(owner: OwnerRef) -> bool:
        if sender == LWS_CONTROLLER:
            return True
        lws = view.lws(namespace, owner.name)
        return lws is not None and bool(owner.uid) and lws.uid == owner.uid

    return genuine


def traffic_selector(obj: KubeObject, owner_check: OwnerCheck | None = None) -> TrafficSelector | None:
    """The selector through which `obj` routes traffic, or None when it routes none this way:

    - a Service that is not headless (a set `clusterIP: None`; a mutating review of a CREATE
      carries no clusterIP yet), not ExternalName, has a non-empty selector and is owned by neither
      an LWS nor a DisaggregatedSet (their own discovery Services, headless too) — an LWS
      ownerReference counts only when `owner_check` (when given) finds it genuine;
    - an InferencePool (v1 or v1alpha2, by `apiVersion`) with a non-empty selector.
    Never raises on malformed input (a non-map selector counts as empty)."""
    kind = str(obj.get("kind") or "")
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    spec = as_dict(obj.get("spec"))
    if kind == "Service" and group == "":
        if spec.get("type") == "ExternalName" or spec.get("clusterIP") == "None":
            return None
        owner = lws_owner(obj)
        if owner is not None and (owner_check is None or owner_check(owner)):
            return None
        if ds_owner(obj) is not None:
            return None
        return _found(kind, str_map(spec.get("selector")), ("spec", "selector"))
    if kind == POOL_KIND and group == POOL_GROUP:
        labels = str_map(as_dict(spec.get("selector")).get("matchLabels"))
        return _found(kind, labels, ("spec", "selector", "matchLabels"), len(labels) < POOL_MAX_MATCH_LABELS)
    if kind == POOL_KIND and group == POOL_ALPHA_GROUP:
        return _found(kind, str_map(spec.get("selector")), ("spec", "selector"))
    return None


def _found(
    kind: str, selector: dict[str, str], path: tuple[str, ...], room: bool = True
) -> TrafficSelector | None:
    return TrafficSelector(kind, selector, path, room) if selector else None


def selects_no_lws_pod(selector: dict[str, str], lws_list: list[LeaderWorkerSet]) -> bool:
    """Whether `selector` names LWS labels (`leaderworkerset.sigs.k8s.io/...`) that no pod of any
    LWS in `lws_list` (one namespace's) can carry with those values, so it selects no pod at all.

    Judged on the LWS-label requirements alone (LWS sets those labels; other labels may come from
    controllers the model does not know), for one group of each LWS whatever its replicas (a group
    index it does not have yet is one a scale-up creates, so `group-index` is not judged). False,
    as "cannot tell", when the namespace has no LWS, the selector names an LWS not (yet) in it, or
    it names labels the model leaves out (subgroups)."""
    own = {k: v for k, v in selector.items() if k.startswith(PREFIX)}
    if not own or not lws_list or any(k in UNMODELLED_LWS_LABELS for k in own):
        return False
    named = own.get(NAME_LABEL)
    if named is not None and all(lws.name != named for lws in lws_list):
        return False
    requirements = from_map({k: v for k, v in own.items() if k != GROUP_INDEX_LABEL})
    return not any(reach(requirements, _one_group(lws)).any for lws in lws_list)


def _one_group(lws: LeaderWorkerSet) -> LeaderWorkerSet:
    return LeaderWorkerSet({**lws.obj, "spec": {**lws.spec, "replicas": 1}})


def working_selectors(
    selector: dict[str, str], lws_list: list[LeaderWorkerSet], most: int = 2
) -> list[dict[str, str]]:
    """Selectors that would select the serving pods (leaders, or every pod for serving-pods
    "all") of the LWSs `selector` was likely meant for: its own labels minus the LWS ones, plus
    the LWS name when those do not single the LWS out, plus `worker-index: "0"`. At most `most`."""
    rest = {k: v for k, v in selector.items() if not k.startswith(PREFIX)}
    reached = [lws for lws in lws_list if rest and reach(from_map(rest), lws).any]
    found = []
    for lws in sorted(reached or lws_list, key=lambda lws: lws.name)[:most]:
        candidate = _serving(lws, rest if lws in reached else {})
        if not reach(from_map(candidate), lws).any:  # its own labels reach only workers
            candidate = _serving(lws, {})
        found.append(candidate)
    return found


def _serving(lws: LeaderWorkerSet, base: dict[str, str]) -> dict[str, str]:
    selector = dict(base) or {NAME_LABEL: lws.name}
    if lws.serving_pods != SERVING_ALL and lws.size > 1:
        selector[WORKER_INDEX_LABEL] = "0"
    return selector


def render(selector: dict[str, str]) -> str:
    """`{key: value, ...}` in key order, values that YAML would not read as strings quoted."""
    return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in sorted(selector.items())) + "}"


def _value(value: str) -> str:
    plain = value and not digits(value) and value.lower() not in ("true", "false", "null", "yes", "no")
    return value if plain else f'"{value}"'
