"""One group budget for every group maker (guardhook.budget, issue 47): LWS groups and Workload
API gangs go through the same decision and the same ledger record per set, and the ledger keeps
reading what earlier versions wrote under their keys (an upgrade under a drain keeps every
reservation). Reviews are the captured ones (s07 eviction, n01 node taint) aimed at the shapes of
tests/group_shapes."""

from __future__ import annotations

import copy
from typing import Any

import group_shapes as shapes
import pytest

import guardhook.policies.shared.group_budget as policy_budget
from guardhook.admission.engine import Engine
from guardhook.budget import decide
from guardhook.config import build_config
from guardhook.groups import SetRef
from guardhook.ledger import Disruption, MemoryLedger, stored_key
from guardhook.ledger.lease import LeaseLedger, lease_name

from conftest import load_review
from fake_apiserver import running_fake
from helpers import request_of

NOW = 1_000_000.0


def engine(objects: list, ledger: MemoryLedger) -> Engine:
    return Engine(shapes.view(objects), build_config({}), ledger=ledger)


def evict(eng: Engine, name: str, namespace: str) -> dict[str, Any]:
    return dict(eng.judge(shapes.eviction_request(name, namespace), "validate").response)


def uid(objects: list, name: str) -> str:
    return str(shapes.pod(objects, name)["metadata"]["uid"])


def fleet_and_gangs(budget: int | None = None) -> list:
    return copy.deepcopy(shapes.fleet()) + shapes.gang_objects(groups=3, size=2, budget=budget)


def test_sets_are_stored_under_the_keys_and_lease_names_earlier_versions_used() -> None:
    lws, gangs = SetRef("serve", "LeaderWorkerSet", "llm-xl"), SetRef("train", "Workload", "train")
    assert stored_key(lws) == ("serve", "llm-xl")
    assert stored_key(gangs) == ("train", "workload.train")
    assert lease_name(lws) == lease_name(("serve", "llm-xl")) == "guardhook-eviction.serve.llm-xl"
    assert lease_name(gangs) == "guardhook-eviction.train.workload.train"


@pytest.mark.parametrize(
    ("namespace", "old_key", "recorded_pod", "recorded_group", "other_pod"),
    [
        ("serve", ("serve", "llm-xl"), "llm-xl-0-3", "0", "llm-xl-2-1"),
        ("train", ("train", "workload.train"), "train-0-1", "train-0", "train-2-1"),
    ],
)
def test_entries_written_under_the_old_keys_still_count(
    namespace: str, old_key: tuple[str, str], recorded_pod: str, recorded_group: str, other_pod: str
) -> None:
    """An entry the previous version wrote (its stored key, no cause) counts for the new code: the
    next eviction of another group is refused while it holds the budget, and the entry is kept
    when the ledger is written again."""
    objects = fleet_and_gangs()
    ledger = MemoryLedger(clock=lambda: NOW)
    old = Disruption(recorded_group, recorded_pod, uid(objects, recorded_pod), NOW + 100, NOW - 1)
    ledger.update(old_key, lambda _: (None, (old,)))
    eng = engine(objects, ledger)
    denied = evict(eng, other_pod, namespace)
    assert denied["allowed"] is False and denied["status"]["code"] == 429
    assert f"disruption of {recorded_pod} recorded, not visible yet" in denied["status"]["message"]
    assert evict(eng, recorded_pod, namespace)["allowed"] is True  # a retry of the recorded pod
    assert [e.pod for e in ledger.entries(old_key)] == [recorded_pod]


def test_lws_groups_and_gangs_go_through_the_one_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        disruption = args[1]
        seen.append((disruption.snapshot.maker, disruption.set.kind))
        return decide(*args, **kwargs)

    monkeypatch.setattr(policy_budget, "decide", spy)
    eng = engine(fleet_and_gangs(), MemoryLedger())
    assert evict(eng, "llm-xl-0-3", "serve")["allowed"] is True
    assert evict(eng, "train-1-0", "train")["allowed"] is True
    assert seen == [("LeaderWorkerSet", "LeaderWorkerSet"), ("PodGroup", "Workload")]


