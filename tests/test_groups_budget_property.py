"""A property of the one group model: for random mixes of group makers (an LWS made Ordinal, Hash
or by Kthena, beside Workload API gangs, a Grove PodCliqueSet and a JobSet) and random sequences
of evictions, no more than B groups of one set are ever broken at once. Each allowed eviction is
applied to the view (the pod turns terminating, as the API server leaves it), so later decisions
see it."""

from __future__ import annotations

import copy
from typing import Any

import group_shapes as shapes
import maker_shapes as makers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardhook.admission.engine import Engine
from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import NODES, PODS
from guardhook.config import build_config
from guardhook.groups import resolve
from guardhook.groups.counts import count_groups
from guardhook.groups.grove import GROVE_MAKER
from guardhook.groups.jobset import JOBSET_MAKER
from guardhook.groups.podgroup import gang_health
from guardhook.groups.ref import SetRef
from guardhook.ledger import MemoryLedger

from conftest import load_review
from helpers import request_of

BASE = shapes.fleet()


def objects_for(maker: str, budget: int) -> list:
    objects = copy.deepcopy(BASE)
    if maker == "hash":
        shapes.to_hash(objects)
    elif maker == "kthena":
        shapes.to_kthena(objects)
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == shapes.LWS)
    lws["metadata"].setdefault("annotations", {})["guardhook.io/max-disrupted-groups"] = str(budget)
    jobset = makers.jobset_pods(replicas=3, parallelism=2)
    for pod in jobset:  # the budget from the JobSet's pod template, as on the Grove pods
        pod["metadata"]["annotations"]["guardhook.io/max-disrupted-groups"] = str(budget)
    return (
        objects
        + shapes.gang_objects(groups=4, size=2, budget=budget)
        + makers.grove_pods(replicas=3, budget=budget)
        + jobset
    )


NAMESPACES = ("serve", "train", "infer", "batch")
"""The LWS's, the Workload gangs', the Grove PodCliqueSet's and the JobSet's."""


