"""Which pods of a LeaderWorkerSet a label selector can match, decided from the LWS spec alone.

`leader-service` and `group-pdb` judge a Service or PDB before any pod exists (and in `guardhook
check` on manifests), so they cannot look at live pods. Instead they ask: over every pod this LWS
can create, which can the selector match? A pod of group g (0..R-1) at position w (0..S-1, the
leader is 0) carries (LWS v0.10 pod webhook, StatefulSet controller, Kubernetes >= 1.28):

- the labels of its template (`leaderTemplate`, falling back to `workerTemplate`, for w = 0;
  `workerTemplate` otherwise), overridden by the labels below;
- `leaderworkerset.sigs.k8s.io/name: L`, `group-index: "g"`, `worker-index: "w"`;
- `statefulset.kubernetes.io/pod-name`: `L-g` (leader) or `L-g-w` (worker), and
  `apps.kubernetes.io/pod-index`: `"g"` (leader StatefulSet ordinal) or `"w"` (worker ordinal);
- opaque labels present with values guardhook cannot know: `group-key` (a hash, distinct per
  group), `template-revision-hash` and `controller-revision-hash`.

For a Hash LWS (`spec.groupIdentity: Hash`, lws KEP-898) `group-index` holds the group's random
40-character key, as `group-key` does: it is opaque (any key may match, an ordinal none), and
naming keys caps the groups reached. Hash leaders still carry `worker-index: "0"` (the leader
Deployment's template sets it); their StatefulSet labels are not modelled.

The answer is exact for that model: a selector is said to reach a pod when some values of the
opaque labels make it match. Labels that other controllers or admission plugins add are not
modelled (treated as absent).

The search never enumerates R x S pods. Group indexes a selector does not name are
interchangeable (every requirement sees them alike), so it evaluates each named index plus one
unnamed representative standing for all the others; likewise for worker positions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME_LABEL,
    PREFIX,
    WORKER_INDEX_LABEL,
    LeaderWorkerSet,
)
from guardhook.cluster.model import digits, metadata, str_map
from guardhook.cluster.selectors import Requirement, Selector, matches
from guardhook.groups.keys import is_hash_key

TEMPLATE_REVISION_HASH_LABEL = PREFIX + "template-revision-hash"
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

OPAQUE_LABELS = frozenset({GROUP_KEY_LABEL, TEMPLATE_REVISION_HASH_LABEL, CONTROLLER_REVISION_HASH_LABEL})
"""Labels every LWS pod carries with a value that cannot be known from the spec."""

SYSTEM_LABELS = frozenset(
    {NAME_LABEL, GROUP_INDEX_LABEL, WORKER_INDEX_LABEL, POD_NAME_LABEL, POD_INDEX_LABEL} | OPAQUE_LABELS
)
"""Labels set on LWS pods by the LWS and StatefulSet controllers; they override template labels."""


@dataclass(frozen=True)
class Reach:
    """What a selector can match among the pods of one LWS.

    `leaders` / `workers`: whether it can match some leader / some worker pod. `groups`: the most
    groups (0..replicas) whose pods it can match at the same time. `group_indexes`: the group
    indexes it can match when it names them all, else None (it reaches groups it does not name).
    """

    leaders: bool
    workers: bool
    groups: int
    group_indexes: frozenset[int] | None

    @property
    def any(self) -> bool:
        return self.leaders or self.workers


NOTHING = Reach(False, False, 0, frozenset())


def reach(selector: Selector | None, lws: LeaderWorkerSet) -> Reach:
    """Judge `selector` (None: a null selector, matching nothing) against every pod `lws` can
    create, per the module docstring's model. Never raises."""
    if selector is None:
        return NOTHING
    opaque, plain = _split_opaque(selector, lws.hashed)
    if not all(_opaque_satisfiable(reqs) for reqs in opaque.values()):
        return NOTHING
    if lws.hashed and not _hash_index_satisfiable(opaque.get(GROUP_INDEX_LABEL, [])):
        return NOTHING
    named_groups = _named_indexes(plain, lws.name, group=True)
    named_workers = _named_indexes(plain, lws.name, group=False)
    groups = _Indexes(range(lws.replicas), named_groups)
    workers = _Indexes(range(1, lws.size), named_workers)
    leader_base = _template_labels(lws, leader=True)
    worker_base = _template_labels(lws, leader=False)

    leader_groups: set[int | None] = set()
    worker_groups: set[int | None] = set()
    for g in groups.candidates():
        if matches(plain, _pod_labels(leader_base, lws.name, g, 0, groups)):
            leader_groups.add(g)
        if any(
            matches(plain, _pod_labels(worker_base, lws.name, g, w, groups, workers))
            for w in workers.candidates()
        ):
            worker_groups.add(g)
    reached = leader_groups | worker_groups
    count = sum(groups.weight(g) for g in reached)
    for key in (GROUP_KEY_LABEL, GROUP_INDEX_LABEL):  # a Hash group-index is its group-key
        cap = _group_key_cap(opaque.get(key, []))
        if cap is not None:
            count = min(count, cap)
    named = None if None in reached else frozenset(g for g in reached if g is not None)
    return Reach(bool(leader_groups) and count > 0, bool(worker_groups) and count > 0, count, named)


