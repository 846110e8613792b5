"""The group model: what a group is, however it is made.

A pod resolves to a `GroupRef` (guardhook.groups.ref): the set it belongs to (namespace, kind,
name), the group's key as a string, the pod's rank (leader or worker n), the group's size, the
pods a user deletes to restart the group, and who recreates it and how. One module per way a group
is made:

- `lws`: a LeaderWorkerSet's groups, Ordinal (leader StatefulSet `L`, worker StatefulSets `L-<g>`)
  and Hash (leader Deployment `L`, worker StatefulSets named after their generated leader pods;
  lws KEP-898);
- `kthena`: a LeaderWorkerSet served by Kthena (volcano-sh/kthena): a ModelServing creates the
  pods directly and recovers a broken group by its `recoveryPolicy`;
- `rbg`: LeaderWorkerSets a RoleBasedGroup (sgl-project/rbg) runs, one per role;
- `podgroup`: gangs of the Workload API (scheduling.k8s.io/v1beta1 PodGroup, `disruptionMode`).

`resolve` reads the controller ownerReference chain first and labels second (a label edit cannot
turn a worker into a leader). Policies, plans, commands and reconcilers read groups through here.
"""

from guardhook.groups.ref import GroupRef, Rank, Recreator, SetRef
from guardhook.groups.resolve import resolve, resolve_object

__all__ = ["GroupRef", "Rank", "Recreator", "SetRef", "resolve", "resolve_object"]
