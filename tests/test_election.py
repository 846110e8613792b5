"""A leader-election campaign (guardhook.reconcile.election, through loop.start_background) ends
when its `stop` is set, whether it holds the Lease or cannot reach the API server: a campaign left
running outlives whatever started it (the certsync envtest's stayed alive, retrying against a
stopped API server, until the interpreter finalized)."""

from __future__ import annotations

import socket
import threading
from typing import Any

from kubernetes import client

from guardhook.reconcile.loop import start_background

from envtest import wait_for
from fake_apiserver import running_fake

NS = "guardhook-system"
LEASE = "guardhook-test"
ENDS_WITHIN_SECONDS = 20.0
"""A stopped campaign notices at its next Lease call: one retry period (2 s) plus a request."""


def _holder(lease: dict[str, Any] | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def test_a_holder_stops_its_work_and_its_campaign_when_stopped() -> None:
    started, ended = threading.Event(), threading.Event()

    def work(term: threading.Event) -> None:
        started.set()
        term.wait()
        ended.set()

    stop = threading.Event()
    with running_fake() as fake:
        api = fake.api_client()
        thread = start_background("election-test", work, api, NS, LEASE, stop)
        try:
            assert started.wait(ENDS_WITHIN_SECONDS)
            assert _holder(fake.get("leases", NS, LEASE))  # it holds the Lease while working
        finally:
            stop.set()
            thread.join(timeout=ENDS_WITHIN_SECONDS)
        assert not thread.is_alive()
        assert ended.wait(ENDS_WITHIN_SECONDS)  # the work (on its own thread) was told its term ended
        renewals = len(fake.requests)
        threading.Event().wait(2.5)  # longer than a retry period: a live campaign would renew
        assert len(fake.requests) == renewals


def test_a_campaign_that_cannot_reach_the_api_server_ends_when_stopped() -> None:
    with socket.socket() as sock:  # a port nothing listens on: every Lease call is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    tried = threading.Event()
    api = client.ApiClient(configuration)
    real = api.call_api

    def calling(*args: Any, **kwargs: Any) -> Any:
        tried.set()
        return real(*args, **kwargs)

    api.call_api = calling  # type: ignore[method-assign]
    stop = threading.Event()
    thread = start_background("election-test", lambda term: term.wait(), api, NS, LEASE, stop)
    try:
        wait_for(tried.is_set, ENDS_WITHIN_SECONDS, "a first Lease call")
    finally:
        stop.set()
        thread.join(timeout=ENDS_WITHIN_SECONDS)
    assert not thread.is_alive()
