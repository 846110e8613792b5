"""The reflector over the real `kubernetes` client transport, against the fake API server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardhook.cluster.kube_transport import KubeTransport, reflector_client
from guardhook.cluster.sources import KUBECONFIG, Source
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.cluster.view.store import PODS, ClusterView

from fake_apiserver import FakeApiServer


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer(max_page=5).start()
    server.load(o for o in embedded_fleet_objects() if o["kind"] == "Pod")
    yield server
    server.stop()


@pytest.fixture
def pods_reflector(fake: FakeApiServer, tmp_path: Path) -> Iterator[Reflector]:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    transport = KubeTransport(reflector_client(Source(KUBECONFIG, (str(kubeconfig),))), idle_seconds=0.3)
    reflector = Reflector(PODS, ClusterView("test"), transport)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    wait_for(lambda: reflector.view.count(PODS) == 16, "the first list")
    yield reflector
    reflector.stop()
    transport.close()
    thread.join(5)


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_quiet_watch_is_resumed_without_counting_as_broken(
    fake: FakeApiServer, pods_reflector: Reflector
) -> None:
    watches = lambda: [r for r in fake.requests if r.startswith("GET /api/v1/pods?") and "watch=" in r]  # noqa: E731
    wait_for(lambda: len(watches()) >= 3, "idle watches to be resumed")
    assert pods_reflector.view.broken_seconds(PODS) == 0.0
    assert len(fake.list_requests(PODS)) == 4  # 16 pods in pages of 5, listed once
    assert all("resourceVersion=" in r for r in watches())
    pod = fake.get("pods", "serve", "llm-xl-1-1")
    pod["spec"]["nodeName"] = "gpu-node-19"
    fake.put("pods", pod)
    wait_for(lambda: pods_reflector.view.pod("serve", "llm-xl-1-1").node_name == "gpu-node-19", "the move")  # type: ignore[union-attr]


def test_compacted_history_relists_through_the_error_event(
    fake: FakeApiServer, pods_reflector: Reflector
) -> None:
    fake.compact()
    fake.delete("pods", "serve", "llm-xl-3-3")
    wait_for(lambda: pods_reflector.view.pod("serve", "llm-xl-3-3") is None, "the delete")
    assert pods_reflector.view.count(PODS) == 15
    wait_for(lambda: len(fake.list_requests(PODS)) >= 7, "a relist after 410")


def test_bookmarks_move_the_resume_point(fake: FakeApiServer, pods_reflector: Reflector) -> None:
    fake.bookmark(PODS)
    wait_for(lambda: pods_reflector.resource_version == str(fake.rv), "the bookmark")
