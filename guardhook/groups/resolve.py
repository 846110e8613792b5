"""Which group a pod is in, whoever made it: the one entry point of guardhook.groups.

The controller ownerReference chain is read first and labels second (guardhook.cluster.lws
group_member: the controller places a worker whatever its labels say). A pod in none of the known
shapes resolves to None and is judged as any other pod.
"""

from __future__ import annotations

from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.lws import lws_group
from guardhook.groups.podgangs import pod_gang_ref
from guardhook.groups.podgroup import podgroup_ref
from guardhook.groups.ref import GroupRef
from guardhook.wire import KubeObject


def resolve(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The group `pod` (a view record, or one built from a review's object) belongs to, read from
    its ownerReferences and labels and, for size, restart pod and recreator, from `view`; None for
    a pod of no known group maker."""
    return lws_group(view, pod) or podgroup_ref(view, pod) or pod_gang_ref(view, pod)


def resolve_object(view: ClusterView, obj: KubeObject) -> GroupRef | None:
    """`resolve` for a pod given as an API object (a review's object or oldObject)."""
    return resolve(view, PodRecord.from_object(obj))
