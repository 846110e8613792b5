"""Policy group-eviction: budget of broken groups per LWS, 429 denials, the ledger, dry runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from eviction_helpers import engine, eviction, find, fleet_objects, judge, lws_object, lws_view, pod_object

from guardhook.cluster.view.static import embedded_fleet_view, view_from_objects
from guardhook.cluster.view.store import PODDISRUPTIONBUDGETS, PODS
from guardhook.groups.index import group_index
from guardhook.ledger import Disruption, LedgerError, MemoryLedger

from conftest import Server, expected_answers, load_review


def check(answer: dict[str, Any], want: dict[str, Any]) -> None:
    """Compare a response with one expected.json entry."""
    assert answer["allowed"] is want["allowed"], answer
    if "code" in want:
        assert answer["status"]["code"] == want["code"]
        assert answer["status"]["reason"] == "TooManyRequests"
    if "policy" in want:
        assert answer["status"]["message"].startswith(f"[{want['policy']}]")


# ---- the captured reviews against a real server -------------------------------------------------


def test_fixture_sequence_on_one_fresh_server(fresh_server: Callable[..., Server]) -> None:
    server = fresh_server()
    for sequence in expected_answers()["sequence"]:
        for step in sequence:
            check(server.review(step["path"], step["review"]), step)
    denied = server.review("/validate", "s08-eviction-other-group.validating")
    assert "group 0" in denied["status"]["message"]  # names the group s07 broke
    assert "llm-xl-0-3" in denied["status"]["message"]


def test_dry_run_eviction_records_nothing_on_a_real_server(fresh_server: Callable[..., Server]) -> None:
    server = fresh_server()
    dry = load_review("s07-eviction-worker.validating")
    dry["request"]["dryRun"] = True
    assert server.post("/validate", dry).json()["response"]["allowed"] is True
    # Nothing recorded: another group may still go, and then a dry run is judged like the real thing.
    assert server.review("/validate", "s08-eviction-other-group.validating")["allowed"] is True
    answer = server.post("/validate", dry).json()["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 429


def server_side_dry_run(review: dict[str, Any]) -> dict[str, Any]:
    """`review` as `kubectl drain --dry-run=server` sends it: the Eviction body carries
    `deleteOptions.dryRun: [All]` while the API server sends `request.dryRun: false` (it applies the
    body's dry run to the pod delete only after admission: pkg/registry/core/pod/storage/eviction.go)."""
    review["request"]["object"]["deleteOptions"] = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "dryRun": ["All"],
    }
    assert review["request"]["dryRun"] is False
    return review