def reach_any_replicas(selector: Selector | None, lws: LeaderWorkerSet) -> Reach:
    """Like `reach`, but over every pod `lws` could create at ANY `spec.replicas` (0 included):
    what a Service or InferencePool will route to once the LWS scales, whatever groups exist now.
    The group domain is widened to hold every group index the selector names plus one it does
    not; `groups` then counts groups of that widened domain (meaningless for budgets: use `reach`).
    Never raises."""
    if selector is None:
        return NOTHING
    _, plain = _split_opaque(selector)
    named = _named_indexes(plain, lws.name, group=True)
    wanted = max([lws.replicas, 1, *(g + 2 for g in named)])
    if wanted == lws.replicas:
        return reach(selector, lws)
    return reach(selector, LeaderWorkerSet({**lws.obj, "spec": {**lws.spec, "replicas": wanted}}))


def both(first: Selector | None, second: Selector | None) -> Selector | None:
    """The selector matching exactly the pods both match (None when either is null)."""
    if first is None or second is None:
        return None
    return (*first, *second)


class _Indexes:
    """Index values `domain` as candidates: each value in `named`, plus None standing for every
    value not named (absent when all are named)."""

    def __init__(self, domain: range, named: set[int]) -> None:
        self.named = sorted(i for i in named if i in domain)
        self.others = len(domain) - len(self.named)
        # a concrete unnamed value, so labels built for the representative are real
        self.sample = next((i for i in domain if i not in named), None)

    def candidates(self) -> list[int | None]:
        return [*self.named, *([None] if self.others > 0 else [])]

    def weight(self, value: int | None) -> int:
        return self.others if value is None else 1

    def concrete(self, value: int | None) -> int:
        return self.sample if value is None and self.sample is not None else int(value or 0)


def _split_opaque(selector: Selector, hashed: bool = False) -> tuple[dict[str, list[Requirement]], Selector]:
    """The requirements on opaque labels by key, and the rest; for a Hash LWS `group-index` is
    opaque too (it holds the group's random key)."""
    keys = OPAQUE_LABELS | {GROUP_INDEX_LABEL} if hashed else OPAQUE_LABELS
    opaque: dict[str, list[Requirement]] = {}
    plain = []
    for req in selector:
        if req.key in keys:
            opaque.setdefault(req.key, []).append(req)
        else:
            plain.append(req)
    return opaque, tuple(plain)


def _allowed_values(reqs: Iterable[Requirement]) -> set[str] | None:
    """Values an opaque label may take to satisfy `reqs`: a finite set, or None for "any value
    but finitely many" (no In requirement)."""
    allowed: set[str] | None = None
    excluded: set[str] = set()
    for req in reqs:
        if req.operator == "In":
            allowed = set(req.values) if allowed is None else allowed & req.values
        elif req.operator == "NotIn":
            excluded |= req.values
    return None if allowed is None else allowed - excluded


def _opaque_satisfiable(reqs: list[Requirement]) -> bool:
    if any(req.operator == "DoesNotExist" for req in reqs):
        return False
    allowed = _allowed_values(reqs)
    return allowed is None or bool(allowed)


def _hash_index_satisfiable(reqs: list[Requirement]) -> bool:
    """Whether a Hash group's `group-index` (a 40-character key) can meet `reqs`: an In list
    must name some value of that shape (an ordinal such as "1" is no Hash group's index)."""
    allowed = _allowed_values(reqs)
    return allowed is None or any(is_hash_key(v) for v in allowed)


def _group_key_cap(reqs: list[Requirement]) -> int | None:
    """At most this many groups satisfy the group-key requirements (keys are distinct per group)."""
    allowed = _allowed_values(reqs)
    return None if allowed is None else len(allowed)


def _named_indexes(plain: Iterable[Requirement], lws_name: str, group: bool) -> set[int]:
    """Group (or worker) indexes the selector names through any label that encodes them."""
    named: set[int] = set()
    own_key = GROUP_INDEX_LABEL if group else WORKER_INDEX_LABEL
    for req in plain:
        for value in req.values:
            if req.key in (own_key, POD_INDEX_LABEL) and digits(value):
                named.add(int(value))
            elif req.key == POD_NAME_LABEL:
                parts = _pod_name_indexes(value, lws_name)
                if parts is not None:
                    named.add(parts[0] if group else parts[1])
    return named


def _pod_name_indexes(value: str, lws_name: str) -> tuple[int, int] | None:
    """(group, worker) of a pod name `L-g` or `L-g-w`; None when it is neither."""
    if not value.startswith(lws_name + "-"):
        return None
    parts = value[len(lws_name) + 1 :].split("-")
    if not all(digits(p) for p in parts):
        return None
    if len(parts) == 1:
        return int(parts[0]), 0
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 else None


def _template_labels(lws: LeaderWorkerSet, leader: bool) -> dict[str, str]:
    template = lws.leader_template if leader else lws.worker_template
    labels = str_map(metadata(template).get("labels"))
    return {k: v for k, v in labels.items() if k not in SYSTEM_LABELS}


def _pod_labels(
    base: dict[str, str],
    lws_name: str,
    g: int | None,
    w: int | None,
    groups: _Indexes,
    workers: _Indexes | None = None,
) -> dict[str, str]:
    group = groups.concrete(g)
    position = 0 if workers is None else workers.concrete(w)
    labels = dict(base)
    labels[NAME_LABEL] = lws_name
    labels[GROUP_INDEX_LABEL] = str(group)
    labels[WORKER_INDEX_LABEL] = str(position)
    if workers is None:
        labels[POD_NAME_LABEL] = f"{lws_name}-{group}"
        labels[POD_INDEX_LABEL] = str(group)
    else:
        labels[POD_NAME_LABEL] = f"{lws_name}-{group}-{position}"
        labels[POD_INDEX_LABEL] = str(position)
    return labels
