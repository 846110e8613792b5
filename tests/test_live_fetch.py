"""The direct GET fallback for a pod the view does not hold yet, against the fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guardhook.model import PodRecord
from guardhook.sources import KUBECONFIG, Source
from guardhook.view.kube_transport import PodFetcher, reflector_client
from guardhook.view.static import embedded_fleet_objects
from guardhook.view.store import PODS, ClusterView

from fake_apiserver import FakeApiServer


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    server.load(o for o in embedded_fleet_objects() if o["kind"] == "Pod")
    yield server
    server.stop()


def fetcher(fake: FakeApiServer, tmp_path: Path, timeout: float = 0.25) -> PodFetcher:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    return PodFetcher(reflector_client(Source(KUBECONFIG, (str(kubeconfig),))), timeout_seconds=timeout)


def test_a_pod_the_view_lacks_is_fetched_without_being_stored(fake: FakeApiServer, tmp_path: Path) -> None:
    view = ClusterView("test")
    view.pod_fetcher = fetcher(fake, tmp_path)
    record = view.pod_or_fetch("serve", "llm-xl-2-1")
    assert isinstance(record, PodRecord) and record.node_name == "gpu-node-09"
    assert view.count(PODS) == 0  # the watch stays the only writer
    assert view.pod_or_fetch("serve", "no-such-pod") is None


def test_a_held_pod_is_never_fetched(fake: FakeApiServer, tmp_path: Path) -> None:
    view = ClusterView("test")
    view.upsert(PODS, fake.get("pods", "serve", "llm-xl-0"))
    view.pod_fetcher = fetcher(fake, tmp_path)
    before = len(fake.requests)
    assert view.pod_or_fetch("serve", "llm-xl-0") is not None
    assert len(fake.requests) == before


def test_a_slow_api_server_is_given_up_on_within_the_bound(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.get_delay = 1.0
    view = ClusterView("test")
    view.pod_fetcher = fetcher(fake, tmp_path, timeout=0.2)
    assert view.pod_or_fetch("serve", "llm-xl-2-1") is None  # it exists, but answers too late


def test_static_views_have_no_fallback() -> None:
    assert ClusterView("test").pod_or_fetch("serve", "llm-xl-0") is None
