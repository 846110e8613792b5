"""`lws_reach` against concrete pods built from LWS templates, for random LWSs and selectors.

The model answers "can match for some values of the opaque labels", so the concrete side tries
every assignment of group keys (distinct per group) and revision hashes from small pools that
include values no selector names, and the model must equal the best case over assignments.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.selectors import Requirement, from_label_selector, from_map, matches
from guardhook.groups.reach import reach
from guardhook.policies.leader_service import workers_reached

NAME = "llm"
P = "leaderworkerset.sigs.k8s.io/"
GROUP_KEYS = ("k0", "k1", "fresh-a", "fresh-b", "fresh-c")  # selectors only ever name k0, k1
HASHES = ("h1", "fresh-h")

KEY_VALUES: dict[str, list[str]] = {
    "app": ["llm", "web"],
    "role": ["leader", "worker"],
    "tier": ["gpu"],
    P + "name": [NAME, "other"],
    P + "group-index": ["0", "1", "2", "7", "x"],
    P + "worker-index": ["0", "1", "2", "3", "9"],
    P + "group-key": ["k0", "k1"],
    P + "template-revision-hash": ["h1"],
    "controller-revision-hash": ["h1"],
    "statefulset.kubernetes.io/pod-name": ["llm-0", "llm-1", "llm-0-1", "llm-2-3", "llm-1-1", "web-0"],
    "apps.kubernetes.io/pod-index": ["0", "1", "2"],
}

template_labels = st.dictionaries(
    st.sampled_from(["app", "role", "tier", P + "worker-index", P + "group-key"]),
    st.sampled_from(["llm", "web", "leader", "worker", "gpu", "5"]),
    max_size=3,
)


@st.composite
def lws_objects(draw: Any) -> LeaderWorkerSet:
    template: dict[str, Any] = {
        "size": draw(st.integers(1, 4)),
        "workerTemplate": {"metadata": {"labels": draw(template_labels)}},
    }
    if draw(st.booleans()):
        template["leaderTemplate"] = {"metadata": {"labels": draw(template_labels)}}
    return LeaderWorkerSet(
        {
            "metadata": {"name": NAME, "namespace": "ns"},
            "spec": {"replicas": draw(st.integers(0, 3)), "leaderWorkerTemplate": template},
        }
    )


@st.composite
def requirements(draw: Any) -> Requirement:
    key = draw(st.sampled_from(sorted(KEY_VALUES)))
    operator = draw(st.sampled_from(["In", "In", "NotIn", "Exists", "DoesNotExist"]))
    values: frozenset[str] = frozenset()
    if operator in ("In", "NotIn"):
        values = frozenset(draw(st.lists(st.sampled_from(KEY_VALUES[key]), min_size=1, max_size=3)))
    return Requirement(key, operator, values)


selectors = st.lists(requirements(), max_size=4).map(tuple)


def concrete_pods(
    lws: LeaderWorkerSet, keys: tuple[str, ...], hashes: tuple[str, str]
) -> list[tuple[int, int, dict]]:
    """Every pod of `lws` as (group, position, labels), built independently of lws_reach.

    `hashes` are the (template, controller) revision hashes: the LWS and the StatefulSet controller
    compute them independently, so they need not be equal."""
    spec = lws.obj["spec"]["leaderWorkerTemplate"]
    worker_labels = spec["workerTemplate"]["metadata"]["labels"]
    leader_labels = spec.get("leaderTemplate", spec["workerTemplate"])["metadata"]["labels"]
    pods = []
    for g in range(lws.replicas):
        for w in range(lws.size):
            labels = dict(leader_labels if w == 0 else worker_labels)
            labels.update(
                {
                    P + "name": NAME,
                    P + "group-index": str(g),
                    P + "worker-index": str(w),
                    P + "group-key": keys[g],
                    P + "template-revision-hash": hashes[0],
                    "controller-revision-hash": hashes[1],
                    "statefulset.kubernetes.io/pod-name": f"{NAME}-{g}" if w == 0 else f"{NAME}-{g}-{w}",
                    "apps.kubernetes.io/pod-index": str(g if w == 0 else w),
                }
            )
            pods.append((g, w, labels))
    return pods


@settings(max_examples=300, deadline=None)
@given(lws_objects(), selectors)
def test_reach_equals_the_best_case_over_concrete_pods(lws: LeaderWorkerSet, selector: tuple) -> None:
    best_leaders = best_workers = False
    best_groups = 0
    reached_indexes: set[int] = set()
    for keys in itertools.permutations(GROUP_KEYS, lws.replicas):
        for hashes in itertools.product(HASHES, repeat=2):
            hit = [(g, w) for g, w, labels in concrete_pods(lws, keys, hashes) if matches(selector, labels)]
            best_leaders |= any(w == 0 for _, w in hit)
            best_workers |= any(w > 0 for _, w in hit)
            best_groups = max(best_groups, len({g for g, _ in hit}))
            reached_indexes |= {g for g, _ in hit}
    model = reach(selector, lws)
    assert (model.leaders, model.workers, model.groups) == (best_leaders, best_workers, best_groups)
    if model.group_indexes is not None:
        assert model.group_indexes == reached_indexes


def fleet_lws(replicas: int = 4, size: int = 4) -> LeaderWorkerSet:
    return LeaderWorkerSet(
        {
            "metadata": {"name": "llm-xl", "namespace": "serve"},
            "spec": {
                "replicas": replicas,
                "leaderWorkerTemplate": {
                    "size": size,
                    "leaderTemplate": {"metadata": {"labels": {"app": "llm-xl", "role": "leader"}}},
                    "workerTemplate": {"metadata": {"labels": {"app": "llm-xl"}}},
                },
            },
        }
    )


def test_large_lws_is_judged_without_enumerating_pods() -> None:
    big = fleet_lws(replicas=100_000, size=64)
    wide = reach(from_map({"app": "llm-xl"}), big)
    assert (wide.leaders, wide.workers, wide.groups, wide.group_indexes) == (True, True, 100_000, None)
    one = reach(from_map({"app": "llm-xl", P + "group-index": "99999"}), big)
    assert (one.groups, one.group_indexes) == (1, frozenset({99999}))


def test_fleet_selectors() -> None:
    lws = fleet_lws()
    assert reach(from_map({"app": "llm-xl", "role": "leader"}), lws).workers is False
    assert reach(from_map({"app": "llm-xl"}), lws).workers is True
    assert reach(from_map({"app": "web"}), lws).any is False
    pdb = from_label_selector({"matchLabels": {P + "name": "llm-xl", P + "group-index": "3"}})
    assert reach(pdb, lws).groups == 1
    assert reach(from_label_selector({}), lws).groups == 4  # an empty LabelSelector matches all
    assert reach(from_label_selector(None), lws).any is False  # a null one matches nothing
    keyed = from_label_selector(
        {"matchExpressions": [{"key": P + "group-key", "operator": "In", "values": ["a", "b"]}]}
    )
    assert reach(keyed, lws).groups == 2


service_selectors = st.dictionaries(
    st.sampled_from(
        ["app", "role", "tier", P + "name", P + "group-index", "statefulset.kubernetes.io/pod-name"]
    ),
    st.sampled_from(["llm", "web", "leader", "gpu", NAME, "0", "1", "llm-0-1", "llm-1"]),
    min_size=1,
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(lws_objects(), service_selectors)
def test_leader_service_patch_is_idempotent_and_keeps_leaders(lws: LeaderWorkerSet, selector: dict) -> None:
    """Whatever selector the policy patches, the patched one reaches no worker (so a reinvocation
    adds nothing) and still reaches every leader group the original reached."""
    if not workers_reached(selector, [lws]):
        return
    patched = {**selector, P + "worker-index": "0"}
    assert workers_reached(patched, [lws]) == []
    before, after = reach(from_map(selector), lws), reach(from_map(patched), lws)
    assert after.leaders == before.leaders
    if before.group_indexes is not None and after.group_indexes is not None:
        assert after.group_indexes <= before.group_indexes


def test_serving_pods_annotation_reads_all_leaders_and_unreadable_values() -> None:
    from guardhook.cluster.lws import SERVING_ALL, SERVING_LEADERS, LeaderWorkerSet

    def lws(value: str | None) -> LeaderWorkerSet:
        notes = {} if value is None else {"guardhook.io/serving-pods": value}
        return LeaderWorkerSet({"metadata": {"annotations": notes}})

    assert lws(None).serving_pods == SERVING_LEADERS and lws(None).serving_pods_unreadable is None
    assert lws("all").serving_pods == SERVING_ALL and lws("all").serving_pods_unreadable is None
    assert lws("leaders").serving_pods == SERVING_LEADERS
    assert lws("All").serving_pods == SERVING_LEADERS and lws("All").serving_pods_unreadable == "All"
