"""The registered group makers, in the order `resolve` asks them (the first to claim a pod wins:
an LWS member that also names a PodGroup is the LWS's). A new maker is one module implementing
guardhook.groups.maker.GroupMaker and one line in MAKERS."""

from __future__ import annotations

from collections.abc import Iterator

from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.grove import GROVE_MAKER
from guardhook.groups.jobset import JOBSET_MAKER
from guardhook.groups.keys import GroupKey
from guardhook.groups.lws import LWS_MAKER
from guardhook.groups.maker import (
    GroupMaker,
    NewGangs,
    Recreates,
    ScaledReplicas,
    ScaledTarget,
    ScaleRequest,
    ScaleUps,
    SetSnapshot,
    StandIns,
    Waiting,
    Warms,
)
from guardhook.groups.podgroup import POD_GROUP_MAKER
from guardhook.groups.ref import GroupRef, SetRef
from guardhook.wire import KubeObject

MAKERS: tuple[GroupMaker, ...] = (
    LWS_MAKER,
    POD_GROUP_MAKER,
    GROVE_MAKER,
    JOBSET_MAKER,
)


def resolve(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The group `pod` is in, by the first maker in MAKERS that claims it; None for none."""
    for maker in MAKERS:
        ref = maker.resolve(view, pod)
        if ref is not None:
            return ref
    return None


def stand_in(view: ClusterView, namespace: str, name: str) -> PodRecord | None:
    """A stand-in record for a pod the view has not seen, from the first maker in MAKERS whose rules
    name its group (guardhook.groups.maker.StandIns); None when none does."""
    for maker in MAKERS:
        if isinstance(maker, StandIns):
            found = maker.stand_in(view, namespace, name)
            if found is not None:
                return found
    return None


def maker_of(ref: GroupRef) -> GroupMaker:
    """The registered maker that resolved `ref` (by `ref.maker`, one of its `flavours`).
    Raises LookupError for a GroupRef no registered maker gives."""
    for maker in MAKERS:
        if ref.maker in maker.flavours:
            return maker
    raise LookupError(f"no registered group maker gives {ref.maker!r} groups")


def snapshot(view: ClusterView, ref: GroupRef, going: Going | None = None) -> SetSnapshot | None:
    """One consistent reading of the set of `ref`'s group, by the maker that resolved it (None
    when the view does not hold the set)."""
    return maker_of(ref).snapshot(view, ref.set, going)


def recreated_pods(view: ClusterView, ref: GroupRef) -> tuple[str, ...]:
    """The pods group `ref` will have once recreated, where knowable (GroupMaker.recreated_pods)."""
    return maker_of(ref).recreated_pods(view, ref)


def all_sets(view: ClusterView) -> Iterator[tuple[GroupMaker, SetRef]]:
    """Every set of every registered maker in `view`, maker by maker (audit, metrics)."""
    for maker in MAKERS:
        for found in maker.sets(view):
            yield maker, found


def gang_controllers() -> tuple[str, ...]:
    """The identities of the controllers that delete their gangs' pods as a whole, every registered
    maker's `gang_controllers` in MAKERS order, each once (`worker-delete`'s `gangControllers`
    default)."""
    return tuple(dict.fromkeys(name for maker in MAKERS for name in maker.gang_controllers))


def group_size(view: ClusterView, target: SetRef, key: GroupKey) -> int | None:
    """How many pods group `key` of set `target` has when whole (GroupMaker.group_size), by the
    first maker in MAKERS that can say; None when none can."""
    for maker in MAKERS:
        size = maker.group_size(view, target, key)
        if size is not None:
            return size
    return None


def recreated_group(view: ClusterView, target: SetRef, key: GroupKey) -> list[KubeObject]:
    """The pods group `key` of set `target` comes back as once recreated, as API objects from the
    set's templates (guardhook.groups.maker.Recreates), by the first maker in MAKERS that can say;
    [] when none can."""
    for maker in MAKERS:
        if isinstance(maker, Recreates):
            pods = maker.recreated_objects(view, target, key)
            if pods:
                return pods
    return []


def warm(view: ClusterView) -> None:
    """Build every registered maker's indexes of `view` now (guardhook.groups.maker.Warms)."""
    for maker in MAKERS:
        if isinstance(maker, Warms):
            maker.warm(view)


def scaled_resources() -> tuple[tuple[str, str, str], ...]:
    """Every (API group, plural, subresource) a registered maker reads scale-ups of
    (guardhook.groups.maker.ScaleUps), in registry order."""
    found: list[tuple[str, str, str]] = []
    for maker in MAKERS:
        if isinstance(maker, ScaleUps):
            found.extend(r for r in maker.scale_resources if r not in found)
    return tuple(found)


def new_gangs(view: ClusterView, request: ScaleRequest) -> NewGangs | str | None:
    """The new whole gangs a scale-up asks for, read by the registered maker whose
    `scale_resources` hold the request's resource (guardhook.groups.maker.ScaleUps: a string when
    it cannot be read); None when no maker reads it."""
    resource = (request.group, request.resource, request.subresource)
    for maker in MAKERS:
        if isinstance(maker, ScaleUps) and resource in maker.scale_resources:
            return maker.new_gangs(view, request)
    return None


def waiting_groups(view: ClusterView, target: SetRef) -> int:
    """How many groups of set `target` wait behind a scheduling gate to be placed, as the
    registered makers count them (guardhook.groups.maker.Waiting)."""
    return sum(maker.waiting_groups(view, target) for maker in _waiting_makers(MAKERS))


_WAITING: list[tuple[tuple[GroupMaker, ...], tuple[Waiting, ...]]] = []
"""`_waiting_makers`' last answer, with the tuple it was for (makers are not hashable)."""


def _waiting_makers(makers: tuple[GroupMaker, ...]) -> tuple[Waiting, ...]:
    """The makers of `makers` that count gated groups, judged once per tuple: an isinstance against
    a runtime-checkable Protocol costs ~0.1 ms, and every capacity decision asks."""
    if _WAITING and _WAITING[0][0] is makers:
        return _WAITING[0][1]
    found = tuple(maker for maker in makers if isinstance(maker, Waiting))
    _WAITING[:] = [(makers, found)]
    return found


def scaled_target(
    view: ClusterView, namespace: str, api_version: str, kind: str, name: str
) -> ScaledTarget | None:
    """What the `/scale` of `kind` `namespace/name` counts, as the first registered maker that
    knows it reads it (guardhook.groups.maker.ScaledReplicas); None when none does."""
    for maker in MAKERS:
        if isinstance(maker, ScaledReplicas):
            found = maker.scaled_target(view, namespace, api_version, kind, name)
            if found is not None:
                return found
    return None