def test_a_server_side_dry_run_records_nothing_on_a_real_server(
    fresh_server: Callable[..., Server],
) -> None:
    server = fresh_server()
    dry = server_side_dry_run(load_review("s07-eviction-worker.validating"))
    assert server.post("/validate", dry).json()["response"]["allowed"] is True
    # The real eviction of another group that follows still passes: the dry run spent nothing.
    assert server.review("/validate", "s08-eviction-other-group.validating")["allowed"] is True
    # And the dry run gets the answer the real request would get now.
    answer = server.post("/validate", dry).json()["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 429


@pytest.mark.parametrize("flags", [["All"], ["All", "All"]])
def test_an_eviction_whose_delete_options_are_a_dry_run_records_nothing(flags: list[str]) -> None:
    eng = engine(embedded_fleet_view())
    request = eviction("llm-xl-0-3")
    request["object"]["deleteOptions"] = {"dryRun": flags}
    assert judge(eng, request)["allowed"] is True
    assert eng.ledger.entries(("serve", "llm-xl")) == ()


@pytest.mark.parametrize("options", [{}, {"dryRun": []}, {"dryRun": "All"}, {"gracePeriodSeconds": 0}, "x"])
def test_delete_options_that_are_no_dry_run_spend_the_budget(options: Any) -> None:
    eng = engine(embedded_fleet_view())
    request = eviction("llm-xl-0-3")
    request["object"]["deleteOptions"] = options
    assert judge(eng, request)["allowed"] is True
    assert [e.pod for e in eng.ledger.entries(("serve", "llm-xl"))] == ["llm-xl-0-3"]


@pytest.mark.parametrize("name", ["s07-eviction-worker", "s08-eviction-other-group", "s11-eviction-leader"])
def test_each_captured_eviction_alone_is_allowed(name: str) -> None:
    want = next(e for e in expected_answers()["single"] if e["review"] == f"{name}.validating.json")
    check(judge(engine(embedded_fleet_view()), load_review(f"{name}.validating")["request"]), want)


def test_the_mutating_copies_are_allowed_with_no_patch() -> None:
    eng = engine(embedded_fleet_view())
    for name in ("s07-eviction-worker", "s08-eviction-other-group", "s11-eviction-leader"):
        answer = eng.judge(load_review(f"{name}.mutating")["request"], "mutate").response
        assert answer["allowed"] is True and "patch" not in answer
    assert eng.ledger.entries(("serve", "llm-xl")) == ()


# ---- the rule ----------------------------------------------------------------------------------


def test_leader_eviction_counts_against_the_budget() -> None:
    eng = engine(embedded_fleet_view())
    assert judge(eng, eviction("llm-xl-3"))["allowed"] is True
    denied = judge(eng, eviction("llm-xl-0-1"))
    assert denied["status"]["code"] == 429 and "group 3" in denied["status"]["message"]
    assert judge(eng, eviction("llm-xl-3-2"))["allowed"] is True  # group 3 is already broken


def test_policy_v1beta1_eviction_bodies_are_judged_the_same() -> None:
    eng = engine(embedded_fleet_view())
    assert judge(eng, eviction("llm-xl-0-3", v1beta1=True))["allowed"] is True
    assert judge(eng, eviction("llm-xl-2-1", v1beta1=True))["status"]["code"] == 429


def test_a_group_broken_in_the_view_drains_freely_and_holds_the_budget() -> None:
    eng = engine(lws_view(replicas=4, size=3, not_ready={1}))
    assert judge(eng, eviction("llm-1"))["allowed"] is True
    assert judge(eng, eviction("llm-1-1"))["allowed"] is True
    denied = judge(eng, eviction("llm-2-1"))
    assert denied["allowed"] is False and denied["status"]["code"] == 429
    assert "group 1 (not Ready: llm-1-2)" in denied["status"]["message"]
    # Recorded all the same (a lagging view may show broken a group that has healed since); the
    # entries count group 1 once, as the view does.
    recorded = eng.ledger.entries(("serve", "llm"))
    assert sorted((e.group, e.pod) for e in recorded) == [("1", "llm-1"), ("1", "llm-1-1")]


@pytest.mark.parametrize(
    ("budget", "params", "source"),
    [
        (None, None, "config parameter maxDisruptedGroups"),
        (None, {"maxDisruptedGroups": 2}, "config parameter maxDisruptedGroups"),
        (2, None, "annotation guardhook.io/max-disrupted-groups"),
    ],
    ids=["default", "config", "annotation"],
)
def test_the_denial_names_where_the_budget_comes_from(
    budget: int | None, params: dict[str, Any] | None, source: str
) -> None:
    b = budget or (params or {}).get("maxDisruptedGroups", 1)
    broken = {1} if b == 1 else {1, 2}
    denied = judge(
        engine(lws_view(replicas=4, size=2, not_ready=broken, budget=budget), params=params),
        eviction("llm-0-1"),
    )
    assert denied["status"]["code"] == 429
    message = denied["status"]["message"]
    verb = "is" if len(broken) == 1 else "are"
    assert f"but {len(broken)} of its 4 groups {verb} already broken" in message
    assert f"at most {b} may be broken at a time ({source}):" in message
    other = "annotation" if source.startswith("config") else "config parameter"
    assert other not in message


def test_an_unusable_budget_annotation_is_named_beside_the_parameter() -> None:
    objects = [lws_object("llm", 3, 2, {"guardhook.io/max-disrupted-groups": "two"})]
    objects += [pod_object("llm", g, w, 2, ready=(g, w) != (1, 1)) for g in range(3) for w in range(2)]
    view = view_from_objects(objects)
    message = judge(engine(view), eviction("llm-0-1"))["status"]["message"]
    assert (
        "at most 1 may be broken at a time (config parameter maxDisruptedGroups; "
        "annotation guardhook.io/max-disrupted-groups: 'two' is not a whole number)"
    ) in message


@pytest.mark.parametrize("value", ["²", "٣", "1²"])
def test_a_budget_of_digits_int_cannot_read_is_unusable_not_a_policy_failure(value: str) -> None:
    # str.isdigit() accepts "²" (and int() reads "٣" as 3); annotation values are any string a
    # tenant writes. Read as strconv.Atoi reads them: not a whole number, the parameter's budget.
    objects = [lws_object("llm", 3, 2, {"guardhook.io/max-disrupted-groups": value})]
    objects += [pod_object("llm", g, w, 2, ready=(g, w) != (1, 1)) for g in range(3) for w in range(2)]
    answer = judge(engine(view_from_objects(objects)), eviction("llm-0-1"))
    assert answer["status"]["code"] == 429
    assert (
        f"annotation guardhook.io/max-disrupted-groups: {value!r} is not a whole number"
        in (answer["status"]["message"])
    )


def test_a_group_index_with_no_pods_counts_as_broken() -> None:
    view = lws_view(replicas=3, size=2)
    for name in ("llm-2", "llm-2-1"):
        view.remove(PODS, ("serve", name))
    denied = judge(engine(view), eviction("llm-0-1"))
    assert denied["status"]["code"] == 429 and "group 2 (0 of 2 pods exist)" in denied["status"]["message"]


def test_budget_from_the_lws_annotation_overrides_the_config() -> None:
    eng = engine(lws_view(replicas=4, size=2, budget=2), params={"maxDisruptedGroups": 1})
    assert [judge(eng, eviction(f"llm-{g}-1"))["allowed"] for g in range(4)] == [True, True, False, False]


def test_budget_from_the_config() -> None:
    eng = engine(lws_view(replicas=4, size=2), params={"maxDisruptedGroups": 3})
    assert [judge(eng, eviction(f"llm-{g}-1"))["allowed"] for g in range(4)] == [True, True, True, False]
    assert (
        judge(engine(lws_view(2, 2), params={"maxDisruptedGroups": 0}), eviction("llm-0"))["allowed"] is False
    )


def test_non_lws_and_unknown_pods_are_allowed_and_record_nothing() -> None:
    objects = fleet_objects()
    plain = pod_object("x", 0, 0, 1)
    plain["metadata"] = {"name": "web", "namespace": "serve", "uid": "uid-web"}
    eng = engine(view_from_objects([*objects, plain]))
    assert judge(eng, eviction("web"))["allowed"] is True
    assert judge(eng, eviction("llm-xl-9-9"))["allowed"] is True  # not in the view: gone or brand new
    assert eng.ledger.entries(("serve", "llm-xl")) == ()
    assert judge(eng, eviction("llm-xl-0-1"))["allowed"] is True


def test_stale_view_answers_429() -> None:
    view = embedded_fleet_view()
    view.mark_broken(PODS, now=time.monotonic() - 3600)
    answer = judge(engine(view), eviction("llm-xl-0-3"))
    assert answer["allowed"] is False and answer["status"]["code"] == 429
    assert answer["status"]["message"].startswith("[group-eviction]")


def test_ledger_failure_answers_429() -> None:
    class Broken(MemoryLedger):
        def update(self, lws: Any, plan: Any) -> Any:
            raise LedgerError("API server unreachable")

    answer = judge(engine(embedded_fleet_view(), ledger=Broken()), eviction("llm-xl-0-3"))
    assert answer["status"]["code"] == 429 and "API server unreachable" in answer["status"]["message"]


# ---- the ledger: dry run, review, TTL, visibility ---------------------------------------------------


def test_dry_run_is_judged_the_same_and_records_nothing() -> None:
    eng = engine(embedded_fleet_view())
    assert judge(eng, eviction("llm-xl-0-3", dry_run=True))["allowed"] is True
    assert eng.ledger.entries(("serve", "llm-xl")) == ()
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    assert judge(eng, eviction("llm-xl-2-1", dry_run=True))["status"]["code"] == 429
    assert [e.pod for e in eng.ledger.entries(("serve", "llm-xl"))] == ["llm-xl-0-3"]


def test_a_retried_eviction_of_one_pod_refreshes_its_entry_instead_of_adding_one() -> None:
    """kubectl drain retries an eviction every 5 s while something after guardhook (a PDB) refuses
    it: each retry is allowed again and must not add an entry to the ledger until the TTL."""
    now = [1_000_000.0]
    ledger = MemoryLedger(clock=lambda: now[0])
    uid = find(fleet_objects(), "Pod", "llm-xl-0-3")["metadata"]["uid"]
    legacy = Disruption("0", "llm-xl-0-3", uid, 2e6)  # written before entries had `recorded`
    ledger.update(("serve", "llm-xl"), lambda _: (None, (legacy,)))
    eng = engine(embedded_fleet_view(), ledger=ledger)
    for _ in range(3):
        now[0] += 5
        assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    entries = ledger.entries(("serve", "llm-xl"))
    # One entry for the pod, from the last retry (its TTL counts from then); an entry without a
    # recording time counts until its own TTL even past a replacement, so it stays.
    assert [(e.pod, e.uid, e.recorded, e.expires) for e in entries] == [
        ("llm-xl-0-3", uid, 0.0, 2e6),
        ("llm-xl-0-3", uid, now[0], now[0] + 120),
    ]
    assert judge(eng, eviction("llm-xl-2-1"))["status"]["code"] == 429


def test_a_denial_names_what_each_ledger_entry_recorded() -> None:
    # An eviction's entry says so; an entry without a cause (written before entries had one) says
    # only that a disruption was recorded, never that it was an eviction.
    eng = engine(embedded_fleet_view(), ledger=MemoryLedger())
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    assert [e.cause for e in eng.ledger.entries(("serve", "llm-xl"))] == ["eviction"]
    denied = judge(eng, eviction("llm-xl-2-1"))["status"]["message"]
    assert "group 0 (eviction of llm-xl-0-3 recorded, not visible yet)" in denied
    legacy = MemoryLedger()
    legacy.update(("serve", "llm-xl"), lambda _: (None, (Disruption("0", "llm-xl-0-3", "u", 4e9),)))
    denied = judge(engine(embedded_fleet_view(), ledger=legacy), eviction("llm-xl-2-1"))["status"]["message"]
    assert "group 0 (disruption of llm-xl-0-3 recorded, not visible yet)" in denied


def test_offline_review_records_nothing() -> None:
    ledger = MemoryLedger()
    eng = engine(embedded_fleet_view(), ledger=ledger, record=False)
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is True
    assert ledger.entries(("serve", "llm-xl")) == ()


def test_recorded_disruption_expires_after_the_ttl() -> None:
    # A clock unrelated to the wall clock: the entry must be stamped with the ledger's clock too, so
    # this holds however long the judging takes on a loaded machine.
    now = [1_000_000.0]
    eng = engine(
        embedded_fleet_view(), ledger=MemoryLedger(clock=lambda: now[0]), params={"ledgerTTLSeconds": 30}
    )
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    now[0] += 29
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is False
    now[0] += 2
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is True


@pytest.mark.parametrize(
    ("created", "freed"),
    [("2026-01-01T00:00:10Z", True), ("2026-01-01T00:00:00Z", False), (None, False)],
    ids=["recreated-after-the-entry", "older-pod-a-lagging-view-holds", "no-creation-time"],
)
def test_entry_stops_counting_once_the_view_shows_the_group_seen_through(
    created: str | None, freed: bool
) -> None:
    """An entry counts until the view shows its group broken (then the view counts it) or whole
    again with the evicted pod replaced after the entry was recorded; a pod of that name with
    another uid but no later creation time (a view that lags) never frees it."""
    recorded = 1_767_225_605.0  # 2026-01-01T00:00:05Z
    objects = fleet_objects()
    view = view_from_objects(objects)
    eng = engine(view, ledger=MemoryLedger(clock=lambda: recorded))
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    evicted = find(objects, "Pod", "llm-xl-0-3")
    evicted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:06Z"
    view.upsert(PODS, evicted)  # the view now shows group 0 broken itself
    assert "terminating: llm-xl-0-3" in judge(eng, eviction("llm-xl-2-1"))["status"]["message"]
    del evicted["metadata"]["deletionTimestamp"]
    evicted["metadata"]["uid"] = "recreated"
    evicted["metadata"]["creationTimestamp"] = created
    view.upsert(PODS, evicted)  # a Ready pod of that name again: group 0 whole
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is freed
    recorded_pods = [e.pod for e in eng.ledger.entries(("serve", "llm-xl"))]
    assert recorded_pods == (["llm-xl-0-3", "llm-xl-2-1"] if freed else ["llm-xl-0-3"])


def test_a_replica_whose_view_lags_still_counts_entries_another_one_has_seen_through() -> None:
    """Replica A's view already shows the evicted pod terminating; replica B's does not yet. The
    shared ledger keeps the entry until its TTL, so B still counts it and the budget holds."""
    shared = MemoryLedger()
    objects = fleet_objects()
    find(objects, "LeaderWorkerSet", "llm-xl")["metadata"]["annotations"] = {
        "guardhook.io/max-disrupted-groups": "2"
    }
    ahead, lagging = view_from_objects(objects), view_from_objects(objects)
    replica_a, replica_b = engine(ahead, ledger=shared), engine(lagging, ledger=shared)
    assert judge(replica_a, eviction("llm-xl-0-3"))["allowed"] is True
    evicted = find(objects, "Pod", "llm-xl-0-3")
    evicted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ahead.upsert(PODS, evicted)
    assert judge(replica_a, eviction("llm-xl-2-1"))["allowed"] is True  # groups 0 and 2: the budget
    denied = judge(replica_b, eviction("llm-xl-3-1"))
    assert denied["status"]["code"] == 429
    assert "group 0 (eviction of llm-xl-0-3" in denied["status"]["message"]


# ---- PodDisruptionBudgets in the view ----------------------------------------------------------------


def group_pdb(group: int, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    selector = {
        "matchLabels": {
            "leaderworkerset.sigs.k8s.io/name": "llm-xl",
            "leaderworkerset.sigs.k8s.io/group-index": str(group),
        }
    }
    pdb = {
        "kind": "PodDisruptionBudget",
        "apiVersion": "policy/v1",
        "metadata": {"name": f"llm-xl-{group}", "namespace": "serve", "generation": 1},
        "spec": {"selector": selector, **spec},
    }
    if status is not None:
        pdb["status"] = status
    return pdb


@pytest.mark.parametrize(
    "pdb",
    [
        group_pdb(
            0,
            {"maxUnavailable": 1},
            {"disruptionsAllowed": 0, "observedGeneration": 1, "currentHealthy": 3, "desiredHealthy": 3},
        ),
        group_pdb(0, {"minAvailable": 4}),
        group_pdb(0, {"minAvailable": "100%"}),
        group_pdb(0, {"maxUnavailable": 1}, {"disruptionsAllowed": 1, "observedGeneration": 0}),
    ],
    ids=["status-no-room", "min-available-all", "min-available-percent", "not-observed"],
)
def test_an_eviction_the_group_pdb_refuses_is_429_and_records_nothing(pdb: dict[str, Any]) -> None:
    view = embedded_fleet_view()
    view.upsert(PODDISRUPTIONBUDGETS, pdb)
    eng = engine(view)
    denied = judge(eng, eviction("llm-xl-0-3"))
    assert denied["status"]["code"] == 429 and "PodDisruptionBudget llm-xl-0" in denied["status"]["message"]
    assert eng.ledger.entries(("serve", "llm-xl")) == ()
    assert judge(eng, eviction("llm-xl-2-1"))["allowed"] is True  # the refused one held no budget


@pytest.mark.parametrize(
    "pdb",
    [
        group_pdb(0, {"maxUnavailable": 1}, {"disruptionsAllowed": 1, "observedGeneration": 1}),
        group_pdb(0, {"maxUnavailable": 1}),
        group_pdb(0, {"minAvailable": "75%"}),
        group_pdb(1, {"minAvailable": 4}),
    ],
    ids=["status-room", "max-unavailable", "min-available-percent", "other-group"],
)
def test_an_eviction_the_pdb_allows_goes_on_to_the_budget(pdb: dict[str, Any]) -> None:
    view = embedded_fleet_view()
    view.upsert(PODDISRUPTIONBUDGETS, pdb)
    eng = engine(view)
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    assert len(eng.ledger.entries(("serve", "llm-xl"))) == 1


def test_an_lws_pod_is_429_while_the_api_server_did_not_serve_leaderworkersets() -> None:
    """The LWS CRD installed after guardhook started: the view holds no LWS, and must not let a
    drain take every group at once (it did: no 429 at all on a real cluster); once the kind is
    served and the LWS listed, the budget judges again."""
    objects = fleet_objects()
    view = view_from_objects([o for o in objects if o["kind"] != "LeaderWorkerSet"])
    view.mark_unreadable("leaderworkersets")  # what the reflector does on a 404
    eng = engine(view)
    for pod in ("llm-xl-0-3", "llm-xl-1-1"):
        denied = judge(eng, eviction(pod))
        assert denied["status"]["code"] == 429
        assert "did not serve LeaderWorkerSets" in denied["status"]["message"]
    view.upsert("leaderworkersets", find(objects, "LeaderWorkerSet", "llm-xl"))
    view.mark_synced("leaderworkersets")
    assert [judge(eng, eviction(p))["allowed"] for p in ("llm-xl-0-3", "llm-xl-1-1")] == [True, False]


def test_a_pod_of_an_lws_that_is_gone_is_still_allowed_when_the_kind_is_served() -> None:
    objects = fleet_objects()
    view = view_from_objects([o for o in objects if o["kind"] != "LeaderWorkerSet"])
    assert judge(engine(view), eviction("llm-xl-0-3"))["allowed"] is True


def test_an_eviction_reads_its_lws_pods_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The budget decision reads one snapshot with the ledger (budget_reading); the plans' reading
    # of the view's broken groups (GroupDisruption.broken_in_view) is read only when asked for.
    view = embedded_fleet_view()
    reads: list[tuple[str, str]] = []
    index = group_index(view)
    lws_pods = index.lws_pods
    monkeypatch.setattr(index, "lws_pods", lambda ns, name: reads.append((ns, name)) or lws_pods(ns, name))
    answer = judge(engine(view), load_review("s07-eviction-worker.validating")["request"])
    assert answer["allowed"] and reads == [("serve", "llm-xl")]
