"""The real `guardhook serve --kubeconfig` (and `review`) against the in-process fake API server."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardhook.cluster.view.static import embedded_fleet_objects

from conftest import Server, clean_env, free_port, load_review
from fake_apiserver import FakeApiServer, kubeconfig_text

STALE_AFTER = 1.0


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer(max_page=5)
    server.load(embedded_fleet_objects())
    yield server
    server.stop()


def serve_args(tmp: Path, kubeconfig: Path) -> tuple[str, ...]:
    config = tmp / "config.yaml"
    config.write_text(f"clusterView:\n  staleAfterSeconds: {STALE_AFTER}\n")
    return ("--kubeconfig", str(kubeconfig), "--config", str(config))


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


def metric(server: Server, name: str, labels: str = "") -> float:
    text = server.session.get(server.url + "/metrics", timeout=5).text
    pattern = rf"^{re.escape(name)}{re.escape('{' + labels + '}') if labels else ''} (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"{name}{{{labels}}} not in /metrics"
    return float(found.group(1))


def status(server: Server, path: str) -> int:
    return server.session.get(server.url + path, timeout=5).status_code


def worker_delete(server: Server) -> dict:
    return server.review("/validate", "s01-worker-delete.validating")


def test_serve_is_ready_only_after_sync_follows_changes_and_survives_an_outage(
    fake: FakeApiServer, fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    fake.port = free_port()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    server = fresh_server(*serve_args(tmp_path, kubeconfig), wait_ready=False)

    # The API server is not there yet: alive, never ready, and no fallback to the sample fleet.
    time.sleep(1.5)
    assert status(server, "/healthz") == 200
    assert status(server, "/readyz") == 503
    assert metric(server, "guardhook_cluster_view_objects", 'kind="pods"') == 0
    never = worker_delete(server)
    assert never["allowed"] is False and "never synced" in never["status"]["message"]

    fake.start()
    wait_for(lambda: status(server, "/readyz") == 200, 30, "readyz after the API server appeared")
    assert metric(server, "guardhook_cluster_view_objects", 'kind="pods"') == 16
    assert metric(server, "guardhook_cluster_view_objects", 'kind="nodes"') == 22
    assert any("continue=" in q for q in fake.list_requests("pods")), "the pod list was not paginated"
    denied = worker_delete(server)
    assert denied["allowed"] is False and "llm-xl-0" in denied["status"]["message"]

    # A worker of the group turns not-Ready: the group is broken, deleting the worker is allowed.
    pod = fake.get("pods", "serve", "llm-xl-0-2")
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    fake.put("pods", pod)
    wait_for(lambda: worker_delete(server)["allowed"] is True, 10, "the view to follow the pod")

    # The API server goes away: still ready, but once stale the fail-closed policy denies.
    fake.stop()
    wait_for(lambda: metric(server, "guardhook_cluster_view_stale") == 1, 15, "the view to turn stale")
    assert status(server, "/readyz") == 200
    assert metric(server, "guardhook_cluster_view_stale_seconds") > STALE_AFTER
    assert metric(server, "guardhook_cluster_view_watch_restarts_total", 'kind="pods"') >= 1
    assert metric(server, "guardhook_cluster_view_last_sync_age_seconds", 'kind="pods"') > STALE_AFTER
    stale = worker_delete(server)
    assert stale["allowed"] is False
    assert "has not been refreshed" in stale["status"]["message"]

    # It comes back: the watches resume and decisions are made from the view again.
    fake.start()
    wait_for(lambda: metric(server, "guardhook_cluster_view_stale") == 0, 40, "the view to recover")
    assert worker_delete(server)["allowed"] is True


def test_a_missing_lws_crd_counts_as_synced_and_empty(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    fake = FakeApiServer(unserved={"leaderworkersets"})
    fake.load(embedded_fleet_objects())
    fake.start()
    try:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        server = fresh_server(*serve_args(tmp_path, kubeconfig))  # waits for /readyz 200
        assert metric(server, "guardhook_cluster_view_objects", 'kind="leaderworkersets"') == 0
        assert metric(server, "guardhook_cluster_view_objects", 'kind="pods"') == 16
        server.logged("does not serve leaderworkersets")
    finally:
        fake.stop()


def run_review(tmp: Path, kubeconfig: Path, review: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "review.json"
    path.write_text(__import__("json").dumps(load_review(review)))
    args = [sys.executable, "-m", "guardhook", "review", str(path), "--kubeconfig", str(kubeconfig)]
    return subprocess.run(args, capture_output=True, text=True, env=clean_env(tmp), timeout=60)


def test_review_with_a_live_source_lists_once_and_judges(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.start()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    done = run_review(tmp_path, kubeconfig, "s01-worker-delete.validating")
    assert done.returncode == 0, done.stderr
    assert '"allowed": false' in done.stdout and "llm-xl-0" in done.stdout
    assert not [r for r in fake.requests if "watch=" in r], "review must not watch"


def test_review_against_an_unreachable_server_fails_without_fallback(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://127.0.0.1:{free_port()}"))
    done = run_review(tmp_path, kubeconfig, "s01-worker-delete.validating")
    assert done.returncode == 2
    assert "cannot list objects from kubeconfig" in done.stderr  # as audit and drain-plan word it
    assert done.stdout == ""


def test_serve_with_an_unusable_kubeconfig_exits_with_the_reason(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [\n")
    args = [sys.executable, "-m", "guardhook", "serve", "--kubeconfig", str(kubeconfig)]
    args += ["--cert-dir", str(tmp_path / "certs"), "--port", str(free_port()), "--host", "127.0.0.1"]
    done = subprocess.run(args, capture_output=True, text=True, env=clean_env(tmp_path), timeout=60)
    assert done.returncode == 2
    assert f"cannot use kubeconfig {kubeconfig}" in done.stderr