def pod_read_broken(view) -> list[int]:
    """Broken gangs of the Grove PodCliqueSet infer/disagg and the JobSet batch/train, as their
    makers' snapshots read them."""
    found = []
    for maker, target in (
        (GROVE_MAKER, SetRef("infer", "PodCliqueSet", "disagg")),
        (JOBSET_MAKER, SetRef("batch", "JobSet", "train")),
    ):
        snap = maker.snapshot(view, target)
        found.append(0 if snap is None else len(snap.broken))
    return found


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    maker=st.sampled_from(["ordinal", "hash", "kthena"]),
    budget=st.integers(min_value=1, max_value=2),
    picks=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=14),
)
def test_no_more_than_b_groups_of_one_set_are_broken_at_once(
    maker: str, budget: int, picks: list[int]
) -> None:
    objects = objects_for(maker, budget)
    view = shapes.view(objects)
    engine = Engine(view, build_config({}), ledger=MemoryLedger())
    pods = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "Pod"}
    candidates = sorted(k for k in pods if k[0] in NAMESPACES)
    for pick in picks:
        namespace, name = candidates[pick % len(candidates)]
        response = engine.judge(shapes.eviction_request(name, namespace), "validate").response
        if response["allowed"]:
            evicted = copy.deepcopy(pods[(namespace, name)])
            evicted["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
            pods[(namespace, name)] = evicted
            view.upsert(PODS, evicted)
        lws = view.lws("serve", shapes.LWS)
        assert lws is not None
        assert count_groups(view, lws).broken <= budget
        gangs = [g for g in view.pod_groups("train") if g.all_mode]
        assert sum(not gang_health(view, g).whole for g in gangs) <= budget
        assert all(broken <= budget for broken in pod_read_broken(view)), name


class WritesCounted(MemoryLedger):
    """A memory ledger that counts the updates that wrote entries."""

    writes = 0

    def update(self, lws: Any, plan: Any) -> Any:
        def counted(entries: Any) -> Any:
            result, written = plan(entries)
            if written is not None:
                self.writes += 1
            return result, written

        return super().update(lws, counted)


MAINTENANCE = ["MaintenancePlanned", "DrainInProgress", "Drained", "MaintenanceInProgress"]


def _with_condition(node: dict, kind: str, status: str) -> dict:
    """`node` with lifecycle condition `kind` set to `status` (True since now), as a maintenance
    controller or `kubectl drain --report-node-conditions` patches node status."""
    changed = copy.deepcopy(node)
    conditions = [c for c in changed["status"]["conditions"] if c.get("type") != kind]
    conditions.append({"type": kind, "status": status, "lastTransitionTime": "2026-12-07T00:00:00Z"})
    changed["status"]["conditions"] = conditions
    return changed


TAINT = {"key": "example.com/maintenance", "effect": "NoExecute"}
"""The NoExecute taint the `taint` steps add (`kubectl taint nodes N example.com/maintenance:NoExecute`)."""

TAINTED_CONFIG = {"policies": {"group-taint": {"actions": ["Deny"]}}}
"""group-taint denying over budget (its default action warns), so a taint is a budgeted disruption."""


def _taint_request(node: dict) -> dict:
    """A Node UPDATE adding TAINT to `node`, built from the captured n01 `kubectl taint` review."""
    request = request_of(load_review("n01-node-taint-noexecute.validating"))
    tainted = copy.deepcopy(node)
    tainted["spec"]["taints"] = [t for t in tainted["spec"].get("taints") or [] if t != TAINT] + [TAINT]
    request["name"] = node["metadata"]["name"]
    request["oldObject"], request["object"] = node, tainted
    return request


def _dry(request: dict, body: bool) -> dict:
    """`request` as a dry run: `request.dryRun`, or (`body`) the Eviction's own
    `deleteOptions.dryRun: [All]`, as `kubectl drain --dry-run=server` sends it."""
    if body:
        request["object"]["deleteOptions"] = {"dryRun": ["All"]}
    else:
        request["dryRun"] = True
    return request


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    maker=st.sampled_from(["ordinal", "hash", "kthena"]),
    budget=st.integers(min_value=1, max_value=2),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["evict", "evict", "delete", "dry", "body-dry", "condition", "taint"]),
            st.integers(min_value=0, max_value=10_000),
            st.sampled_from(MAINTENANCE),
            st.booleans(),
        ),
        min_size=1,
        max_size=16,
    ),
)
def test_conditions_deletes_and_dry_runs_never_take_more_than_b_groups(
    maker: str, budget: int, steps: list[tuple[str, int, str, bool]]
) -> None:
    """Issue 47: evictions, worker deletes (budgeted on a draining node, denied elsewhere), node
    maintenance conditions set and cleared, NoExecute node taints (group-taint denying), and dry
    runs (request-level and in the Eviction's body), interleaved over LWS groups of every maker and
    Workload API gangs: no set ever has more than B groups broken by what guardhook admitted, and a
    dry run never writes the ledger."""
    objects = objects_for(maker, budget)
    view = shapes.view(objects)
    ledger = WritesCounted()
    engine = Engine(view, build_config(TAINTED_CONFIG), ledger=ledger)
    pods = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "Pod"}
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    candidates = sorted(k for k in pods if k[0] in NAMESPACES)
    for what, pick, kind, true in steps:
        if what == "condition":
            name = sorted(nodes)[pick % len(nodes)]
            nodes[name] = _with_condition(nodes[name], kind, "True" if true else "False")
            view.upsert(NODES, nodes[name])
            continue
        if what == "taint":
            name = sorted(nodes)[pick % len(nodes)]
            request = _taint_request(nodes[name])
            if engine.judge(request, "validate").response["allowed"]:
                nodes[name] = request["object"]
                view.upsert(NODES, nodes[name])
            _assert_within_budget(view, budget, (what, name))
            continue
        namespace, name = candidates[pick % len(candidates)]
        pod = pods[(namespace, name)]
        if what == "delete":
            ref = resolve(view, PodRecord.from_object(pod))
            if ref is not None and ref.is_leader:
                continue  # deleting a leader is the group's restart lever, allowed by design
            request = shapes.delete_request(pod)
        else:
            request = shapes.eviction_request(name, namespace)
        if what in ("dry", "body-dry"):
            before = ledger.writes
            engine.judge(_dry(request, body=what == "body-dry"), "validate")
            assert ledger.writes == before, f"a dry run ({what}) of {name} wrote the ledger"
            continue
        if engine.judge(request, "validate").response["allowed"]:
            gone = copy.deepcopy(pod)
            gone["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:01Z"
            pods[(namespace, name)] = gone
            view.upsert(PODS, gone)
        _assert_within_budget(view, budget, (what, name))


def _assert_within_budget(view: Any, budget: int, step: tuple[str, str]) -> None:
    """No set of the view has more than `budget` groups broken (the LWS, the Workload gangs, the
    Grove and JobSet sets), a going pod (terminating, or under a NoExecute taint) breaking its group."""
    lws = view.lws("serve", shapes.LWS)
    assert lws is not None
    assert count_groups(view, lws).broken <= budget, step
    gangs = [g for g in view.pod_groups("train") if g.all_mode]
    doomed = Going(view).doomed
    assert sum(not gang_health(view, g, doomed=doomed).whole for g in gangs) <= budget, step
    assert all(broken <= budget for broken in pod_read_broken(view)), step