def test_a_gang_counted_only_through_the_ledger_is_judged_against_the_other_broken_gangs() -> None:
    """Deliberate change (issue 47): as for LWS groups, a gang the view shows whole but the ledger
    counts may have healed since, so removing from it is judged against the other broken gangs
    (the gang budget allowed it as from a broken gang)."""
    objects = fleet_and_gangs()
    ledger = MemoryLedger(clock=lambda: NOW)
    recorded = tuple(
        Disruption(f"train-{g}", f"train-{g}-0", uid(objects, f"train-{g}-0"), NOW + 100, NOW - 1, "eviction")
        for g in (0, 1)
    )
    ledger.update(SetRef("train", "Workload", "train"), lambda _: (None, recorded))
    denied = evict(engine(objects, ledger), "train-0-1", "train")
    assert denied["allowed"] is False and denied["status"]["code"] == 429
    assert (
        "would break PodGroup train/train-0 (disruptionMode all) of Workload train/train"
        in (denied["status"]["message"])
    )


def test_a_dry_run_spends_nothing_for_either_maker() -> None:
    ledger = MemoryLedger()
    eng = engine(fleet_and_gangs(), ledger)
    for name, namespace in (("llm-xl-0-3", "serve"), ("train-0-0", "train")):
        request = shapes.eviction_request(name, namespace)
        request["dryRun"] = True
        assert dict(eng.judge(request, "validate").response)["allowed"] is True
    assert ledger.entries(SetRef("serve", "LeaderWorkerSet", "llm-xl")) == ()
    assert ledger.entries(SetRef("train", "Workload", "train")) == ()


def test_a_noexecute_taint_is_budgeted_in_whole_gangs_too() -> None:
    """Deliberate change (issue 47): group-taint reads the one budget, so a taint that evicts a
    member of a whole gang while another gang of the set is broken is over a budget of 1 (it was
    LWS-only)."""
    gangs = shapes.gang_objects(groups=3, size=2)
    nodes = [o for o in shapes.fleet() if o["kind"] == "Node"]
    gangs.remove(shapes.pod(gangs, "train-0-1"))  # gang train-0 broken: the budget of 1 is spent
    request = request_of(load_review("n01-node-taint-noexecute.validating"))  # gpu-node-06: train-2-0
    view = shapes.view(nodes + gangs)
    warned = dict(Engine(view, build_config({})).judge(request, "validate").response).get("warnings", [])
    found = [w for w in warned if w.startswith("[group-taint]")]
    assert len(found) == 1
    assert "Workload train/train would lose 1 whole gang of 3: PodGroup train-2 (train-2-0)" in found[0]
    assert "already broken: PodGroup train-0 (1 of 2 pods exist)" in found[0]


def test_a_record_built_from_a_stand_in_resolves_through_the_same_budget() -> None:
    """A gang pod the view has not seen (group-eviction's stand-in) is judged by the one budget."""
    objects = fleet_and_gangs()
    objects.remove(shapes.pod(objects, "train-1-1"))
    ledger = MemoryLedger()
    eng = engine(objects, ledger)
    assert evict(eng, "train-1-1", "train")["allowed"] is True  # its gang is short: broken
    assert [e.group for e in ledger.entries(SetRef("train", "Workload", "train"))] == ["train-1"]


def test_a_lease_written_under_the_old_key_is_read_by_set() -> None:
    """The Lease an earlier version wrote (keyed by the (namespace, name) tuple it passed; for a
    gang set (namespace, `workload.<name>`)) is the one the new code reads by SetRef."""
    with running_fake() as fake:
        old = LeaseLedger(fake.api_client(), "gh")
        for key, group in ((("serve", "llm-xl"), "1"), (("train", "workload.train"), "train-1")):
            old.update(key, lambda entries, g=group: (None, (Disruption(g, "p", "u", 4e9),)))
        new = LeaseLedger(fake.api_client(), "gh")
        assert [e.group for e in new.entries(SetRef("serve", "LeaderWorkerSet", "llm-xl"))] == ["1"]
        assert [e.group for e in new.entries(SetRef("train", "Workload", "train"))] == ["train-1"]
        assert fake.get("leases", "gh", "guardhook-eviction.serve.llm-xl") is not None
        assert fake.get("leases", "gh", "guardhook-eviction.train.workload.train") is not None
