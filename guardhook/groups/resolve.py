"""Which group a pod is in, whoever made it: the one entry point of guardhook.groups.

The controller ownerReference chain is read first and labels second (guardhook.groups.placement:
the controller places a worker whatever its labels say). Each registered maker
(guardhook.groups.makers) is asked in turn; a pod in none of the known shapes resolves to None and
is judged as any other pod.
"""

from __future__ import annotations

import guardhook.groups.makers as makers
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.ref import GroupRef
from guardhook.wire import KubeObject

_NO_VIEW = ClusterView(source="no view")
"""The empty view `resolve_alone` resolves against (never filled: nothing outside this module
sees it)."""


def resolve(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The group `pod` (a view record, or one built from a review's object) belongs to, read from
    its ownerReferences and labels and, for size, restart pod and recreator, from `view`; None for
    a pod of no known group maker."""
    return makers.resolve(view, pod)


def resolve_object(view: ClusterView, obj: KubeObject) -> GroupRef | None:
    """`resolve` for a pod given as an API object (a review's object or oldObject)."""
    return resolve(view, PodRecord.from_object(obj))


def resolve_alone(pod: PodRecord) -> GroupRef | None:
    """The group `pod`'s own metadata places it in (ownerReferences and labels), no cluster view
    read: `resolve` against an empty view, so a maker that needs the view to place a pod (a
    Workload API gang: its PodGroup) places none, and size, restart pod and recreator are only
    what the pod itself says. For readers with no view (manifests, a view's change listener)."""
    return makers.resolve(_NO_VIEW, pod)


def resolve_object_alone(obj: KubeObject) -> GroupRef | None:
    """`resolve_alone` for a pod given as an API object (a manifest, a cluster dump's pod)."""
    return resolve_alone(PodRecord.from_object(obj))
