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

Every maker implements one protocol (guardhook.groups.maker.GroupMaker, the shape of Kueue's
`jobframework.GenericJob`) and is registered in guardhook.groups.makers: `resolve` walks them in
order, reading the controller ownerReference chain first and labels second (a label edit cannot
turn a worker into a leader); `snapshot` takes one consistent reading of a set's groups
(`SetSnapshot`) for a budget, a plan or a report; `each_gang_set` counts every gang maker's sets
(audit, /metrics). Policies, plans, commands and reconcilers read
groups through here.
"""

from guardhook.groups.broken import BrokenGroups, describe_broken, groups_broken
from guardhook.groups.gangs import GangSetGroups, each_gang_set
from guardhook.groups.maker import GroupMaker, SetSnapshot, StandIns
from guardhook.groups.makers import MAKERS, all_sets, maker_of, recreated_pods, snapshot, stand_in
from guardhook.groups.ref import GroupRef, Rank, Recreator, SetRef
from guardhook.groups.resolve import resolve, resolve_object

__all__ = [
    "MAKERS",
    "BrokenGroups",
    "GangSetGroups",
    "GroupMaker",
    "GroupRef",
    "Rank",
    "Recreator",
    "SetRef",
    "SetSnapshot",
    "StandIns",
    "all_sets",
    "describe_broken",
    "each_gang_set",
    "groups_broken",
    "maker_of",
    "recreated_pods",
    "resolve",
    "resolve_object",
    "snapshot",
    "stand_in",
]
