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
(`SetSnapshot`) for a budget, a plan or a report. Policies, plans, commands and reconcilers read
groups through here: besides `resolve` and `snapshot`, `resolve_alone` (a pod placed by its own
metadata, for readers with no view), `group_size`, `recreated_pods` and `recreated_group` (a
recreated group's pods, by name or as objects), `stand_in` (a pod the view has not seen),
`gang_controllers` (who deletes its gangs' pods as a whole) and `warm` (indexes built at start),
each asking the registered makers. `each_gang_set` counts every gang maker's sets (audit,
/metrics); `new_gangs` reads a gang set's scale-up as whole gangs to place and `waiting_groups`
the groups gated behind a scheduling gate (group-capacity); `scaled_target` says what a maker's
`/scale` counts (pod-counted-scaler), and the names an LWS's RoleBasedGroup and worker
StatefulSets are read by (`rbg_role`, `is_rbg_set`, `worker_statefulset_group`) are given here
too. Group keys and their rules: guardhook.groups.keys.
"""

from guardhook.groups.broken import BrokenGroups, describe_broken, groups_broken
from guardhook.groups.gangs import GangSetGroups, each_gang_set
from guardhook.groups.keys import GroupKey
from guardhook.groups.maker import (
    GangPods,
    GroupMaker,
    NewGangs,
    Recreates,
    ScaledTarget,
    ScaleRequest,
    SetSnapshot,
    StandIns,
    Warms,
)
from guardhook.groups.makers import (
    MAKERS,
    all_sets,
    gang_controllers,
    group_size,
    maker_of,
    new_gangs,
    recreated_group,
    recreated_pods,
    scaled_resources,
    scaled_target,
    snapshot,
    stand_in,
    waiting_groups,
    warm,
)
from guardhook.groups.placement import worker_statefulset_group
from guardhook.groups.rbg import (
    RBG_API_VERSION,
    RBG_SET_KIND,
    SCALING_ADAPTER_KIND,
    RbgRole,
    is_rbg_set,
    rbg_role,
)
from guardhook.groups.ref import GroupRef, Rank, Recreator, SetRef
from guardhook.groups.resolve import resolve, resolve_alone, resolve_object, resolve_object_alone

__all__ = [
    "MAKERS",
    "RBG_API_VERSION",
    "RBG_SET_KIND",
    "SCALING_ADAPTER_KIND",
    "BrokenGroups",
    "GangPods",
    "GangSetGroups",
    "GroupKey",
    "GroupMaker",
    "GroupRef",
    "NewGangs",
    "Rank",
    "RbgRole",
    "Recreates",
    "Recreator",
    "ScaleRequest",
    "ScaledTarget",
    "SetRef",
    "SetSnapshot",
    "StandIns",
    "Warms",
    "all_sets",
    "describe_broken",
    "each_gang_set",
    "gang_controllers",
    "group_size",
    "groups_broken",
    "is_rbg_set",
    "maker_of",
    "new_gangs",
    "rbg_role",
    "recreated_group",
    "recreated_pods",
    "resolve",
    "resolve_alone",
    "resolve_object",
    "resolve_object_alone",
    "scaled_resources",
    "scaled_target",
    "snapshot",
    "stand_in",
    "waiting_groups",
    "warm",
    "worker_statefulset_group",
]
