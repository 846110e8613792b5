"""The LeaderWorkerSet API's facts: labels, annotations, the spec and the group key formats.

Facts from the LWS source (sigs.k8s.io/lws v0.10, api/leaderworkerset/v1): every pod carries
`leaderworkerset.sigs.k8s.io/name`, `group-index`, `worker-index` (the leader is "0") and
`group-key`; pods carry the group size in the `size` annotation and workers name their leader in
`leader-name`. Leader pods are `L-<g>` (StatefulSet `L`); workers `L-<g>-<w>` (StatefulSet `L-<g>`).

Hash group identity (`spec.groupIdentity: Hash`, KEP-898, lws PRs #987 and #1050, on LWS main):
leaders come from a Deployment named `L` through its ReplicaSets (generated pod names
`L-<pod-template-hash>-<5 characters>`), the group-index and group-key labels both hold the
group's key (a SHA-1 in hex: 40 characters), the pod webhook gives each leader the host name
`L-<first 8 characters of the key>`, and each group's worker StatefulSet is named after its leader
pod, "as today" (KEP-898; pod_controller.go looks it up by the leader pod's name): workers are
`<leader pod>-<w>`.

These are the LWS API's facts (labels, annotations, the spec, the Hash key's length). What a group
key means (its type, ordinals, order, which keys count) is the group model's
(guardhook.groups.keys); which group a pod is in, and at what rank, too (guardhook.groups: the
controller ownerReference first, labels second); whether a group is whole,
guardhook.groups.health.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from guardhook.cluster.annotations import count
from guardhook.cluster.model import OwnerRef, as_dict, digits, metadata, str_map
from guardhook.wire import KubeObject

LWS_API_GROUP = "leaderworkerset.x-k8s.io"
LWS_API_VERSION = f"{LWS_API_GROUP}/v1"
LWS_KIND = "LeaderWorkerSet"
# The LWS controller's service account as its install (manifests and Helm chart defaults) names it:
# exempt by default, exactly (issue 20: a pattern would let any namespace's look-alike account
# bypass the guards). Another install is named in the configuration (`exemptions.lwsControllers`).
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"
LWS_CONTROLLER_PATTERN = LWS_CONTROLLER
"""The former name of LWS_CONTROLLER (it was a pattern); kept for imports."""

PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = PREFIX + "name"
GROUP_INDEX_LABEL = PREFIX + "group-index"
WORKER_INDEX_LABEL = PREFIX + "worker-index"
GROUP_KEY_LABEL = PREFIX + "group-key"
SIZE_ANNOTATION = PREFIX + "size"
LEADER_NAME_ANNOTATION = PREFIX + "leader-name"
EXCLUSIVE_TOPOLOGY_ANNOTATION = PREFIX + "exclusive-topology"
# guardhook's own LWS annotation: which pods of a group serve traffic. "leaders" (the default) for
# tensor/pipeline-parallel groups whose leader alone serves; "all" for data-parallel groups (e.g.
# vLLM --data-parallel-hybrid-lb) where every pod serves its ranks.
SERVING_PODS_ANNOTATION = "guardhook.io/serving-pods"
SERVING_LEADERS = "leaders"
SERVING_ALL = "all"
SERVING_PODS_VALUES = (SERVING_LEADERS, SERVING_ALL)
# LWS restartPolicy values (api/leaderworkerset/v1): under the two recreating ones a deleted pod or
# a restarted container makes the LWS controller delete the leader and recreate the whole group
# (pod_controller.go handleRestartPolicy); under None (formerly "Default") it does nothing.
RECREATE_GROUP_ON_POD_RESTART = "RecreateGroupOnPodRestart"
RECREATE_GROUP_AFTER_START = "RecreateGroupAfterStart"
RECREATING_POLICIES = (RECREATE_GROUP_ON_POD_RESTART, RECREATE_GROUP_AFTER_START)
# spec.groupIdentity values (KEP-898): Ordinal (the default) or Hash; and what Hash mode adds: the
# readiness gate the LWS pod controller sets once the worker StatefulSet is Ready (only on groups of
# size > 1), the scheduling gate its pod webhook puts on every Hash leader, lifted once the group it
# replaces is gone (spec.groupReplacementPolicy PostTermination, the default; Immediate lifts it at
# once), and the length of a Hash group key.
GROUP_IDENTITY_ORDINAL = "Ordinal"
GROUP_IDENTITY_HASH = "Hash"
GROUP_READY_GATE = PREFIX + "group-ready"
GROUP_REPLACEMENT_GATE = PREFIX + "group-replacement"
POST_TERMINATION = "PostTermination"
IMMEDIATE = "Immediate"
"""groupReplacementPolicy of a Hash LWS that schedules a replacement group at once (lws PR #1050)."""
HASH_KEY_LENGTH = 40
HASH_HOST_PREFIX = 8
# spec.startupPolicy values (api/leaderworkerset/v1).
LEADER_CREATED = "LeaderCreated"
LEADER_READY = "LeaderReady"


def _int_or(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and digits(value):
        return int(value)
    return default


def lenient_readings(obj: KubeObject) -> list[str]:
    """What LeaderWorkerSet reads leniently in `obj` (a manifest the API server would refuse: its
    CRD's schema types `spec` and `leaderWorkerTemplate` objects, `replicas` and `size` int32s),
    one phrase each, naming the field and what is read instead: `spec.replicas "four" is not an
    integer: read as 1`. Empty for a well-formed object (a missing field takes its default)."""
    found = []
    spec = obj.get("spec")
    template: Any = None
    if spec is not None and not isinstance(spec, dict):
        found.append(f"spec {_shown(spec)} is not an object: read as empty")
    elif isinstance(spec, dict):
        template = spec.get("leaderWorkerTemplate")
        if template is not None and not isinstance(template, dict):
            found.append(f"spec.leaderWorkerTemplate {_shown(template)} is not an object: read as empty")
        fields = [("spec.replicas", spec.get("replicas"))]
        if isinstance(template, dict):
            fields.append(("spec.leaderWorkerTemplate.size", template.get("size")))
        for name, value in fields:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                found.append(f"{name} {_shown(value)} is not an integer: read as {_int_or(value, 1)}")
    return found


def _shown(value: Any) -> str:
    """`value` as a manifest would show it, cut short."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def hash_host(lws_name: str, key: str) -> str:
    """A Hash group's leader host name (its DNS name under the LWS's headless Service, set by the
    LWS pod webhook): `<lws>-<key[:8]>`. It names no object: the worker StatefulSet is named after
    the leader pod."""
    return f"{lws_name}-{key[:HASH_HOST_PREFIX]}"


class LeaderWorkerSet:
    """Read-only accessors over a LeaderWorkerSet object (leaderworkerset.x-k8s.io/v1).

    Defaults follow the LWS webhook: replicas 1, size 1, restartPolicy RecreateGroupOnPodRestart,
    rollout maxUnavailable 1 / maxSurge 0; leaders use the worker template when no leader template
    is given.
    """

    __slots__ = (
        "obj",
        "meta",
        "annotations",
        "spec",
        "template",
        "worker_template",
        "leader_template",
        "derived",
    )

    def __init__(self, obj: KubeObject) -> None:
        self.obj = obj
        # Read once: a decision reads these maps a few dozen times. The view replaces its wrapper
        # on every update, so they follow the object (nothing rewrites an object's maps in place).
        self.meta: dict[str, Any] = metadata(obj)
        self.annotations: dict[str, str] = str_map(self.meta.get("annotations"))
        self.spec: dict[str, Any] = as_dict(obj.get("spec"))
        self.template: dict[str, Any] = as_dict(self.spec.get("leaderWorkerTemplate"))
        self.worker_template: dict[str, Any] = as_dict(self.template.get("workerTemplate"))
        # The leader pod template falls back to the worker template (LWS API).
        self.leader_template: dict[str, Any] = (
            as_dict(self.template.get("leaderTemplate")) or self.worker_template
        )
        self.derived: dict[str, Any] = {}
        """What policies read out of this object, kept as long as the object (a view's LWS is
        replaced on every update): values that depend on the object alone, never on the view."""

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @property
    def replicas(self) -> int:
        return _int_or(self.spec.get("replicas"), 1)

    @property
    def size(self) -> int:
        return _int_or(self.template.get("size"), 1)

    @property
    def group_identity(self) -> str:
        """`spec.groupIdentity`: "Ordinal" (the default) or "Hash" (KEP-898: leaders from a
        Deployment, groups keyed by random 40-character keys)."""
        return str(self.spec.get("groupIdentity") or GROUP_IDENTITY_ORDINAL)

    @property
    def hashed(self) -> bool:
        """Whether `spec.groupIdentity` is Hash."""
        return self.group_identity == GROUP_IDENTITY_HASH

    @property
    def group_replacement_policy(self) -> str:
        """`spec.groupReplacementPolicy` of a Hash LWS: "PostTermination" (the default: a
        replacement leader stays scheduling-gated until the group it replaces is gone) or
        "Immediate"."""
        return str(self.spec.get("groupReplacementPolicy") or POST_TERMINATION)

    @property
    def startup_policy(self) -> str:
        """`spec.startupPolicy`: "LeaderCreated" (the default) or "LeaderReady" (the worker
        StatefulSet of a group is created only once its leader pod is Ready)."""
        return str(self.spec.get("startupPolicy") or LEADER_CREATED)

    @property
    def restart_policy(self) -> str:
        return str(self.template.get("restartPolicy") or RECREATE_GROUP_ON_POD_RESTART)

    @property
    def rollout(self) -> dict[str, Any]:
        strategy = as_dict(self.spec.get("rolloutStrategy"))
        return as_dict(strategy.get("rollingUpdateConfiguration"))

    @property
    def exclusive_topology(self) -> str | None:
        return self.annotations.get(EXCLUSIVE_TOPOLOGY_ANNOTATION) or None

    @property
    def serving_pods(self) -> str:
        """SERVING_ALL when the `guardhook.io/serving-pods` annotation is exactly "all", else
        SERVING_LEADERS (the default, also for an unreadable value: see `serving_pods_unreadable`)."""
        all_serve = self.annotations.get(SERVING_PODS_ANNOTATION) == SERVING_ALL
        return SERVING_ALL if all_serve else SERVING_LEADERS

    @property
    def serving_pods_unreadable(self) -> str | None:
        """The raw `guardhook.io/serving-pods` value when it is set but neither "leaders" nor "all"
        (group-spec warns about it), else None."""
        raw = self.annotations.get(SERVING_PODS_ANNOTATION)
        return raw if raw is not None and raw not in SERVING_PODS_VALUES else None


def lws_owner(obj: KubeObject) -> OwnerRef | None:
    """The LeaderWorkerSet among `obj`'s ownerReferences (kind and API group both match), or None."""
    for owner in OwnerRef.parse_all(metadata(obj)):
        if owner.kind == LWS_KIND and owner.api_version.startswith(LWS_API_GROUP + "/"):
            return owner
    return None


def int_annotation(annotations: Mapping[str, str], key: str, default: int) -> int:
    """A non-negative integer annotation, or `default` when absent or malformed
    (guardhook.cluster.annotations.count)."""
    return count(annotations, key, default)
