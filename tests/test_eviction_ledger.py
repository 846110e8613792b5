"""The eviction ledger under concurrency: the in-memory ledger with real threads, the Lease ledger
against the fake API server (tests/fake_apiserver.py, which enforces resourceVersion), two replicas
racing (the same race against a real kube-apiserver is in test_eviction_envtest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eviction_helpers import engine, evict_all, eviction, group_of, judge, lws_view, run_together
from hypothesis import given, settings
from hypothesis import strategies as st

from guardhook.cluster.sources import EMBEDDED, KUBECONFIG, STATE, Source
from guardhook.ledger import CAUSES, Disruption, Entries, LedgerError, MemoryLedger, open_ledger
from guardhook.ledger.lease import ENTRIES_ANNOTATION, LeaseLedger, lease_name

from fake_apiserver import running_fake

LWS = ("serve", "llm")


# ---- the property: any interleaving never breaks more than B whole groups ------------------------------


@settings(max_examples=25, deadline=None)
@given(
    groups=st.integers(min_value=1, max_value=6),
    budget=st.integers(min_value=0, max_value=4),
    data=st.data(),
)
def test_concurrent_evictions_never_break_more_than_budget_groups(
    groups: int, budget: int, data: st.DataObject
) -> None:
    size = 2
    broken = data.draw(st.sets(st.integers(0, groups - 1), max_size=groups), label="broken in view")
    pods = data.draw(
        st.lists(
            st.builds(
                lambda g, w: f"llm-{g}" if w == 0 else f"llm-{g}-{w}",
                st.integers(0, groups - 1),
                st.integers(0, size - 1),
            ),
            min_size=1,
            max_size=12,
        ),
        label="evictions",
    )
    eng = engine(lws_view(groups, size, not_ready=broken, budget=budget))
    allowed = evict_all([eng], pods)
    newly_broken = {group_of(p) for p, ok in zip(pods, allowed, strict=True) if ok} - broken
    assert len(newly_broken | broken) <= max(budget, len(broken))
    # Liveness: exactly as many whole groups went as the budget left room for.
    wanted = {group_of(p) for p in pods} - broken
    assert len(newly_broken) == min(len(wanted), max(0, budget - len(broken)))
    # Evictions from broken groups always go.
    assert all(ok for p, ok in zip(pods, allowed, strict=True) if group_of(p) in broken | newly_broken)


def test_memory_ledger_update_is_atomic_under_threads() -> None:
    ledger = MemoryLedger()

    def add_one(entries: Entries) -> tuple[int, Entries]:
        return len(entries), (*entries, Disruption(str(len(entries)), "p", "u", 4e9))

    seen = run_together([lambda: ledger.update(LWS, add_one) for _ in range(16)])
    assert sorted(seen) == list(range(16))
    assert len(ledger.entries(LWS)) == 16


# ---- the Lease ledger against the fake API server ------------------------------------------------


def test_lease_ledger_creates_then_updates_one_lease_per_lws() -> None:
    with running_fake() as fake:
        ledger = LeaseLedger(fake.api_client(), "guardhook-system")
        entry = Disruption("1", "llm-1-1", "uid-llm-1-1", 4e9)
        ledger.update(LWS, lambda entries: (None, (*entries, entry)))
        ledger.update(LWS, lambda entries: (None, (*entries, Disruption("2", "llm-2", "u2", 4e9))))
        assert ledger.entries(LWS)[0] == entry and len(ledger.entries(LWS)) == 2
        stored = fake.get("leases", "guardhook-system", "guardhook-eviction.serve.llm")
        assert stored is not None and stored["metadata"]["resourceVersion"] == "2"
        assert '"pod":"llm-1-1"' in stored["metadata"]["annotations"][ENTRIES_ANNOTATION]
        assert ledger.entries(("serve", "other")) == ()
        # A plan that writes nothing sends nothing.
        assert ledger.update(LWS, lambda entries: (len(entries), None)) == 2 and len(fake.writes) == 2


def test_lease_ledger_drops_expired_and_malformed_entries() -> None:
    with running_fake() as fake:
        now = [1000.0]
        ledger = LeaseLedger(fake.api_client(), "gh", clock=lambda: now[0])
        ledger.update(
            LWS, lambda e: (None, (Disruption("0", "a", "", 1010.0), Disruption("1", "b", "", 1100.0)))
        )
        now[0] = 1050.0
        assert [e.pod for e in ledger.entries(LWS)] == ["b"]
        lease = fake.objects["leases"][("gh", lease_name(LWS))]
        lease["metadata"]["annotations"][ENTRIES_ANNOTATION] = (
            '[{"group": "x"}, 7, {"group": 1, "expires": 2000}]'
        )
        assert [e.group for e in ledger.entries(LWS)] == ["1"]  # a key is a string; the wire's 1 reads as "1"
        lease["metadata"]["annotations"][ENTRIES_ANNOTATION] = "not json"
        assert ledger.entries(LWS) == ()


def test_stale_write_gets_409_and_is_replanned() -> None:
    """Replica A reads, replica B writes, A's write carries the old resourceVersion: the fake
    answers 409, A re-reads, re-plans on B's entry and is refused by its own plan."""
    with running_fake() as fake:
        first, second = (LeaseLedger(fake.api_client(), "gh") for _ in range(2))
        first.update(LWS, lambda e: (None, ()))  # the Lease exists
        calls: list[Entries] = []

        def plan_a(entries: Entries) -> tuple[bool, Entries | None]:
            calls.append(entries)
            if len(calls) == 1:  # B sneaks in between A's read and A's write
                second.update(LWS, lambda e: (True, (*e, Disruption("2", "llm-2", "u", 4e9))))
            if entries:
                return False, None  # budget 1 is taken
            return True, (Disruption("1", "llm-1", "u", 4e9),)

        assert first.update(LWS, plan_a) is False
        assert fake.conflicts == 1 and len(calls) == 2
        assert [e.pod for e in first.entries(LWS)] == ["llm-2"]


