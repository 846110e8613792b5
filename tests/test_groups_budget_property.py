"""A property of the one group model: for random mixes of group makers (an LWS made Ordinal, Hash
or by Kthena, beside Workload API gangs) and random sequences of evictions, no more than B groups
of one set are ever broken at once. Each allowed eviction is applied to the view (the pod turns
terminating, as the API server leaves it), so later decisions see it."""

from __future__ import annotations

import copy

import group_shapes as shapes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardhook.admission.engine import Engine
from guardhook.cluster.view.store import PODS
from guardhook.config import build_config
from guardhook.groups.counts import count_groups
from guardhook.groups.podgroup import gang_health
from guardhook.ledger import MemoryLedger

BASE = shapes.fleet()


def objects_for(maker: str, budget: int) -> list:
    objects = copy.deepcopy(BASE)
    if maker == "hash":
        shapes.to_hash(objects)
    elif maker == "kthena":
        shapes.to_kthena(objects)
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == shapes.LWS)
    lws["metadata"].setdefault("annotations", {})["guardhook.io/max-disrupted-groups"] = str(budget)
    return objects + shapes.gang_objects(groups=4, size=2, budget=budget)


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
    candidates = sorted(k for k in pods if k[0] in ("serve", "train"))
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
