"""Property (issue #21): under any interleaving of evictions from several groups, through two
replicas sharing one ledger, and of the watch events each replica's view receives (late, and at
any step inside a decision), the cluster never has more than B groups of the LWS broken.

The cluster is modelled as the truth the API server holds: an allowed eviction makes its pod
terminate and then go (two watch events queued for each replica's view, delivered in order when
the test says so); a broken group heals when its gone pods come back (new uid, created now, Ready),
which takes longer than any view lags, so every view has seen the events up to the heal.
The invariant is checked after every step against the truth, not against a view."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from eviction_helpers import eviction, lws_object, pod_object
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interleavings import SteppedView, Steps, apply_watch_event, stepped_ledger

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.config import build_config
from guardhook.ledger import MemoryLedger

SIZE = 2
REPLICAS = 2
START = 1_796_000_000.0


def stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """The truth (pods by name), two replicas' views with their queues of undelivered events, one
    ledger shared by the replicas, and the clock."""

    def __init__(self, groups: int, budget: int) -> None:
        self.groups, self.budget = groups, budget
        self.now = START
        self.rv = 100
        lws = lws_object("llm", groups, SIZE, {"guardhook.io/max-disrupted-groups": str(budget)})
        self.pods: dict[str, dict[str, Any]] = {}
        for group in range(groups):
            for worker in range(SIZE):
                pod = pod_object("llm", group, worker, SIZE)
                pod["metadata"]["creationTimestamp"] = stamp(START - 1000)
                self.pods[pod["metadata"]["name"]] = pod
        self.gone: set[str] = set()  # evicted pods whose group has not healed
        self.steps = Steps()
        self.ledger = stepped_ledger(MemoryLedger(clock=lambda: self.now), self.steps)
        self.views: list[ClusterView] = []
        self.engines: list[Engine] = []
        for _ in range(REPLICAS):
            view = view_from_objects([copy.deepcopy(lws), *copy.deepcopy(list(self.pods.values()))])
            self.views.append(view)
            self.engines.append(Engine(SteppedView(view, self.steps), build_config({}), ledger=self.ledger))  # type: ignore[arg-type]
        self.queues: list[list[dict[str, Any]]] = [[] for _ in range(REPLICAS)]

    def broken(self) -> set[int]:
        return {int(name.split("-")[1]) for name in self.gone}

    def emit(self, kind: str, pod: dict[str, Any]) -> None:
        self.rv += 1
        obj = copy.deepcopy(pod)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        for queue in self.queues:
            queue.append({"type": kind, "object": obj})

    def deliver(self, replica: int, count: int) -> None:
        queue = self.queues[replica]
        for _ in range(min(count, len(queue))):
            apply_watch_event(self.views[replica], queue.pop(0))

    def evict(self, replica: int, name: str, at_step: int, to_replica: int, count: int) -> None:
        """Evict `name` through `replica`; before step `at_step` of the decision, `count` queued
        events reach `to_replica`'s view."""
        if name in self.gone:
            return  # the API server answers 404; guardhook is not asked
        start = self.steps.count
        self.steps.at(start + at_step, lambda: self.deliver(to_replica, count))
        response = self.engines[replica].judge(eviction(name), "validate").response
        self.steps.actions.clear()  # a position past this decision's last step: not reached
        if response["allowed"]:
            pod = self.pods[name]
            pod["metadata"]["deletionTimestamp"] = stamp(self.now)
            self.emit("MODIFIED", pod)
            self.emit("DELETED", pod)
            self.gone.add(name)

    def heal(self, group: int) -> None:
        """The group's gone pods are recreated (new uid, created now) and Ready: whole again. A
        replacement takes a pod start-up to become Ready, longer than a view lags (the invariant's
        premise, group_budget.budget_reading): every view has seen the events up to it first."""
        healed = sorted(n for n in self.gone if int(n.split("-")[1]) == group)
        for name in healed:
            pod = self.pods[name]
            del pod["metadata"]["deletionTimestamp"]
            pod["metadata"]["uid"] = f"{pod['metadata']['uid']}-again-{self.rv}"
            pod["metadata"]["creationTimestamp"] = stamp(self.now)
            self.emit("ADDED", pod)
            self.gone.discard(name)
        if healed:
            for replica, queue in enumerate(self.queues):
                self.deliver(replica, len(queue))


def operations(groups: int) -> st.SearchStrategy[tuple[Any, ...]]:
    names = st.builds(
        lambda g, w: f"llm-{g}" if w == 0 else f"llm-{g}-{w}",
        st.integers(0, groups - 1),
        st.integers(0, SIZE - 1),
    )
    replica = st.integers(0, REPLICAS - 1)
    evict = st.tuples(st.just("evict"), replica, names, st.integers(0, 10), replica, st.integers(0, 3))
    return st.one_of(
        evict,
        evict,  # most steps are evictions: the race needs two in a row
        evict,
        st.tuples(st.just("deliver"), replica, st.integers(1, 3)),
        st.tuples(st.just("heal"), st.integers(0, groups - 1)),
        st.tuples(st.just("tick"), st.integers(1, 5)),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.integers(2, 4),
    budget=st.integers(1, 2),
    data=st.data(),
)
def test_no_interleaving_breaks_more_than_b_groups(groups: int, budget: int, data: st.DataObject) -> None:
    cluster = Cluster(groups, budget)
    ops = data.draw(st.lists(operations(groups), min_size=8, max_size=25), label="operations")
    for op in ops:
        if op[0] == "evict":
            cluster.evict(*op[1:])
        elif op[0] == "deliver":
            cluster.deliver(*op[1:])
        elif op[0] == "heal":
            cluster.heal(op[1])
        else:
            cluster.now += op[1]  # far below the 120 s TTL: no entry expires here
        assert len(cluster.broken()) <= budget, (op, sorted(cluster.gone))