def test_racing_creates_of_a_new_lease_conflict_and_retry() -> None:
    with running_fake() as fake:
        ledgers = [LeaseLedger(fake.api_client(), "gh") for _ in range(6)]

        def add(ledger: LeaseLedger, i: int) -> None:
            ledger.update(LWS, lambda e: (None, (*e, Disruption(str(i), f"p{i}", "u", 4e9))))

        run_together([lambda i=i, led=led: add(led, i) for i, led in enumerate(ledgers)])
        assert sorted(e.group for e in ledgers[0].entries(LWS)) == [str(i) for i in range(6)]  # no write lost


@pytest.mark.parametrize("budget", [1, 2])
def test_two_replicas_racing_on_one_lws_stay_within_the_budget(budget: int) -> None:
    """Two guardhook replicas (own view, own Lease ledger, own API client) get evictions of
    every group at once; the Lease lets exactly `budget` groups go."""
    with running_fake() as fake:
        replicas = [
            engine(lws_view(6, 2, budget=budget), ledger=LeaseLedger(fake.api_client(), "gh"))
            for _ in range(2)
        ]
        for _ in range(3):  # three rounds, a fresh Lease each
            fake.objects["leases"].clear()
            pods = [f"llm-{g}-1" for g in range(6)] * 2
            allowed = evict_all(replicas, pods)
            assert len({group_of(p) for p, ok in zip(pods, allowed, strict=True) if ok}) == budget
        assert fake.conflicts > 0  # the race did happen and was settled by resourceVersion


def test_api_server_errors_become_ledger_errors_and_429() -> None:
    with running_fake() as fake:
        ledger = LeaseLedger(fake.api_client(), "gh")
        fake.fail_with = 500
        with pytest.raises(LedgerError):
            ledger.entries(LWS)
        answer = judge(engine(lws_view(2, 2), ledger=ledger), eviction("llm-0-1"))
        assert answer["status"]["code"] == 429 and "eviction ledger" in answer["status"]["message"]
    unreachable = LeaseLedger(fake.api_client(), "gh")  # the fake is stopped now
    with pytest.raises(LedgerError):
        unreachable.update(LWS, lambda e: (None, ()))


def test_long_lease_names_are_shortened_with_a_hash() -> None:
    long = ("ns", "x" * 300)
    assert len(lease_name(long)) == 253 and lease_name(long) != lease_name(("ns", "x" * 299))
    assert lease_name(("a-b", "c")) != lease_name(("a", "b-c"))


