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


def resolve(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The group `pod` (a view record, or one built from a review's object) belongs to, read from
    its ownerReferences and labels and, for size, restart pod and recreator, from `view`; None for
    a pod of no known group maker."""
    return makers.resolve(view, pod)


def resolve_object(view: ClusterView, obj: KubeObject) -> GroupRef | None:
    """`resolve` for a pod given as an API object (a review's object or oldObject)."""
    return resolve(view, PodRecord.from_object(obj))
