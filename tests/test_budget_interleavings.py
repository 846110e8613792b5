"""The group budget under every interleaving of a decision's steps with the view's watch event
that marks an evicted pod terminating (issue #21): evictions, delete-based drains and group-taint,
with one replica (memory or Lease ledger) and with two replicas sharing a Lease ledger on the fake
API server. Each run places the event (and, for concurrent requests, the other whole decision)
before one step; every run must end with at most B = 1 group of serve/llm-xl broken, and with
exactly one of two whole-group disruptions allowed (the budget is not just held but used)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from eviction_helpers import eviction, find, fleet_objects
from interleavings import (
    SteppedView,
    Steps,
    apply_watch_event,
    stepped_ledger,
    terminating_event,
    when_unlocked,
)

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.config import build_config
from guardhook.ledger import Ledger, MemoryLedger
from guardhook.ledger.lease import LeaseLedger

from conftest import load_review
from fake_apiserver import FakeApiServer, running_fake
from helpers import request_of

BUDGET = 1
FLEET = fleet_objects()  # parsed once: each run starts from a deep copy
CONFIG = build_config({"policies": {"group-taint": {"actions": ["Deny"]}}})


def drain_delete(pod: str) -> dict[str, Any]:
    """s01 (a worker DELETE) re-aimed at fleet pod `pod`, its stored object as `oldObject`: what
    `kubectl drain --disable-eviction` sends for a pod of a cordoned node."""
    request = request_of(load_review("s01-worker-delete.validating"))
    request["name"] = pod
    request["oldObject"] = copy.deepcopy(find(FLEET, "Pod", pod))
    return request


def taint_group_1() -> dict[str, Any]:
    """n01: `kubectl taint` NoExecute on gpu-node-06, which runs llm-xl-1-2 (group 1)."""
    request = request_of(load_review("n01-node-taint-noexecute.validating"))
    request["userInfo"] = {"username": "kubernetes-admin", "groups": ["system:masters"]}
    return request


@dataclass(frozen=True)
class Scenario:
    """Two whole-group disruptions of serve/llm-xl: `first` of group 0 (its pod `evicted` then
    starts terminating), `second` of group 1; `cordon` nodes are unschedulable."""

    first: Callable[[], dict[str, Any]]
    evicted: str
    second: Callable[[], dict[str, Any]]
    cordon: tuple[str, ...] = ()


SCENARIOS = {
    "eviction": Scenario(lambda: eviction("llm-xl-0-3"), "llm-xl-0-3", lambda: eviction("llm-xl-1-1")),
    "delete-drain": Scenario(
        lambda: drain_delete("llm-xl-0-2"),
        "llm-xl-0-2",
        lambda: drain_delete("llm-xl-1-1"),
        cordon=("gpu-node-02", "gpu-node-05"),
    ),
    "taint": Scenario(lambda: eviction("llm-xl-0-3"), "llm-xl-0-3", taint_group_1),
}


def fleet(scenario: Scenario) -> tuple[list[dict[str, Any]], ClusterView]:
    objects = copy.deepcopy(FLEET)
    for node in scenario.cordon:
        find(objects, "Node", node)["spec"]["unschedulable"] = True
    return objects, view_from_objects(objects)


class Run:
    """One interleaving: replicas (a view and an engine each, one ledger shared), the steps of
    every decision numbered by one `Steps`."""

    def __init__(self, scenario: Scenario, replicas: int, make_ledger: Callable[[], Ledger]) -> None:
        self.scenario = scenario
        self.steps = Steps()
        self.ledger = stepped_ledger(make_ledger(), self.steps)
        self.views: list[ClusterView] = []
        self.engines: list[Engine] = []
        for _ in range(replicas):
            objects, view = fleet(scenario)
            self.views.append(view)
            self.engines.append(Engine(SteppedView(view, self.steps), CONFIG, ledger=self.ledger))  # type: ignore[arg-type]
        self.event = terminating_event(find(objects, "Pod", scenario.evicted), 10_000)
        self.allowed: dict[str, bool] = {}

    def decide(self, which: str, replica: int) -> None:
        request = (self.scenario.first if which == "first" else self.scenario.second)()
        self.allowed[which] = bool(self.engines[replica].judge(request, "validate").response["allowed"])

    def event_at(self, n: int | None, replica: int) -> None:
        """The terminating event reaches `replica`'s view before step `n` — or, when the first
        disruption has not been allowed by then, at the first step after it (the pod cannot
        start terminating before its eviction or delete was admitted)."""

        def arrive() -> None:
            if not self.allowed.get("first"):
                self.steps.at(self.steps.count, arrive)
                return
            apply_watch_event(self.views[replica], self.event)

        if n is not None:
            self.steps.at(n, arrive)

    def broken(self) -> set[int]:
        """The groups the allowed disruptions broke (nothing heals: the nodes stay drained)."""
        return {group for which, group in (("first", 0), ("second", 1)) if self.allowed.get(which)}


def check(run: Run) -> None:
    assert len(run.broken()) <= BUDGET, (run.allowed, run.steps.labels)
    assert len(run.broken()) == BUDGET, (run.allowed, run.steps.labels)  # the budget is used, too


def positions(scenario: Scenario, replicas: int, make_ledger: Callable[[], Ledger]) -> tuple[int, int]:
    """How many steps the first and the second decision take (measured on an undisturbed run)."""
    run = Run(scenario, replicas, make_ledger)
    run.decide("first", 0)
    first = run.steps.count
    run.decide("second", replicas - 1)
    return first, run.steps.count - first


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeApiServer]:
    with running_fake() as server:
        yield server


def ledgers(kind: str, fake: FakeApiServer) -> Callable[[], Ledger]:
    if kind == "memory":
        return MemoryLedger
    api = fake.api_client()

    def lease() -> Ledger:
        fake.objects["leases"].clear()  # a fresh ledger for each run
        return LeaseLedger(api, "guardhook-system")

    return lease


@pytest.mark.parametrize("ledger_kind", ["memory", "lease"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_one_replica_one_after_the_other_event_between_any_two_steps(
    name: str, ledger_kind: str, fake: FakeApiServer
) -> None:
    """The first disruption, then the second; the evicted pod's terminating event lands before
    every step of either (or after both)."""
    scenario, make = SCENARIOS[name], ledgers(ledger_kind, fake)
    first, second = positions(scenario, 1, make)
    for k in range(first, first + second + 1):  # earlier, the event waits for the first admission
        run = Run(scenario, 1, make)
        run.event_at(k, 0)
        run.decide("first", 0)
        run.decide("second", 0)
        run.steps.finish()
        check(run)


@pytest.mark.parametrize("ledger_kind", ["memory", "lease"])
@pytest.mark.parametrize("name", ["eviction", "delete-drain"])
def test_one_replica_concurrent_requests_event_between_any_two_steps(
    name: str, ledger_kind: str, fake: FakeApiServer
) -> None:
    """`kubectl drain`'s parallel evictions on one replica: the whole first request lands before
    step j of the second (for the Lease ledger, between its read and its compare-and-swap too),
    and the terminating event before step k of the two."""
    scenario, make = SCENARIOS[name], ledgers(ledger_kind, fake)
    _, second = positions(scenario, 1, make)
    # The injected request's own steps are not counted, and the event cannot come before it.
    points = [(j, k) for j in range(second + 1) for k in range(j, second + 1)]
    for j, k in points:
        run = Run(scenario, 1, make)
        run.steps.at(j, when_unlocked(run.ledger, run.steps, j, lambda run=run: run.decide("first", 0)))
        run.event_at(k, 0)
        run.decide("second", 0)
        run.steps.finish()
        check(run)


@pytest.mark.parametrize("name", ["eviction", "delete-drain"])
def test_two_replicas_sharing_a_lease_ledger_event_between_any_two_steps(
    name: str, fake: FakeApiServer
) -> None:
    """Two replicas, each with its own view, one Lease ledger: replica A's whole request lands
    before step j of replica B's; the terminating event reaches A's view before step k and B's
    view at the same step or never (B's watch lags)."""
    scenario, make = SCENARIOS[name], ledgers("lease", fake)
    _, second = positions(scenario, 2, make)
    points = [(j, k) for j in range(second + 1) for k in range(j, second + 1)]
    for (j, k), lagging in itertools.product(points, (False, True)):
        run = Run(scenario, 2, make)
        run.steps.at(j, lambda run=run: run.decide("first", 0))
        run.event_at(k, 0)
        run.event_at(None if lagging else k, 1)
        run.decide("second", 1)
        run.steps.finish()
        check(run)
    assert fake.conflicts > 0  # some runs raced on the Lease and were re-planned


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_two_replicas_one_after_the_other_event_between_any_two_steps(name: str, fake: FakeApiServer) -> None:
    """The first disruption on replica A, then the second on B (the taint included); the event
    reaches A's view before any step and B's at the same step, one step later, or never."""
    scenario, make = SCENARIOS[name], ledgers("lease", fake)
    first, second = positions(scenario, 2, make)
    for k_a, lag in itertools.product(range(first, first + second + 1), (0, 1, None)):
        k_b = None if lag is None else k_a + lag
        run = Run(scenario, 2, make)
        run.event_at(k_a, 0)
        run.event_at(k_b, 1)
        run.decide("first", 0)
        run.decide("second", 1)
        run.steps.finish()
        check(run)