def test_open_ledger_picks_memory_for_static_sources_and_leases_for_a_kubeconfig(tmp_path: Path) -> None:
    assert isinstance(open_ledger(Source(EMBEDDED), "gh"), MemoryLedger)
    assert isinstance(open_ledger(Source(STATE, ("fleet.yaml",)), "gh"), MemoryLedger)
    with running_fake() as fake:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        ledger = open_ledger(Source(KUBECONFIG, (str(kubeconfig),)), "guardhook-ns")
        assert isinstance(ledger, LeaseLedger)
        ledger.update(LWS, lambda e: (None, (Disruption("0", "llm-0", "u", 4e9),)))
        assert fake.get("leases", "guardhook-ns", "guardhook-eviction.serve.llm") is not None


def test_a_slow_api_server_makes_the_update_give_up_within_its_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The eviction webhook times out after 10 s; the ledger must answer (429) before that.
    import time

    from guardhook.ledger import lease

    monkeypatch.setattr(lease, "UPDATE_BUDGET_SECONDS", 0.5)
    with running_fake() as fake:
        source = Source(KUBECONFIG, (str(fake.write_kubeconfig(tmp_path / "kubeconfig")),))
        ledger = open_ledger(source, "gh")  # built as `guardhook serve` builds it
        fake.get_delay = 2.0
        started = time.monotonic()
        with pytest.raises(LedgerError):
            ledger.update(LWS, lambda entries: (None, ()))
        assert time.monotonic() - started < 1.5
        fake.get_delay = 0.0


def test_an_entry_keeps_what_it_recorded_through_the_lease(tmp_path: Path) -> None:
    # Each budget policy writes its cause; an entry without one (written before causes existed) or
    # with one this version does not know (a newer replica's) still counts, as cause "".
    with running_fake() as fake:
        ledger = open_ledger(Source(KUBECONFIG, (str(fake.write_kubeconfig(tmp_path / "kc")),)), "gh")
        written = tuple(
            Disruption(str(g), f"llm-{g}", "u", 4e9, 1e9, cause) for g, cause in enumerate(CAUSES)
        )
        ledger.update(LWS, lambda e: (None, written))
        assert ledger.entries(LWS) == written
        lease = fake.get("leases", "gh", lease_name(LWS))
        assert lease is not None
        stored = json.loads(lease["metadata"]["annotations"][ENTRIES_ANNOTATION])
        assert [raw["cause"] for raw in stored] == list(CAUSES)
        # An ordinal key stays a JSON number on the wire, the Lease format every replica reads.
        assert [raw["group"] for raw in stored] == list(range(len(CAUSES)))
    hashed = Disruption("0123456789abcdef0123456789abcdef01234567", "h", "u", 4e9)
    assert Disruption.from_json(hashed.to_json()) == hashed and hashed.to_json()["group"] == hashed.group
    legacy = {"group": 0, "pod": "llm-0", "uid": "u", "expires": 4e9}
    assert Disruption.from_json(legacy) == Disruption("0", "llm-0", "u", 4e9)
    assert Disruption.from_json({**legacy, "cause": "quake"}) == Disruption("0", "llm-0", "u", 4e9)
    assert Disruption.from_json({**legacy, "cause": 5}) == Disruption("0", "llm-0", "u", 4e9)
    assert "cause" not in Disruption("0", "llm-0", "u", 4e9).to_json()  # read as before by older replicas


def test_sweep_deletes_leases_whose_entries_all_expired_and_keeps_the_rest() -> None:
    # A Lease cannot be owned by an LWS in another namespace: one whose LWS is gone (an e2e
    # namespace deleted) would stay for good. The sweep removes it once its entries expired.
    with running_fake() as fake:
        now = [1000.0]
        ledger = LeaseLedger(fake.api_client(), "gh", clock=lambda: now[0])
        gone, live = ("e2e", "lws-of-a-deleted-namespace"), ("serve", "llm")
        ledger.update(gone, lambda e: (None, (Disruption("0", "a", "", 1010.0),)))
        ledger.update(live, lambda e: (None, (Disruption("0", "b", "", 5000.0),)))
        fake.put(
            "leases",
            {
                "kind": "Lease",
                "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"name": "someone-elses", "namespace": "gh"},
            },
        )
        assert ledger.sweep() == []  # nothing expired yet
        now[0] = 2000.0
        assert ledger.sweep() == [lease_name(gone)]
        assert sorted(fake.names("leases")) == sorted([lease_name(live), "someone-elses"])
        assert [e.pod for e in ledger.entries(live)] == ["b"]
        ledger.update(gone, lambda e: (None, (Disruption("1", "c", "", 3000.0),)))  # created again
        assert [e.pod for e in ledger.entries(gone)] == ["c"]
